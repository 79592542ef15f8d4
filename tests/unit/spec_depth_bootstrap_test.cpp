// spec_depth_replay's closed-loop simulation (bench/spec/spec_depth_bootstrap.h): the samples it
// draws from, and that the policy run on them finds the best depth of a clear case.
#include "spec/spec_depth_bootstrap.h"

#include <gtest/gtest.h>

#include "core/rng.h"

namespace tandem::bench {
namespace {

TEST(SpecDepthBootstrap, AcceptanceCountsEachPositionReached) {
  SpecDepthSamples s;
  // Depth 3, three sequences accepting 2, 0 and 3 drafts: position 1 reached 3 times, accepted
  // 2; position 2 reached 2 (by the first and the last), accepted 2; position 3 reached 2,
  // accepted 1.
  s.add_step(3, 3, 1e-3, {2, 0, 3});
  EXPECT_DOUBLE_EQ(s.acceptance(1), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(s.acceptance(2), 1.0);
  EXPECT_DOUBLE_EQ(s.acceptance(3), 0.5);
  EXPECT_DOUBLE_EQ(s.acceptance(5), 0.5);  // never reached: the deepest below
  EXPECT_DOUBLE_EQ(s.expected_tokens(2), 1.0 + 2.0 / 3.0 + 2.0 / 3.0);
}

TEST(SpecDepthBootstrap, TimesOfUnmeasuredDepthsAreInterpolated) {
  SpecDepthSamples s;
  for (double t : {1.0e-3, 1.2e-3}) s.add_step(0, 8, t, {});
  for (double t : {2.0e-3, 2.2e-3}) s.add_step(1, 8, t, {0, 1, 1, 0, 1, 1, 1, 1});
  s.add_step(3, 8, 4.1e-3, {3, 3, 3, 3, 3, 3, 3, 3});
  ASSERT_EQ(s.classes(), std::vector<int64_t>{8});
  EXPECT_EQ(s.depths(8), (std::vector<int64_t>{0, 1, 3}));
  EXPECT_DOUBLE_EQ(s.mean_seconds(8, 0), 1.1e-3);
  EXPECT_NEAR(s.mean_seconds(8, 2), 0.5 * (2.1e-3 + 4.1e-3), 1e-12);
  EXPECT_NEAR(s.mean_seconds(8, 5), 4.1e-3 + 2 * 1.0e-3, 1e-12);  // the line extended
  EXPECT_LT(s.mean_seconds(4, 1), 0);                             // no such class
  // Drawn seconds: a measured depth's own; an unmeasured one's, the nearest measured depth's
  // scaled to its mean.
  EXPECT_DOUBLE_EQ(s.draw_seconds(8, 1, 0.99), 2.2e-3);
  EXPECT_NEAR(s.draw_seconds(8, 2, 0.0), 2.0e-3 * (3.1e-3 / 2.1e-3), 1e-12);
}

// A class whose costs make one depth clearly best: the policy, run on draws from them, spends
// most of its steps there and earns near the best fixed depth's expected rate.
TEST(SpecDepthBootstrap, ThePolicyFindsAClearlyBestDepth) {
  for (const bool deep : {true, false}) {
    SpecDepthSamples s;
    Rng rng(3);
    const double accept = deep ? 0.9 : 0.4;
    for (int i = 0; i < 200; ++i)
      for (int64_t d : {0, 1, 2, 3}) {
        // Fast drafts when deep (depth 3 best), dear ones otherwise (plain decoding best), with
        // 10% noise and a 3x stall now and then.
        const double base = deep ? 1e-3 * (1.0 + 0.1 * d) : 1e-3 * (1.0 + 0.8 * d);
        const double t = base * (0.95 + 0.1 * rng.uniform()) * (i % 50 == 49 ? 3.0 : 1.0);
        std::vector<int64_t> acc;
        for (int b = 0; b < 4 && d > 0; ++b) {
          int64_t k = 0;
          while (k < d && rng.uniform() < accept) ++k;
          acc.push_back(k);
        }
        s.add_step(d, 4, t, acc);
      }
    SpecDepthOptions o;
    o.max_depth = 3;
    const BootstrapResult r = bootstrap_class(s, 4, o, 1500, 5);
    ASSERT_EQ(r.best_depth, deep ? 3 : 0);
    EXPECT_GE(r.mean_ratio, 0.95) << (deep ? "deep" : "plain");
    EXPECT_GE(r.depth_share[static_cast<size_t>(r.best_depth)], 0.85) << (deep ? "deep" : "plain");
  }
}

// With answers the draft's reads count: each answer's prompt (and every position decoded plainly)
// is read before the next speculative step, at the fitted cost. A cheap read leaves depth 2 the
// best, a little below its rate without reads; a dear one makes plain decoding best, and the
// policy, asked with the lag and what the answers have left, must find that too.
TEST(SpecDepthBootstrap, AnswersMakeTheDraftReadItsPrompts) {
  SpecDepthSamples s;
  Rng rng(5);
  for (int i = 0; i < 100; ++i)
    for (int64_t d : {0, 1, 2}) {
      const double t = 1e-3 *
                       (d == 0   ? 0.29
                        : d == 1 ? 0.45
                                 : 0.56) *
                       (0.97 + 0.06 * rng.uniform());
      std::vector<int64_t> acc;
      if (d > 0) {
        int64_t k = 0;
        while (k < d && rng.uniform() < 0.7) ++k;
        acc.push_back(k);
      }
      s.add_step(d, 1, t, acc);
    }
  SpecDepthOptions o;
  o.max_depth = 2;
  o.initial_depth = 2;
  const BootstrapResult free_reads = bootstrap_class(s, 1, o, 1500, 4);
  ASSERT_EQ(free_reads.best_depth, 2);
  AnswerModel cheap{96, 64, 0.1e-3, 1e-6};
  const BootstrapResult c = bootstrap_class(s, 1, o, 1500, 4, cheap);
  EXPECT_EQ(c.best_depth, 2);
  EXPECT_LT(c.best_rate, free_reads.best_rate);
  EXPECT_GT(c.best_rate, 0.9 * free_reads.best_rate);
  AnswerModel dear{96, 64, 5e-3, 20e-6};
  const BootstrapResult d = bootstrap_class(s, 1, o, 1500, 4, dear);
  ASSERT_EQ(d.best_depth, 0);
  EXPECT_GE(d.mean_ratio, 0.95);
  EXPECT_GE(d.depth_share[0], 0.8);
}

}  // namespace
}  // namespace tandem::bench
