// UTF-8 helpers shared by the tokenizer stages. Every stage accepts arbitrary bytes: valid UTF-8
// behaves exactly like Hugging Face tokenizers (which only ever sees valid text), and an invalid
// sequence is carried through as opaque bytes so that a byte-level model can still encode it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tok {

struct Utf8Char {
  char32_t cp;   // the code point; kInvalidChar when the bytes do not form one
  uint32_t len;  // bytes consumed (>= 1 whenever text is not exhausted)
};
inline constexpr char32_t kInvalidChar = 0xFFFFFFFF;

// Decodes the character at text[pos]. An invalid sequence consumes its maximal valid prefix
// (at least one byte), the unit that Unicode's best practice and Rust's from_utf8_lossy replace
// with one U+FFFD.
Utf8Char decode_utf8(std::string_view text, size_t pos);

void append_utf8(std::string& out, char32_t cp);

bool is_valid_utf8(std::string_view text);

// Invalid sequences become U+FFFD, one per maximal prefix, as Rust's String::from_utf8_lossy.
std::string to_valid_utf8(std::string_view bytes);

// Rust's char::is_whitespace: the Unicode White_Space property.
bool is_whitespace(char32_t cp);
// Rust regex's Unicode \w (used for added tokens' single_word): letters, marks, decimal and
// letter numbers, connector punctuation and the join controls.
bool is_word_char(char32_t cp);
// Rust's char::is_numeric: general categories Nd, Nl and No.
bool is_numeric(char32_t cp);

}  // namespace tandem::tok
