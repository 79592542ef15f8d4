// Speculative acceptance rules (greedy, sampled, simulated), on the host alone.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "runtime/spec_accept.h"

namespace tandem {
namespace {

TEST(SpecAccept, GreedyTakesTheLongestMatchingPrefixPlusBonus) {
  auto a = accept_greedy({5, 6, 7}, {5, 6, 9, 4});
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{5, 6, 9}));
  EXPECT_EQ(a.accepted, 2);
  a = accept_greedy({5, 6, 7}, {5, 6, 7, 4});
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{5, 6, 7, 4}));
  EXPECT_EQ(a.accepted, 3);
  a = accept_greedy({1, 6, 7}, {5, 6, 7, 4});
  EXPECT_EQ(a.tokens, (std::vector<int32_t>{5}));
}

TEST(SpecAccept, SampledAcceptanceReproducesTheTargetDistribution) {
  // One draft step at temperature 1: the committed first token must follow softmax(logits)
  // exactly, whatever the draft.
  const std::vector<float> row = {std::log(0.1f), std::log(0.6f), std::log(0.3f)};
  const std::vector<float> p = {0.1f, 0.6f, 0.3f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  std::vector<float> logits = row;
  logits.insert(logits.end(), row.begin(), row.end());  // [2, 3]
  for (int32_t draft : {0, 1, 2}) {
    Rng rng(draft + 1);
    std::map<int32_t, int> count;
    const int n = 60000;
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
      const Acceptance a = accept_sampled({draft}, logits.data(), 3, sp, rng);
      ++count[a.tokens[0]];
      accepted += static_cast<int>(a.accepted);
    }
    for (int v = 0; v < 3; ++v)
      EXPECT_NEAR(count[v] / static_cast<double>(n), p[v], 0.01)
          << "draft " << draft << " token " << v;
    EXPECT_NEAR(accepted / static_cast<double>(n), p[draft], 0.01);  // accepted with p(d)
  }
}

TEST(SpecAccept, SampledAcceptanceCommitsWhatPlainSamplingWouldWhateverTheDrafts) {
  // One uniform per committed token, in order, picked as plain decoding picks: the committed
  // tokens of any rounds of any depths equal plain sampling from the same seed.
  const int64_t V = 50;
  Rng lr(11);
  std::vector<float> logits(static_cast<size_t>(12 * V));  // 12 positions
  for (float& x : logits) x = static_cast<float>(3.0 * lr.normal());
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 20;
  sp.top_p = 0.9f;
  for (uint64_t seed : {1u, 2u, 3u}) {
    Rng plain_rng(seed);
    std::vector<int32_t> plain;
    for (int64_t t = 0; t < 12; ++t)
      plain.push_back(sample_token(logits.data() + t * V, V, sp, plain_rng));
    for (int64_t depth : {1, 2, 3, 5}) {
      for (bool right : {true, false}) {
        Rng rng(seed);
        std::vector<int32_t> got;
        while (got.size() + static_cast<size_t>(depth) + 1 <= 12) {
          const size_t t = got.size();
          std::vector<int32_t> drafts;
          for (int64_t j = 0; j < depth; ++j)  // correct drafts, or wrong ones from position 1
            drafts.push_back(right || j == 0 ? plain[t + static_cast<size_t>(j)]
                                             : (plain[t + static_cast<size_t>(j)] + 1) % V);
          const Acceptance a = accept_sampled(drafts, logits.data() + t * V, V, sp, rng);
          got.insert(got.end(), a.tokens.begin(), a.tokens.end());
        }
        for (size_t t = 0; t < got.size(); ++t)
          EXPECT_EQ(got[t], plain[t]) << "seed " << seed << " depth " << depth << " at " << t;
      }
    }
  }
}

TEST(SpecAccept, SimulatedAcceptanceHitsTheMeanAtItsReferenceDepth) {
  for (double want : {1.0, 1.7, 2.4, 3.5, 4.0}) {
    const double a = simulated_accept_rate(want, 3);
    EXPECT_NEAR(1 + a + a * a + a * a * a, want, 1e-9) << want;
    Rng rng(3);
    double total = 0;
    const int n = 40000;
    for (int i = 0; i < n; ++i)
      total += static_cast<double>(accept_simulated({1, 2, 3}, {1, 2, 3, 4}, a, rng).tokens.size());
    EXPECT_NEAR(total / n, want, 0.02) << want;
  }
  // The same rate drafts like a real draft model at other depths: positions accept
  // independently, so a depth-1 round commits 1 + a tokens on average.
  const double a = simulated_accept_rate(2.4, 3);
  Rng rng(4);
  double total = 0;
  for (int i = 0; i < 40000; ++i)
    total += static_cast<double>(accept_simulated({7}, {7, 8}, a, rng).tokens.size());
  EXPECT_NEAR(total / 40000, 1 + a, 0.02);
  EXPECT_EQ(simulated_accept_rate(9.0, 3), 1.0);
  EXPECT_EQ(simulated_accept_rate(0.5, 3), 0.0);
}

TEST(SpecAccept, SimulatedAcceptanceStopsAtTheFirstRejection) {
  Rng rng(5);
  for (int i = 0; i < 1000; ++i) {
    const Acceptance x = accept_simulated({1, 2, 3, 4}, {1, 2, 3, 4, 5}, 0.5, rng);
    ASSERT_EQ(static_cast<int64_t>(x.tokens.size()), x.accepted + 1);
    for (int64_t j = 0; j < x.accepted; ++j) EXPECT_EQ(x.tokens[j], j + 1);
    EXPECT_EQ(x.tokens.back(), x.accepted + 1);  // the bonus is the target's token there
  }
}

}  // namespace
}  // namespace tandem
