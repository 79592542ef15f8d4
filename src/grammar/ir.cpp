#include "grammar/ir.h"

#include <algorithm>

namespace tandem::grammar::ir {

std::vector<CodeRange> class_code_points(const Expr& e) {
  std::vector<CodeRange> r = e.ranges;
  std::sort(r.begin(), r.end(), [](CodeRange a, CodeRange b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (CodeRange c : r) {
    if (!merged.empty() && c.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, c.hi);
    } else {
      merged.push_back(c);
    }
  }
  if (e.negated) {
    std::vector<CodeRange> comp;
    uint32_t next = 0;
    for (CodeRange c : merged) {
      if (c.lo > next) comp.push_back({next, c.lo - 1});
      next = c.hi + 1;
    }
    if (next <= 0x10FFFF) comp.push_back({next, 0x10FFFF});
    merged = std::move(comp);
  }
  // Surrogates are not scalar values: no valid UTF-8 encodes them.
  std::vector<CodeRange> out;
  for (CodeRange c : merged) {
    if (c.hi < 0xD800 || c.lo > 0xDFFF) {
      out.push_back(c);
      continue;
    }
    if (c.lo < 0xD800) out.push_back({c.lo, 0xD7FF});
    if (c.hi > 0xDFFF) out.push_back({0xE000, c.hi});
  }
  return out;
}

std::vector<std::string> literals(const Grammar& g) {
  std::vector<std::string> out;
  for (const Expr& e : g.exprs)
    if (e.op == Op::kLiteral && !e.bytes.empty()) out.push_back(e.bytes);
  return out;
}

}  // namespace tandem::grammar::ir
