// UTF-8 <-> code points and the Unicode character classes Python's str methods use. Template
// strings are stored as UTF-8, but Python indexes, slices and measures them in code points.
#pragma once

#include <string>
#include <string_view>

namespace tandem::jinja::unicode {

// Decodes UTF-8 into code points; an invalid byte becomes U+FFFD so rendering never stops on it.
std::u32string decode(std::string_view s);
std::string encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);

// Number of code points (Python len()).
size_t length(std::string_view s);
// Byte offset of code point `index` (clamped to the end).
size_t byte_offset(std::string_view s, size_t index);

// Python str.isspace(): the whitespace that split()/strip() remove and lstrip_blocks sees.
bool is_space(char32_t c);
// str.splitlines() line boundaries.
bool is_line_break(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_alnum(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_title(char32_t c);
bool is_cased(char32_t c);
// Regex \w for str patterns: alphanumerics and underscore.
bool is_word(char32_t c);
// str.isprintable(), which decides what repr() escapes.
bool is_printable(char32_t c);

// Case mappings with Python's few one-to-many special cases (e.g. German sharp s upper-cases
// to "SS"); everything else follows the Unicode simple mappings.
void append_upper(std::u32string& out, char32_t c);
void append_lower(std::u32string& out, char32_t c);
void append_title(std::u32string& out, char32_t c);

}  // namespace tandem::jinja::unicode
