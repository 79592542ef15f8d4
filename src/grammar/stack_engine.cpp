#include "grammar/stack_engine.h"

#include <algorithm>

namespace tandem::grammar {

StackEngine::StackEngine(const Automaton& a, bool dense_steps) : a_(a), dense_(dense_steps) {
  states_.push_back({});  // kDead
  state_ids_.emplace(std::vector<int32_t>{}, kDead);
  rows_.push_back(-1);
  bottom_.push_back(0);
  for (int32_t b : {kEmpty, kBottom, kAny}) parent_set_of(b);
}

int32_t StackEngine::parent_set_of(int32_t member) {
  auto it = singleton_sets_.find(member);
  if (it != singleton_sets_.end()) return it->second;
  const int32_t id = parent_set({member});
  singleton_sets_.emplace(member, id);
  return id;
}

int32_t StackEngine::parent_set(std::vector<int32_t> members) {
  std::sort(members.begin(), members.end());
  members.erase(std::unique(members.begin(), members.end()), members.end());
  auto [it, fresh] = set_ids_.try_emplace(std::move(members), static_cast<int32_t>(sets_.size()));
  if (fresh) sets_.push_back(it->first);
  return it->second;
}

int32_t StackEngine::stack(int32_t node, int32_t parents) {
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) | static_cast<uint32_t>(parents);
  auto [it, fresh] = stack_ids_.try_emplace(key, static_cast<int32_t>(stacks_.size()));
  if (fresh) {
    stacks_.push_back({node, parents});
    seen_mark_.push_back(0);
  }
  return it->second;
}

int32_t StackEngine::state_of(const int32_t* stacks, size_t n) {
  ++generation_;
  work_.clear();
  auto add = [&](int32_t s) {
    if (seen_mark_[s] != generation_) seen_mark_[s] = generation_, work_.push_back(s);
  };
  for (size_t i = 0; i < n; ++i) add(stacks[i]);
  // Close under popping: a stack whose rule may end here also stands for its parents.
  bool at_end = false, at_bottom = false;
  for (size_t i = 0; i < work_.size(); ++i) {
    const Stack st = stacks_[work_[i]];
    if (!a_.accept[st.node]) continue;
    // By index: stack_on() below may add parent sets (and move sets_).
    for (size_t k = 0; k < sets_[st.parents].size(); ++k) {
      const int32_t p = sets_[st.parents][k];
      if (p >= 0) {
        add(p);
      } else if (p == kEmpty) {
        at_end = true;
      } else if (p == kBottom) {
        at_bottom = true;
      } else {  // kAny: every place the rule is called from
        const int32_t rule = a_.node_rule[st.node];
        for (int32_t ret : a_.return_nodes[rule]) add(stack_on(ret, kAny));
        if (rule == a_.root) at_end = true;
      }
    }
  }
  // Merge stacks with the same top node (their parent sets unite).
  std::vector<int32_t>& key = key_;
  key.assign(work_.begin(), work_.end());
  std::sort(key.begin(), key.end(), [&](int32_t x, int32_t y) {
    return stacks_[x].node != stacks_[y].node ? stacks_[x].node < stacks_[y].node : x < y;
  });
  size_t out = 0;
  for (size_t i = 0; i < key.size();) {
    size_t j = i + 1;
    while (j < key.size() && stacks_[key[j]].node == stacks_[key[i]].node) ++j;
    if (j == i + 1) {
      key[out++] = key[i];
    } else {
      parents_.clear();
      for (size_t k = i; k < j; ++k) {
        const auto& m = sets_[stacks_[key[k]].parents];
        parents_.insert(parents_.end(), m.begin(), m.end());
      }
      const int32_t node = stacks_[key[i]].node;
      key[out++] = stack(node, parent_set(parents_));
    }
    i = j;
  }
  key.resize(out);
  std::sort(key.begin(), key.end());
  if (key.empty() && !at_end && !at_bottom) return kDead;
  // Most steps lead to a state seen before: look it up before copying the key.
  if (auto it = state_ids_.find(key); it != state_ids_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(states_.size());
  state_ids_.emplace(key, id);
  states_.push_back({key, at_end, at_bottom});
  rows_.push_back(-1);
  bottom_.push_back(at_bottom);
  return id;
}

int32_t StackEngine::compute_step(int32_t state, uint8_t byte) {
  // Expands calls lazily: a stack whose top may call a rule pushes the callee's start (and pops
  // it again if the callee may end at once). No left recursion, so this terminates.
  ++generation_;
  std::vector<int32_t>& next = next_;
  next.clear();
  std::vector<int32_t>& work = expand_;
  work.assign(states_[state].stacks.begin(), states_[state].stacks.end());
  for (int32_t s : work) seen_mark_[s] = generation_;
  const size_t original = work.size();
  for (size_t i = 0; i < work.size(); ++i) {
    const Stack st = stacks_[work[i]];
    for (int32_t e = a_.byte_begin[st.node]; e < a_.byte_begin[st.node + 1]; ++e) {
      const ByteEdge& be = a_.byte_edges[e];
      if (be.lo <= byte && byte <= be.hi) next.push_back(stack(be.to, st.parents));
    }
    for (int32_t c = a_.call_begin[st.node]; c < a_.call_begin[st.node + 1]; ++c) {
      const CallEdge& ce = a_.call_edges[c];
      const int32_t ret = stack(ce.ret, st.parents);
      const int32_t pushed = stack(a_.rule_start[ce.rule], parent_set_of(ret));
      if (seen_mark_[pushed] != generation_)
        seen_mark_[pushed] = generation_, work.push_back(pushed);
    }
    // Stacks of the state were closed under popping already; pushed ones were not. Popping
    // into a bottom needs no work here: a nullable call is also an epsilon edge (automaton.h),
    // so the caller's own stack already accounted for that rule end.
    if (i >= original && a_.accept[st.node]) {
      for (int32_t p : sets_[st.parents]) {
        if (p >= 0 && seen_mark_[p] != generation_) seen_mark_[p] = generation_, work.push_back(p);
      }
    }
  }
  return state_of(next.data(), next.size());
}

}  // namespace tandem::grammar
