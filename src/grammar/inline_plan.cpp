#include "grammar/inline_plan.h"

#include <algorithm>

#include "grammar/utf8_ranges.h"

namespace tandem::grammar {

namespace {

constexpr int64_t kHuge = int64_t{1} << 40;

void collect_refs(const ir::Grammar& g, int32_t id, std::vector<int32_t>& out) {
  const ir::Expr& e = g.exprs[id];
  if (e.op == ir::Op::kRef) out.push_back(e.rule);
  for (int32_t c : e.items) collect_refs(g, c, out);
}

bool reaches(const std::vector<std::vector<int32_t>>& callees, int32_t r) {
  std::vector<uint8_t> seen(callees.size(), 0);
  std::vector<int32_t> work = callees[r];
  while (!work.empty()) {
    const int32_t x = work.back();
    work.pop_back();
    if (x == r) return true;
    if (seen[x]) continue;
    seen[x] = 1;
    for (int32_t y : callees[x]) work.push_back(y);
  }
  return false;
}

}  // namespace

InlinePlan::InlinePlan(const ir::Grammar& g, const ir::Analysis& a, int max_nodes)
    : g_(g), a_(a), max_nodes_(max_nodes) {
  const size_t n = g.rules.size();
  callees_.resize(n);
  for (size_t r = 0; r < n; ++r) collect_refs(g, g.rules[r].body, callees_[r]);
  on_cycle_.assign(n, 0);
  for (size_t r = 0; r < n; ++r) on_cycle_[r] = reaches(callees_, static_cast<int32_t>(r));
  size_.assign(n, -1);
  inline_.assign(n, 0);
  for (size_t r = 0; r < n; ++r) {
    const auto rule = static_cast<int32_t>(r);
    inline_[r] = rule != g.root && !on_cycle_[r] && a.productive[r] && rule_size(rule) <= max_nodes;
  }
}

// The rule's node count with the callees that will be inlined copied in.
int64_t InlinePlan::rule_size(int32_t r) {
  if (on_cycle_[r]) return kHuge;
  if (size_[r] < 0) size_[r] = expr_size(g_.rules[r].body);
  return size_[r];
}

int64_t InlinePlan::expr_size(int32_t id) {
  const ir::Expr& e = g_.exprs[id];
  int64_t s = 0;
  switch (e.op) {
    case ir::Op::kLiteral:
      return static_cast<int64_t>(e.bytes.size());
    case ir::Op::kClass: {
      // One node per continuation byte still to read, at most (suffixes are shared).
      int64_t n = 1;
      for (const ByteSeq& seq : utf8_sequences(ir::class_code_points(e))) n += seq.size() - 1;
      return n;
    }
    case ir::Op::kRef: {
      if (on_cycle_[e.rule] || e.rule == g_.root || !a_.productive[e.rule]) return 1;
      const int64_t callee = rule_size(e.rule);
      return callee <= max_nodes_ ? callee : 1;  // inlined, or a call edge
    }
    case ir::Op::kSeq:
    case ir::Op::kChoice:
      for (int32_t c : e.items) s = std::min(s + expr_size(c), kHuge);
      return s + 1;
    case ir::Op::kRepeat: {
      const int64_t copies = e.max == ir::kUnbounded ? e.min + 1 : std::max(e.max, 1);
      return std::min(expr_size(e.items[0]) * copies + 1, kHuge);
    }
  }
  return kHuge;
}

}  // namespace tandem::grammar
