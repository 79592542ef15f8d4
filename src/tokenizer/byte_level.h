// GPT-2's byte-level alphabet: each of the 256 byte values is shown as one printable character
// so that BPE can work on any bytes. Printable Latin-1 bytes stand for themselves; the others
// map to U+0100 onwards in byte order (space becomes 'Ġ', newline 'Ċ').
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::tok {

// The split regex of GPT-2, used by the ByteLevel pre-tokenizer when use_regex is set.
inline constexpr const char* kGpt2SplitPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// The character that stands for byte `b`.
char32_t byte_to_char(unsigned char b);
// The UTF-8 encoding of byte_to_char(b), for all 256 bytes.
const std::array<std::string, 256>& byte_to_utf8();
// The byte that `c` stands for, if it is one of the 256 characters.
std::optional<unsigned char> char_to_byte(char32_t c);

// Every byte of `bytes` replaced by its character (the ByteLevel pre-tokenizer's mapping).
std::string bytes_to_chars(std::string_view bytes);
// The inverse for one token: its bytes if every character is in the alphabet, else the token's
// own UTF-8 (HF's ByteLevel decoder does the same, so added tokens decode to their content).
std::string chars_to_bytes(std::string_view token);

}  // namespace tandem::tok
