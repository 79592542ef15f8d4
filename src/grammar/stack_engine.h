// Runs the recursive transition network (automaton.h) as a pushdown automaton over bytes. A
// stack is (node, parent set): the node is where matching stands in the current rule, the
// parent set the stacks (or bottoms) it returns into when the rule ends. Stacks and parent sets
// are hash-consed, so equal ones share one id and tails are shared. A state is the set of
// stacks the input so far can be in, with one stack per top node: two stacks with the same top
// behave the same until they pop, so they merge into one whose parent set is the union (a
// graph-structured stack, as in GLR parsing). Without merging, an ambiguous recursive grammar
// (`x ::= "[" x x "]" | ""`) doubles its stacks with every bracket. States are hash-consed and
// step(state, byte) is memoized, so following text that was seen before is table lookups.
//
// Stack bottoms: kEmpty under the root rule (popping into it ends the sentence), kBottom under
// the rule whose tokens are being classified (popping into it means "the rule ended here"), and
// kAny, an unknown caller: popping into it continues at every return node of the rule, the
// over-approximate follow used to drop impossible context-dependent tokens at compile time.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"

namespace tandem::grammar {

class StackEngine {
 public:
  static constexpr int32_t kEmpty = -1, kBottom = -2, kAny = -3;
  static constexpr int32_t kDead = 0;  // the state with no stacks

  struct Stack {
    int32_t node, parents;  // parents: a parent set id
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted; one per top node; closed under popping ended rules
    bool at_end = false;          // the root rule may end here (a kEmpty stack at an accept)
    bool at_bottom = false;       // the classified rule may end here (a kBottom stack likewise)
  };

  // dense_steps: memoize steps in a 256-entry row per state (compile time: few states, hot
  // loop); otherwise in a hash map (a matcher's states grow with its output).
  StackEngine(const Automaton& a, bool dense_steps);

  // A parent set of stack ids and bottoms (any order, duplicates allowed).
  int32_t parent_set(std::vector<int32_t> members);
  int32_t parent_set_of(int32_t member);  // {member}, without building a vector
  const std::vector<int32_t>& members(int32_t set) const { return sets_[set]; }
  int32_t stack(int32_t node, int32_t parents);
  int32_t stack_on(int32_t node, int32_t bottom) { return stack(node, parent_set_of(bottom)); }
  // The state of these stacks and everything reachable by popping rules that may end.
  int32_t state_of(const std::vector<int32_t>& stacks) {
    return state_of(stacks.data(), stacks.size());
  }
  int32_t state_of(const int32_t* stacks, size_t n);
  int32_t step(int32_t state, uint8_t byte) {
    if (state == kDead) return kDead;
    if (dense_) {
      if (rows_[state] < 0) {
        rows_[state] = static_cast<int32_t>(dense_next_.size());
        dense_next_.resize(dense_next_.size() + 256, -1);
      }
      int32_t& slot = dense_next_[rows_[state] + byte];
      if (slot < 0) slot = compute_step(state, byte);
      return slot;
    }
    const uint64_t key = (static_cast<uint64_t>(state) << 8) | byte;
    auto it = sparse_next_.find(key);
    if (it != sparse_next_.end()) return it->second;
    const int32_t next = compute_step(state, byte);
    sparse_next_.emplace(key, next);
    return next;
  }
  int32_t step(int32_t state, const char* bytes, size_t n) {
    for (size_t i = 0; i < n && state != kDead; ++i)
      state = step(state, static_cast<uint8_t>(bytes[i]));
    return state;
  }

  bool at_bottom(int32_t state) const { return bottom_[state] != 0; }
  const State& state(int32_t id) const { return states_[id]; }
  const Stack& stack_at(int32_t id) const { return stacks_[id]; }
  const Automaton& automaton() const { return a_; }
  size_t num_states() const { return states_.size(); }
  size_t num_stacks() const { return stacks_.size(); }

 private:
  int32_t compute_step(int32_t state, uint8_t byte);

  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 0xcbf29ce484222325ull;
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 0x100000001b3ull;
      return static_cast<size_t>(h);
    }
  };

  const Automaton& a_;
  const bool dense_;
  std::vector<Stack> stacks_;
  std::unordered_map<uint64_t, int32_t> stack_ids_;
  std::vector<std::vector<int32_t>> sets_;  // [parent sets] sorted members
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> set_ids_;
  std::unordered_map<int32_t, int32_t> singleton_sets_;  // member -> id of {member}
  std::vector<State> states_;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> state_ids_;
  std::vector<uint8_t> bottom_;      // [states] State::at_bottom, packed for the hot loop
  std::vector<int32_t> rows_;        // [states] dense: offset of the state's row, -1 if none
  std::vector<int32_t> dense_next_;  // [rows * 256]
  std::unordered_map<uint64_t, int32_t> sparse_next_;
  // Reused buffers (the hot loop of compile time otherwise allocates on every step):
  // compute_step's next stacks and expansion work list, state_of's closure and key.
  std::vector<int32_t> next_, expand_, work_, key_, parents_;
  std::vector<uint32_t> seen_mark_;  // [stacks] generation marks for visited sets
  uint32_t generation_ = 0;
};

}  // namespace tandem::grammar
