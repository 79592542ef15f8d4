// Matcher: one request's position in a compiled grammar. Its state is a StackEngine state id;
// `history` keeps one per accepted token, so rollback is a truncation.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "grammar/compiled_grammar.h"
#include "grammar/stack_engine.h"

namespace tandem::grammar {

namespace {
// Masks of recently seen states: inside a long string or a repeated object shape the state
// recurs token after token, and a hit is one copy.
// TANDEM_GRAMMAR_MASK_CACHE=0 turns it off (the benchmark measures the misses that way).
size_t mask_cache_entries() {
  const char* env = std::getenv("TANDEM_GRAMMAR_MASK_CACHE");
  return env != nullptr && *env != '\0' ? static_cast<size_t>(std::atoi(env)) : size_t{8};
}
}  // namespace

struct Matcher::Impl {
  std::shared_ptr<const CompiledGrammar> g;
  // Grows with the output (new stacks and states); const methods memoize into it.
  mutable StackEngine eng;
  std::vector<int32_t> history;  // [num_tokens + 1] state after each accepted token
  int32_t words = 0;             // mask words

  struct CachedMask {
    int32_t state = -1;
    uint64_t used = 0;
    std::vector<uint32_t> bits;
  };
  const size_t cache_entries = mask_cache_entries();
  mutable std::vector<CachedMask> cache;
  mutable uint64_t clock = 0;
  mutable std::vector<uint32_t> scratch;

  explicit Impl(std::shared_ptr<const CompiledGrammar> cg)
      : g(std::move(cg)), eng(g->automaton, /*dense_steps=*/false) {
    const Automaton& a = g->automaton;
    history.push_back(eng.state_of({eng.stack_on(a.rule_start[a.root], StackEngine::kEmpty)}));
    words = (g->vocab->size() + 31) / 32;
    scratch.resize(words);
  }

  // Sets the bits of context-dependent tokens whose rest (below trie node t) `state` takes.
  void walk_context(const ByteTrie& t, int32_t node, int32_t state, uint32_t* bits) const {
    for (int32_t i = t.id_begin[node]; i < t.id_begin[node + 1]; ++i) {
      const int32_t id = t.ids[i];
      bits[id >> 5] |= 1u << (id & 31);
    }
    for (int32_t c = t.child_begin[node]; c < t.child_begin[node + 1]; ++c) {
      const int32_t next = eng.step(state, t.child_byte[c]);
      if (next != StackEngine::kDead) walk_context(t, t.child_node[c], next, bits);
    }
  }

  void compute_mask(int32_t state, uint32_t* bits) const {
    std::memset(bits, 0, static_cast<size_t>(words) * 4);
    const int32_t vocab = g->vocab->size();
    const MaskTable& mt = g->masks;
    // Copied: the engine may add states (and move this vector) while walking. A state has one
    // stack per top node, so each node's accepted set is ORed once.
    const std::vector<int32_t> stacks = eng.state(state).stacks;
    for (int32_t s : stacks) {
      mt.masks[mt.node_slot[eng.stack_at(s).node]].accepted.or_into(bits, vocab, scratch.data());
    }
    for (int32_t s : stacks) {
      const StackEngine::Stack st = eng.stack_at(s);
      const ByteTrie& ctx = mt.masks[mt.node_slot[st.node]].context;
      if (ctx.num_nodes() <= 1) continue;  // an empty trie has just its root
      // The callers' state; nothing may follow the root's end (kEmpty).
      std::vector<int32_t> parents;
      for (int32_t p : eng.members(st.parents))
        if (p >= 0) parents.push_back(p);
      if (!parents.empty()) walk_context(ctx, 0, eng.state_of(std::move(parents)), bits);
    }
  }
};

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g)
    : impl_(std::make_unique<Impl>(std::move(g))) {}
Matcher::~Matcher() = default;
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;

int32_t Matcher::vocab_size() const {
  return impl_->g->vocab->size();
}

void Matcher::fill_mask(uint32_t* bits) const {
  Impl& m = *impl_;
  const int32_t state = m.history.back();
  const size_t bytes = static_cast<size_t>(m.words) * 4;
  ++m.clock;
  for (auto& c : m.cache) {
    if (c.state == state) {
      c.used = m.clock;
      std::memcpy(bits, c.bits.data(), bytes);
      return;
    }
  }
  m.compute_mask(state, bits);
  if (m.cache_entries == 0) return;
  if (m.cache.size() < m.cache_entries) m.cache.emplace_back();
  auto victim = std::min_element(m.cache.begin(), m.cache.end(),
                                 [](const auto& a, const auto& b) { return a.used < b.used; });
  victim->state = state;
  victim->used = m.clock;
  victim->bits.assign(bits, bits + m.words);
}

bool Matcher::accept_token(int32_t id) {
  Impl& m = *impl_;
  if (id < 0 || id >= m.g->vocab->size() || !m.g->allowed[id]) return false;
  const std::string& b = m.g->vocab->bytes[id];
  const int32_t next = m.eng.step(m.history.back(), b.data(), b.size());
  if (next == StackEngine::kDead) return false;
  m.history.push_back(next);
  return true;
}

void Matcher::rollback(int64_t n) {
  if (n < 0 || n > num_tokens()) {
    throw std::out_of_range("Matcher::rollback(" + std::to_string(n) + ") with only " +
                            std::to_string(num_tokens()) + " tokens accepted");
  }
  impl_->history.resize(impl_->history.size() - static_cast<size_t>(n));
}

int64_t Matcher::num_tokens() const {
  return static_cast<int64_t>(impl_->history.size()) - 1;
}

bool Matcher::can_terminate() const {
  return impl_->eng.state(impl_->history.back()).at_end;
}

bool Matcher::is_terminated() const {
  const int32_t s = impl_->history.back();
  if (!impl_->eng.state(s).at_end) return false;
  for (int b = 0; b < 256; ++b)
    if (impl_->eng.step(s, static_cast<uint8_t>(b)) != StackEngine::kDead) return false;
  return true;
}

}  // namespace tandem::grammar
