// Which rules the automaton compiler copies into their callers instead of calling: rules off
// every call cycle whose automaton, by a rough node count, stays small. Fewer rule ends means
// fewer tokens whose fate depends on the caller (token_masks.h).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/analysis.h"
#include "grammar/ir.h"

namespace tandem::grammar {

class InlinePlan {
 public:
  InlinePlan(const ir::Grammar& g, const ir::Analysis& a, int max_nodes);
  bool inlined(int32_t rule) const { return inline_[rule] != 0; }

 private:
  int64_t rule_size(int32_t r);
  int64_t expr_size(int32_t id);

  const ir::Grammar& g_;
  const ir::Analysis& a_;
  const int max_nodes_;
  std::vector<std::vector<int32_t>> callees_;  // [rules] rules referenced by the body
  std::vector<uint8_t> on_cycle_;              // [rules] the rule can reach itself
  std::vector<int64_t> size_;                  // [rules] memoized estimate, -1 if not yet
  std::vector<uint8_t> inline_;                // [rules]
};

}  // namespace tandem::grammar
