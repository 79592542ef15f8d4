// Helpers for the grammar tests: vocabularies from tokenizers, random sentences of a grammar,
// masks as sets, and the fixtures directory.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/utf8_ranges.h"
#include "tokenizer/tokenizer.h"

namespace tandem::grammar::testing {

inline std::shared_ptr<TokenVocab> vocab_of(const Tokenizer& tok) {
  auto v = std::make_shared<TokenVocab>();
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    v->bytes.push_back(tok.token_bytes(id));
    v->special.push_back(tok.is_special(id) ? 1 : 0);
  }
  return v;
}

// 256 single-byte tokens (ids in GPT-2 order, not byte order) and the given special tokens.
inline std::shared_ptr<TokenVocab> byte_vocab(const std::vector<std::string>& specials = {}) {
  return vocab_of(Tokenizer::from_json(make_byte_level_tokenizer_json(specials)));
}

// Token id of each single byte in a vocabulary that has all 256.
inline std::vector<int32_t> byte_ids(const TokenVocab& v) {
  std::vector<int32_t> ids(256, -1);
  for (int32_t id = 0; id < v.size(); ++id)
    if (v.bytes[id].size() == 1 && !v.special[id]) ids[static_cast<uint8_t>(v.bytes[id][0])] = id;
  return ids;
}

inline std::vector<uint32_t> mask_of(const Matcher& m) {
  std::vector<uint32_t> bits((m.vocab_size() + 31) / 32, 0);
  m.fill_mask(bits.data());
  return bits;
}
inline bool bit(const std::vector<uint32_t>& bits, int32_t id) {
  return (bits[id >> 5] >> (id & 31)) & 1;
}

inline std::filesystem::path fixtures_dir() {
  const char* env = std::getenv("TANDEM_TOKENIZER_FIXTURES");
  if (env == nullptr || *env == '\0') return {};
  return env;
}

inline uint64_t seed_from_env(uint64_t fallback) {
  const char* env = std::getenv("TANDEM_GRAMMAR_SEED");
  return env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 10) : fallback;
}

// Random sentences of a grammar: expansions pick uniformly until `max_depth`, then the choice
// that ends soonest, so every sentence is finite.
class SentenceGenerator {
 public:
  SentenceGenerator(const ir::Grammar& g, uint64_t seed, int max_depth = 12)
      : g_(g), rng_(seed), max_depth_(max_depth) {
    height_.assign(g.rules.size(), kInf);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.rules.size(); ++r) {
        const int h = std::min(kInf, 1 + expr_height(g.rules[r].body));
        if (h < height_[r]) height_[r] = h, changed = true;
      }
    }
  }

  std::string sentence() {
    std::string out;
    gen(g_.rules[g_.root].body, 0, out);
    return out;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  static constexpr int kInf = 1 << 20;

  int expr_height(int32_t id) const {
    const ir::Expr& e = g_.exprs[id];
    int h = 0;
    switch (e.op) {
      case ir::Op::kLiteral:
        return 0;
      case ir::Op::kClass:
        return ir::class_code_points(e).empty() ? kInf : 0;
      case ir::Op::kRef:
        return height_[e.rule];
      case ir::Op::kSeq:
        for (int32_t c : e.items) h = std::max(h, expr_height(c));
        return h;
      case ir::Op::kChoice:
        h = kInf;
        for (int32_t c : e.items) h = std::min(h, expr_height(c));
        return h;
      case ir::Op::kRepeat:
        return e.min == 0 ? 0 : expr_height(e.items[0]);
    }
    return kInf;
  }

  void gen(int32_t id, int depth, std::string& out) {
    const ir::Expr& e = g_.exprs[id];
    const bool deep = depth > max_depth_;
    switch (e.op) {
      case ir::Op::kLiteral:
        out += e.bytes;
        return;
      case ir::Op::kClass: {
        const auto cps = ir::class_code_points(e);
        // Half the time an ASCII member if there is one, else any member.
        std::vector<ir::CodeRange> ascii;
        for (auto r : cps)
          if (r.lo < 0x80) ascii.push_back({r.lo, std::min<uint32_t>(r.hi, 0x7F)});
        const auto& pick_from = (!ascii.empty() && rng_() % 2) ? ascii : cps;
        uint64_t total = 0;
        for (auto r : pick_from) total += r.hi - r.lo + 1;
        uint64_t k = rng_() % total;
        for (auto r : pick_from) {
          if (k <= r.hi - r.lo) {
            append_utf8(out, r.lo + static_cast<uint32_t>(k));
            return;
          }
          k -= r.hi - r.lo + 1;
        }
        return;
      }
      case ir::Op::kRef:
        gen(g_.rules[e.rule].body, depth + 1, out);
        return;
      case ir::Op::kSeq:
        for (int32_t c : e.items) gen(c, depth, out);
        return;
      case ir::Op::kChoice: {
        std::vector<int32_t> ok;
        int best = kInf;
        for (int32_t c : e.items) best = std::min(best, expr_height(c));
        for (int32_t c : e.items)
          if (expr_height(c) < kInf && (!deep || expr_height(c) == best)) ok.push_back(c);
        gen(ok[rng_() % ok.size()], depth + 1, out);
        return;
      }
      case ir::Op::kRepeat: {
        const int hi = e.max == ir::kUnbounded ? e.min + 4 : e.max;
        const int n = deep ? e.min : e.min + static_cast<int>(rng_() % (hi - e.min + 1));
        for (int i = 0; i < n; ++i) gen(e.items[0], depth + 1, out);
        return;
      }
    }
  }

  const ir::Grammar& g_;
  std::mt19937_64 rng_;
  int max_depth_;
  std::vector<int> height_;
};

}  // namespace tandem::grammar::testing
