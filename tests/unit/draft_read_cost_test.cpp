// The draft's read cost fit: seconds = fixed + per_position x positions from noisy reads, with
// the one-off costs of the first reads and occasional stalls left out.
#include "runtime/draft_read_cost.h"

#include <gtest/gtest.h>

#include "core/rng.h"

namespace tandem {
namespace {

TEST(DraftReadCost, UnknownUntilAReadIsCounted) {
  DraftReadCost r(1);
  EXPECT_FALSE(r.known());
  EXPECT_EQ(r.seconds(100), 0.0);
  r.observe(64, 0.2);  // the first read of the process: lazy kernel loading, not counted
  EXPECT_FALSE(r.known());
  r.observe(0, 1.0);  // nothing read: nothing learned
  r.observe(64, -1.0);
  EXPECT_FALSE(r.known());
  r.observe(64, 6.4e-4);
  ASSERT_TRUE(r.known());
  // Reads of one length cannot split the fixed cost from the per-position one.
  EXPECT_DOUBLE_EQ(r.fixed_seconds(), 0.0);
  EXPECT_DOUBLE_EQ(r.seconds(64), 6.4e-4);
  EXPECT_EQ(r.seconds(0), 0.0);
}

TEST(DraftReadCost, FitsFixedAndPerPositionCostsThroughStalls) {
  Rng rng(5);
  for (double fixed : {0.0, 3e-4}) {
    for (double per_position : {2e-6, 3e-5}) {
      DraftReadCost r(0, 32);
      for (int i = 0; i < 200; ++i) {
        const auto positions = static_cast<int64_t>(1 + rng.uniform() * 600);
        double t = (fixed + per_position * static_cast<double>(positions)) *
                   (1.0 + 0.05 * (2.0 * rng.uniform() - 1.0));
        if (i % 9 == 4) t *= 40.0;  // a stall now and then (more than one in a window)
        r.observe(positions, t);
      }
      // Within 10%, give or take 2% of the longest read's cost (the noise of 5% on long reads
      // blurs the fixed cost of short ones).
      const double longest = fixed + per_position * 600.0;
      for (int64_t n : {1, 64, 512}) {
        const double truth = fixed + per_position * static_cast<double>(n);
        EXPECT_NEAR(r.seconds(n), truth, 0.1 * truth + 0.02 * longest)
            << "fixed " << fixed << ", per position " << per_position << ", " << n << " positions";
      }
    }
  }
}

TEST(DraftReadCost, ASingleDearReadGivesWayToTheNextCheapOne) {
  // With the first read counted (untimed 0), a one-off 200 ms read of 64 positions is all it
  // knows; the next read of a normal cost outweighs it (of two, the cheaper counts).
  DraftReadCost r(0);
  r.observe(64, 0.2);
  EXPECT_DOUBLE_EQ(r.seconds(64), 0.2);
  r.observe(70, 7e-4);
  EXPECT_LT(r.seconds(64), 1e-3);
}

TEST(DraftReadCost, KeepsOnlyTheRecentWindow) {
  DraftReadCost r(0, 4);
  for (int i = 0; i < 8; ++i) r.observe(100 + i, 1e-3);  // 10 us per position
  for (int i = 0; i < 4; ++i) r.observe(100 + i, 2e-3);  // the load changed: twice as dear
  EXPECT_NEAR(r.seconds(100), 2e-3, 1e-4);
}

}  // namespace
}  // namespace tandem
