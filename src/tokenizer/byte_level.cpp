#include "tokenizer/byte_level.h"

#include <unordered_map>

#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8;
  std::unordered_map<char32_t, unsigned char> to_byte;
  Tables() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(to_utf8[b], to_char[b]);
      to_byte.emplace(to_char[b], static_cast<unsigned char>(b));
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(unsigned char b) {
  return tables().to_char[b];
}

const std::array<std::string, 256>& byte_to_utf8() {
  return tables().to_utf8;
}

std::optional<unsigned char> char_to_byte(char32_t c) {
  const auto& m = tables().to_byte;
  auto it = m.find(c);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::string bytes_to_chars(std::string_view bytes) {
  const auto& utf8 = byte_to_utf8();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += utf8[static_cast<unsigned char>(c)];
  return out;
}

std::string chars_to_bytes(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const Utf8Char c = decode_utf8(token, i);
    const auto b = char_to_byte(c.cp);
    if (!b) return std::string(token);
    out.push_back(static_cast<char>(*b));
    i += c.len;
  }
  return out;
}

}  // namespace tandem::tok
