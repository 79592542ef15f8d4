// fill_mask against brute force at one matcher position: every token tried with accept_token
// (and rolled back), and, where an Earley chart of the output so far is given, every token's
// bytes appended to it. Shared by the synthetic-vocabulary and the Qwen3 tests.
#pragma once

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/earley.h"
#include "test_util.h"

namespace tandem::grammar::testing {

struct MaskCheck {
  int64_t checked = 0, allowed = 0;
};

// ids: the tokens to check (all of the vocabulary, or a sample). The Earley reference, being
// slow, sees one in `allowed_stride` of the allowed tokens and one in `earley_stride` of the
// others.
inline void check_mask(Matcher& m, const TokenVocab& v, const std::vector<int32_t>& ids,
                       const EarleyRecognizer* oracle, EarleyRecognizer::Chart* chart,
                       MaskCheck& stats, const std::string& where, int earley_stride = 1,
                       int allowed_stride = 1) {
  int64_t k = 0, k_allowed = 0;
  const std::vector<uint32_t> mask = mask_of(m);
  const int64_t before = m.num_tokens();
  for (int32_t id : ids) {
    const bool in_mask = bit(mask, id);
    const bool accepted = m.accept_token(id);
    if (accepted) m.rollback(1);
    ASSERT_EQ(m.num_tokens(), before);
    ASSERT_EQ(in_mask, accepted) << where << ": token " << id << " '" << v.bytes[id] << "'";
    if (oracle != nullptr && !v.special[id] &&
        (in_mask ? ++k_allowed % allowed_stride == 0 : ++k % earley_stride == 0)) {
      const size_t n = chart->input.size();
      oracle->extend(*chart, v.bytes[id]);
      const bool viable = !v.bytes[id].empty() && oracle->viable(*chart);
      oracle->truncate(*chart, n);
      ASSERT_EQ(in_mask, viable) << where << ": token " << id << " '" << v.bytes[id]
                                 << "' (Earley)";
    }
    ++stats.checked;
    stats.allowed += in_mask;
  }
  // Bits past the vocabulary stay clear.
  for (int32_t id = v.size(); id < static_cast<int32_t>(mask.size() * 32); ++id)
    ASSERT_FALSE(bit(mask, id)) << where;
}

// The next token of a walk that mostly follows `target` (a token spelling a prefix of what is
// left of it), sometimes anything the mask allows. -1 if nothing is allowed.
inline int32_t next_token(const Matcher& m, const TokenVocab& v, const std::string& target,
                          size_t& pos, std::mt19937_64& rng) {
  const std::vector<uint32_t> mask = mask_of(m);
  std::vector<int32_t> follow, any;
  for (int32_t id = 0; id < v.size(); ++id) {
    if (!bit(mask, id)) continue;
    any.push_back(id);
    const std::string& b = v.bytes[id];
    if (pos + b.size() <= target.size() && target.compare(pos, b.size(), b) == 0)
      follow.push_back(id);
  }
  if (any.empty()) return -1;
  if (!follow.empty() && rng() % 10 < 8) {
    // Prefer long tokens, as a tokenizer would.
    std::sort(follow.begin(), follow.end(),
              [&](int32_t a, int32_t b) { return v.bytes[a].size() > v.bytes[b].size(); });
    const int32_t id = follow[rng() % std::min<size_t>(follow.size(), 2)];
    pos += v.bytes[id].size();
    return id;
  }
  pos = target.size() + 1;  // off the target for good
  return any[rng() % any.size()];
}

}  // namespace tandem::grammar::testing
