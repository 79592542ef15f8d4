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

TEST(SpecAccept, SimulatedAcceptanceHitsTheMean) {
  Rng rng(3);
  double total = 0;
  for (int i = 0; i < 20000; ++i)
    total += static_cast<double>(accept_simulated({1, 2, 3}, {1, 2, 3, 4}, 2.4, rng).tokens.size());
  EXPECT_NEAR(total / 20000, 2.4, 0.02);
}

}  // namespace
}  // namespace tandem
