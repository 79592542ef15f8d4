#include "grammar/token_masks.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string_view>

#include "core/thread_pool.h"
#include "grammar/stack_engine.h"

namespace tandem::grammar {

TokenSet TokenSet::from_members(std::vector<int32_t>& members,
                                const std::vector<uint8_t>& is_member) {
  TokenSet s;
  const size_t n = members.size(), v = is_member.size();
  const size_t words = (v + 31) / 32;
  if (n <= words && n <= v - n) {
    s.kind = kList;
    std::sort(members.begin(), members.end());
    s.data.assign(members.begin(), members.end());
  } else if (v - n <= words) {
    s.kind = kComplement;
    for (uint32_t id = 0; id < v; ++id)
      if (!is_member[id]) s.data.push_back(id);
  } else {
    s.kind = kBitset;
    s.data.assign(words, 0);
    for (int32_t id : members) s.data[id >> 5] |= 1u << (id & 31);
  }
  return s;
}

void TokenSet::or_into(uint32_t* bits, int32_t vocab_size, uint32_t* scratch) const {
  const size_t words = (static_cast<size_t>(vocab_size) + 31) / 32;
  switch (kind) {
    case kList:
      for (uint32_t id : data) bits[id >> 5] |= 1u << (id & 31);
      return;
    case kBitset:
      for (size_t w = 0; w < words; ++w) bits[w] |= data[w];
      return;
    case kComplement:
      std::memset(scratch, 0xFF, words * 4);
      if (vocab_size % 32) scratch[words - 1] = (1u << (vocab_size % 32)) - 1;
      for (uint32_t id : data) scratch[id >> 5] &= ~(1u << (id & 31));
      for (size_t w = 0; w < words; ++w) bits[w] |= scratch[w];
      return;
  }
}

namespace {

class Classifier {
 public:
  Classifier(const Automaton& a, const ByteTrie& trie, const std::vector<std::string>& bytes,
             const std::vector<uint8_t>& allowed)
      : a_(a),
        trie_(trie),
        bytes_(bytes),
        allowed_(allowed),
        eng_(a, /*dense_steps=*/true),
        accepted_mark_(bytes.size(), 0) {
    // What may follow each rule, over all its call sites (kAny pops keep going outwards).
    const size_t rules = a.rule_start.size();
    follow_.assign(rules, StackEngine::kDead);
    for (size_t r = 0; r < rules; ++r) {
      std::vector<int32_t> stacks;
      for (int32_t ret : a.return_nodes[r]) stacks.push_back(eng_.stack_on(ret, StackEngine::kAny));
      if (!stacks.empty()) follow_[r] = eng_.state_of(std::move(stacks));
    }
  }

  NodeMasks classify(int32_t node) {
    accepted_.clear();
    context_.clear();
    follow_state_ = follow_[a_.node_rule[node]];
    walk(eng_.state_of({eng_.stack_on(node, StackEngine::kBottom)}));
    std::vector<std::pair<std::string_view, int32_t>> ctx;
    std::vector<int32_t> ctx_tokens;
    for (const auto& [tok, offset] : context_) {
      if (accepted_mark_[tok]) continue;
      ctx.emplace_back(std::string_view(bytes_[tok]).substr(offset), tok);
      ctx_tokens.push_back(tok);
    }
    std::sort(ctx_tokens.begin(), ctx_tokens.end());
    NodeMasks m;
    m.num_accepted = static_cast<int64_t>(accepted_.size());
    m.num_context = std::unique(ctx_tokens.begin(), ctx_tokens.end()) - ctx_tokens.begin();
    m.accepted = TokenSet::from_members(accepted_, accepted_mark_);
    m.context = build_byte_trie(std::move(ctx));
    for (int32_t t : accepted_) accepted_mark_[t] = 0;
    return m;
  }

 private:
  // Depth-first over the trie as a forward scan in preorder: a node's state is its parent's
  // stepped by the node's byte; a dead state skips the node's subtree.
  void walk(int32_t start) {
    const int32_t n = trie_.num_nodes();
    node_state_.resize(n);
    node_state_[0] = start;
    for (int32_t v = 1; v < n;) {
      const int32_t state = eng_.step(node_state_[trie_.parent[v]], trie_.byte[v]);
      if (state == StackEngine::kDead) {
        v = trie_.subtree_end[v];
        continue;
      }
      node_state_[v] = state;
      for (int32_t i = trie_.id_begin[v]; i < trie_.id_begin[v + 1]; ++i) {
        const int32_t id = trie_.ids[i];
        if (allowed_[id]) accepted_.push_back(id), accepted_mark_[id] = 1;
      }
      if (eng_.at_bottom(state) && follow_state_ != StackEngine::kDead) {
        walk_follow(v, follow_state_, trie_.depth[v]);
      }
      ++v;
    }
  }

  // Below trie node t, the rule has ended after `offset` bytes: tokens whose rest some caller
  // could take are context-dependent.
  void walk_follow(int32_t t, int32_t state, int32_t offset) {
    for (int32_t c = trie_.child_begin[t]; c < trie_.child_begin[t + 1]; ++c) {
      const int32_t next = eng_.step(state, trie_.child_byte[c]);
      if (next == StackEngine::kDead) continue;
      const int32_t child = trie_.child_node[c];
      for (int32_t i = trie_.id_begin[child]; i < trie_.id_begin[child + 1]; ++i)
        if (allowed_[trie_.ids[i]]) context_.emplace_back(trie_.ids[i], offset);
      walk_follow(child, next, offset);
    }
  }

  const Automaton& a_;
  const ByteTrie& trie_;
  const std::vector<std::string>& bytes_;
  const std::vector<uint8_t>& allowed_;
  StackEngine eng_;
  std::vector<int32_t> follow_;  // [rules] state
  int32_t follow_state_ = StackEngine::kDead;
  std::vector<int32_t> accepted_;
  std::vector<std::pair<int32_t, int32_t>> context_;  // (token, bytes consumed in the rule)
  std::vector<uint8_t> accepted_mark_;                // [V] members of accepted_
  std::vector<int32_t> node_state_;                   // [trie nodes] engine state during walk()
};

}  // namespace

MaskTable build_masks(const Automaton& a, const ByteTrie& vocab_trie,
                      const std::vector<std::string>& token_bytes,
                      const std::vector<uint8_t>& allowed) {
  // Stack tops: the root's start, and any node entered by a byte or by returning from a call.
  const int32_t n = a.num_nodes();
  std::vector<uint8_t> top(n, 0);
  top[a.rule_start[a.root]] = 1;
  for (const ByteEdge& e : a.byte_edges) top[e.to] = 1;
  for (const CallEdge& c : a.call_edges) top[c.ret] = 1;
  MaskTable t;
  t.node_slot.assign(n, -1);
  std::vector<int32_t> nodes;
  for (int32_t v = 0; v < n; ++v) {
    if (!top[v]) continue;
    t.node_slot[v] = static_cast<int32_t>(nodes.size());
    nodes.push_back(v);
  }
  t.masks.resize(nodes.size());
  // Nodes are independent: each worker classifies whichever node is next, with an engine of
  // its own (the memoized steps are per thread). Results do not depend on the thread count.
  std::atomic<size_t> next{0};
  parallel_for(num_threads(), [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      std::unique_ptr<Classifier> cl;
      for (size_t i; (i = next.fetch_add(1)) < nodes.size();) {
        if (!cl) cl = std::make_unique<Classifier>(a, vocab_trie, token_bytes, allowed);
        t.masks[i] = cl->classify(nodes[i]);
      }
    }
  });
  return t;
}

}  // namespace tandem::grammar
