// Speculative acceptance rules (greedy, rejection sampling, simulated), on the host alone.
#include <gtest/gtest.h>

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

TEST(SpecAccept, RejectionSamplingReproducesTheTargetDistribution) {
  // One draft step: the committed first token must follow p exactly, whatever the draft.
  const std::vector<float> p = {0.1f, 0.6f, 0.3f};
  for (int32_t draft : {0, 1, 2}) {
    Rng rng(draft + 1);
    std::map<int32_t, int> count;
    const int n = 60000;
    for (int i = 0; i < n; ++i)
      ++count[accept_sampled({draft}, {p, {1.0f, 0.0f, 0.0f}}, rng).tokens[0]];
    for (int v = 0; v < 3; ++v)
      EXPECT_NEAR(count[v] / static_cast<double>(n), p[v], 0.01)
          << "draft " << draft << " token " << v;
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
