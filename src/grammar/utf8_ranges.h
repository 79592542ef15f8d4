// Code-point ranges as UTF-8 byte-range sequences: [U+0080, U+07FF] is [C2-DF][80-BF], and any
// range splits into a few such "rectangles" where each byte position ranges independently.
// The automaton compiler turns a character class into these paths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/ir.h"

namespace tandem::grammar {

struct ByteRange {
  uint8_t lo = 0, hi = 0;
  bool operator==(const ByteRange&) const = default;
};
using ByteSeq = std::vector<ByteRange>;  // [1..4]: one range per byte of the encoding

// Byte sequences matching exactly the UTF-8 encodings of the code points in `ranges` (which
// must exclude the surrogates, as ir::class_code_points does), in code-point order.
std::vector<ByteSeq> utf8_sequences(const std::vector<ir::CodeRange>& ranges);

// Appends the UTF-8 encoding of code point c (c <= U+10FFFF).
void append_utf8(std::string& out, char32_t c);

}  // namespace tandem::grammar
