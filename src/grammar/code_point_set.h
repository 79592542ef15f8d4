// A set of Unicode code points as sorted, disjoint, non-adjacent ranges: the value of a regex
// character class and of the JSON-string character sets the front ends build.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::grammar::front {

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;
// UTF-8 cannot encode surrogates, so no set ever holds them: "every code point" and every
// complement leave U+D800..U+DFFF out.
inline constexpr char32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

class CodePointSet {
 public:
  struct Range {
    char32_t lo, hi;  // inclusive
  };

  CodePointSet() = default;
  static CodePointSet single(char32_t c) { return range(c, c); }
  static CodePointSet range(char32_t lo, char32_t hi);
  static CodePointSet all();

  void add(char32_t lo, char32_t hi);
  void add(char32_t c) { add(c, c); }
  void add(const CodePointSet& other);
  CodePointSet complement() const;
  CodePointSet intersect(const CodePointSet& other) const;
  CodePointSet minus(const CodePointSet& other) const { return intersect(other.complement()); }

  bool contains(char32_t c) const;
  bool empty() const { return ranges_.empty(); }
  bool is_single() const { return ranges_.size() == 1 && ranges_[0].lo == ranges_[0].hi; }
  uint64_t count() const;
  const std::vector<Range>& ranges() const { return ranges_; }
  bool operator==(const CodePointSet& o) const;

 private:
  std::vector<Range> ranges_;
};

}  // namespace tandem::grammar::front
