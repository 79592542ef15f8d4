#include "grammar/stack_engine.h"

#include <algorithm>

namespace tandem::grammar {

StackEngine::StackEngine(const Automaton& a, bool dense_steps) : a_(a), dense_(dense_steps) {
  states_.push_back({});  // kDead
  state_ids_.emplace(std::vector<int32_t>{}, kDead);
  rows_.push_back(-1);
  bottom_.push_back(0);
}

int32_t StackEngine::stack(int32_t node, int32_t parent) {
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(parent);
  auto [it, fresh] = stack_ids_.try_emplace(key, static_cast<int32_t>(stacks_.size()));
  if (fresh) {
    stacks_.push_back({node, parent});
    seen_mark_.push_back(0);
  }
  return it->second;
}

int32_t StackEngine::state_of(std::vector<int32_t> stacks) {
  ++generation_;
  work_.clear();
  for (int32_t s : stacks)
    if (seen_mark_[s] != generation_) seen_mark_[s] = generation_, work_.push_back(s);
  bool at_end = false, at_bottom = false;
  for (size_t i = 0; i < work_.size(); ++i) {
    const Stack st = stacks_[work_[i]];
    if (!a_.accept[st.node]) continue;
    auto add = [&](int32_t s) {
      if (seen_mark_[s] != generation_) seen_mark_[s] = generation_, work_.push_back(s);
    };
    if (st.parent >= 0) {
      add(st.parent);
    } else if (st.parent == kEmpty) {
      at_end = true;
    } else if (st.parent == kBottom) {
      at_bottom = true;
    } else {
      const int32_t rule = a_.node_rule[st.node];
      for (int32_t ret : a_.return_nodes[rule]) add(stack(ret, kAny));
      if (rule == a_.root) at_end = true;
    }
  }
  std::vector<int32_t> key(work_);
  std::sort(key.begin(), key.end());
  if (key.empty() && !at_end && !at_bottom) return kDead;
  auto [it, fresh] = state_ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (fresh) {
    states_.push_back({it->first, at_end, at_bottom});
    rows_.push_back(-1);
    bottom_.push_back(at_bottom);
  }
  return it->second;
}

int32_t StackEngine::compute_step(int32_t state, uint8_t byte) {
  // Expands calls lazily: a stack whose top may call a rule pushes the callee's start (and pops
  // it again if the callee may end at once). No left recursion, so this terminates.
  ++generation_;
  std::vector<int32_t>& next = scratch_;
  next.clear();
  std::vector<int32_t> work = states_[state].stacks;
  for (int32_t s : work) seen_mark_[s] = generation_;
  const size_t original = work.size();
  for (size_t i = 0; i < work.size(); ++i) {
    const int32_t s = work[i];
    const Stack st = stacks_[s];
    for (int32_t e = a_.byte_begin[st.node]; e < a_.byte_begin[st.node + 1]; ++e) {
      const ByteEdge& be = a_.byte_edges[e];
      if (be.lo <= byte && byte <= be.hi) next.push_back(stack(be.to, st.parent));
    }
    for (int32_t c = a_.call_begin[st.node]; c < a_.call_begin[st.node + 1]; ++c) {
      const CallEdge& ce = a_.call_edges[c];
      const int32_t pushed = stack(a_.rule_start[ce.rule], stack(ce.ret, st.parent));
      if (seen_mark_[pushed] != generation_)
        seen_mark_[pushed] = generation_, work.push_back(pushed);
    }
    // Stacks of the state were closed under popping already; pushed ones were not. Popping
    // into a bottom needs no work here: a nullable call is also an epsilon edge (automaton.h),
    // so the caller's own stack already accounted for that rule end.
    if (i >= original && a_.accept[st.node] && st.parent >= 0 &&
        seen_mark_[st.parent] != generation_) {
      seen_mark_[st.parent] = generation_;
      work.push_back(st.parent);
    }
  }
  return state_of(std::vector<int32_t>(next.begin(), next.end()));
}

}  // namespace tandem::grammar
