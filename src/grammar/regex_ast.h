// The parsed form of a regex (regex.h's subset): character sets, concatenation, alternation,
// bounded repetition and the ^ / $ anchors, which the parser only lets stand where they mean
// "start" and "end" of the whole match.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/code_point_set.h"

namespace tandem::grammar::front {

struct RegexNode {
  enum Kind { kEmpty, kChars, kConcat, kAlt, kRepeat, kBegin, kEnd };
  Kind kind = kEmpty;
  CodePointSet chars;           // kChars: one code point of this set
  std::vector<RegexNode> kids;  // kConcat, kAlt; kRepeat has exactly one
  int64_t min = 0, max = 0;     // kRepeat; max < 0: unbounded
  size_t offset = 0;            // kBegin, kEnd: where in the pattern (for errors)
};

// The largest repetition count accepted in {n,m}: the engine expands counted repeats.
inline constexpr int64_t kMaxRegexRepeat = 10000;
// The deepest nesting of groups accepted.
inline constexpr int kMaxRegexNesting = 100;

// Parses `regex` (UTF-8). GrammarError names any refused construct and its offset (in code
// points); messages start with "regex".
RegexNode parse_regex(std::string_view regex);

// The ECMAScript / ASCII meanings of \d, \w and \s (docs/structured-outputs.md says why not
// Python's Unicode ones).
CodePointSet digit_set();
CodePointSet word_set();
CodePointSet space_set();

}  // namespace tandem::grammar::front
