#include "grammar/code_point_set.h"

#include <algorithm>

namespace tandem::grammar::front {

CodePointSet CodePointSet::range(char32_t lo, char32_t hi) {
  CodePointSet s;
  s.add(lo, hi);
  return s;
}

CodePointSet CodePointSet::all() {
  CodePointSet s;
  s.add(0, kMaxCodePoint);
  return s;
}

void CodePointSet::add(char32_t lo, char32_t hi) {
  if (hi > kMaxCodePoint) hi = kMaxCodePoint;
  if (lo > hi) return;
  // Cut the surrogates out before inserting, so every stored range is encodable.
  if (lo <= kSurrogateLast && hi >= kSurrogateFirst) {
    if (lo < kSurrogateFirst) add(lo, kSurrogateFirst - 1);
    if (hi > kSurrogateLast) add(kSurrogateLast + 1, hi);
    return;
  }
  std::vector<Range> out;
  out.reserve(ranges_.size() + 1);
  Range cur{lo, hi};
  bool placed = false;
  for (const Range& r : ranges_) {
    // Ranges separated only by the surrogate gap stay separate: the gap is not "adjacent".
    if (r.hi + 1 < cur.lo) {
      out.push_back(r);
    } else if (cur.hi + 1 < r.lo) {
      if (!placed) out.push_back(cur), placed = true;
      out.push_back(r);
    } else {
      cur.lo = std::min(cur.lo, r.lo);
      cur.hi = std::max(cur.hi, r.hi);
    }
  }
  if (!placed) out.push_back(cur);
  std::sort(out.begin(), out.end(), [](const Range& a, const Range& b) { return a.lo < b.lo; });
  ranges_ = std::move(out);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const Range& r : other.ranges_) add(r.lo, r.hi);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  char32_t next = 0;
  for (const Range& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out;
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const {
  CodePointSet out;
  for (const Range& a : ranges_) {
    for (const Range& b : other.ranges_) {
      char32_t lo = std::max(a.lo, b.lo), hi = std::min(a.hi, b.hi);
      if (lo <= hi) out.add(lo, hi);
    }
  }
  return out;
}

bool CodePointSet::contains(char32_t c) const {
  for (const Range& r : ranges_) {
    if (c >= r.lo && c <= r.hi) return true;
  }
  return false;
}

uint64_t CodePointSet::count() const {
  uint64_t n = 0;
  for (const Range& r : ranges_) n += r.hi - r.lo + 1;
  return n;
}

bool CodePointSet::operator==(const CodePointSet& o) const {
  if (ranges_.size() != o.ranges_.size()) return false;
  for (size_t i = 0; i < ranges_.size(); ++i) {
    if (ranges_[i].lo != o.ranges_[i].lo || ranges_[i].hi != o.ranges_[i].hi) return false;
  }
  return true;
}

}  // namespace tandem::grammar::front
