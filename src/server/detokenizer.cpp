#include "server/detokenizer.h"

#include "tokenizer/utf8.h"

namespace tandem::server {

namespace {

// Bytes a character starting with `lead` occupies; 0 for bytes that never start one.
size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

}  // namespace

size_t utf8_stable_prefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const tok::Utf8Char c = tok::decode_utf8(bytes, pos);
    // An invalid unit that runs to the end is only a truncation when it is a valid prefix: it
    // starts with a lead byte and is shorter than that lead promises (decode_utf8 consumed the
    // maximal valid prefix, so its continuation bytes are valid). More bytes may complete it.
    if (c.cp == tok::kInvalidChar && pos + c.len == bytes.size()) {
      const size_t need = utf8_length(static_cast<unsigned char>(bytes[pos]));
      if (need > c.len) return pos;
    }
    pos += c.len;
  }
  return pos;
}

IncrementalDetokenizer::IncrementalDetokenizer(Tokenizer tok, bool skip_special_tokens,
                                               std::unordered_set<int32_t> keep_special)
    : tok_(std::move(tok)),
      skip_special_(skip_special_tokens),
      keep_special_(std::move(keep_special)) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (skip_special_ && tok_.is_special(id) && !keep_special_.contains(id)) return {};
  pending_ += tok_.token_bytes(id);
  const size_t stable = utf8_stable_prefix(pending_);
  std::string out = tok::to_valid_utf8(std::string_view(pending_).substr(0, stable));
  pending_.erase(0, stable);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = tok::to_valid_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace tandem::server
