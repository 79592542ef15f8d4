// Python str methods on UTF-8 text, with Python's rules: whitespace is Unicode whitespace,
// indexes count code points, split() without a separator collapses runs. Templates lean on
// these (strip('\n'), split('</think>'), rsplit, startswith) to reshape message content.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::jinja::py {

enum class Side { kBoth, kLeft, kRight };
// chars: the set to strip; nullopt strips whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, Side side);
// sep nullopt splits on whitespace runs; maxsplit < 0 means no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep,
                               long maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep,
                                long maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, long count);
// Code point index of the first/last match within [start, end) (Python slice bounds), or -1.
long find(std::string_view s, std::string_view sub, std::optional<long> start,
          std::optional<long> end, bool reverse);
long count(std::string_view s, std::string_view sub);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()
std::string swapcase(std::string_view s);

enum class CharClass { kSpace, kDigit, kDecimal, kNumeric, kAlpha, kAlnum };
// str.isspace() etc.: non-empty and every code point in the class.
bool all_of(std::string_view s, CharClass k);
bool is_lower(std::string_view s);
bool is_upper(std::string_view s);

std::string center(std::string_view s, long width, char32_t fill);
std::string ljust(std::string_view s, long width, char32_t fill);
std::string rjust(std::string_view s, long width, char32_t fill);

// Jinja's |title filter: upper-cases the first letter after '-', whitespace or an opening
// bracket (unlike str.title(), "it's" stays "It's").
std::string jinja_title(std::string_view s);
// Jinja's |wordcount: the number of \w+ runs.
long word_count(std::string_view s);
// markupsafe.escape: & < > " ' as HTML entities.
std::string html_escape(std::string_view s);

}  // namespace tandem::jinja::py
