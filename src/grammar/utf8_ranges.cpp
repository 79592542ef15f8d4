#include "grammar/utf8_ranges.h"

namespace tandem::grammar {

namespace {

int encoded_length(uint32_t cp) {
  return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

void encode(uint32_t cp, int len, uint8_t* out) {
  static constexpr uint8_t kLead[] = {0, 0x00, 0xC0, 0xE0, 0xF0};
  for (int i = len - 1; i > 0; --i) out[i] = 0x80 | (cp & 0x3F), cp >>= 6;
  out[0] = kLead[len] | cp;
}

// [lo, hi] within one encoded length. Splits until the range is a rectangle: every trailing
// 6-bit group spans its full 0..63 wherever a higher group varies.
void split(uint32_t lo, uint32_t hi, std::vector<ByteSeq>& out) {
  const int len = encoded_length(lo);
  for (int i = 1; i < len; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;  // the low i continuation bytes
    if ((lo & ~m) == (hi & ~m)) continue;    // they differ only below: fine at this level
    if ((lo & m) != 0) {                     // lo starts mid-block: peel its partial block
      split(lo, lo | m, out);
      split((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {  // hi ends mid-block
      split(lo, (hi & ~m) - 1, out);
      split(hi & ~m, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  encode(lo, len, a);
  encode(hi, len, b);
  ByteSeq seq(len);
  for (int i = 0; i < len; ++i) seq[i] = {a[i], b[i]};
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<ByteSeq> utf8_sequences(const std::vector<ir::CodeRange>& ranges) {
  std::vector<ByteSeq> out;
  for (ir::CodeRange r : ranges) {
    uint32_t lo = r.lo;
    // One piece per encoded length.
    for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu, 0x10FFFFu}) {
      if (lo > r.hi) break;
      if (lo > bound) continue;
      const uint32_t hi = r.hi < bound ? r.hi : bound;
      split(lo, hi, out);
      lo = hi + 1;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace tandem::grammar
