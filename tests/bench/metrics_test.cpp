#include <gtest/gtest.h>

#include <cmath>

#include "bench_client/metrics.h"

namespace tandem::bench {
namespace {

TEST(Percentile, MatchesNumpyLinearInterpolationByHand) {
  const std::vector<double> v = {10, 1, 4, 2, 3};  // sorted: 1 2 3 4 10
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
  EXPECT_NEAR(percentile(v, 90), 7.6, 1e-12);   // rank 3.6: 4 + 0.6 * 6
  EXPECT_NEAR(percentile(v, 95), 8.8, 1e-12);   // rank 3.8
  EXPECT_NEAR(percentile(v, 99), 9.76, 1e-12);  // rank 3.96
  EXPECT_NEAR(percentile(v, 25), 2, 1e-12);     // rank 1 exactly
  EXPECT_NEAR(percentile({0, 1}, 99), 0.99, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(median({1, 2, 3, 4}), 2.5);
  EXPECT_DOUBLE_EQ(percentile({}, 99), 0);  // bench_serving: np.percentile(x or 0, p)
  EXPECT_DOUBLE_EQ(mean({}), 0);
  EXPECT_DOUBLE_EQ(mean({1, 2, 6}), 3);
  EXPECT_NEAR(stdev({1, 2, 6}), std::sqrt(14.0 / 3.0), 1e-12);  // population std
  EXPECT_DOUBLE_EQ(max_of({1, 7, 2}), 7);
}

TEST(Metrics, TotalsRatesAndDistributionsByHand) {
  RequestOutput a;
  a.success = true;
  a.prompt_len = 10;
  a.output_len = 5;
  a.start_time = 0.0;
  a.ttft = 0.1;
  a.latency = 0.5;
  a.itl = {0.1, 0.1, 0.1, 0.1};
  RequestOutput b;
  b.success = true;
  b.prompt_len = 20;
  b.output_len = 3;
  b.start_time = 0.8;
  b.ttft = 0.3;
  b.latency = 0.7;
  b.itl = {0.2, 0.2};
  RequestOutput failed;
  failed.prompt_len = 99;
  failed.output_len = 50;
  RequestOutput one_token;  // TPOT needs two tokens; it adds nothing there
  one_token.success = true;
  one_token.prompt_len = 0;
  one_token.output_len = 1;
  one_token.start_time = 0.1;
  one_token.ttft = 0.2;
  one_token.latency = 0.2;

  const BenchmarkMetrics m = calculate_metrics({a, b, failed, one_token}, 2.0);
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 30);
  EXPECT_EQ(m.total_output, 9);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.input_throughput, 15);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_throughput, 19.5);
  EXPECT_NEAR(m.concurrency, (0.5 + 0.7 + 0.2) / 2.0, 1e-12);
  // TPOT: a (0.5 - 0.1) / 4 = 100 ms, b (0.7 - 0.3) / 2 = 200 ms.
  EXPECT_NEAR(m.tpot.mean, 150, 1e-9);
  EXPECT_NEAR(m.tpot.median, 150, 1e-9);
  EXPECT_NEAR(m.tpot.p99, 199, 1e-9);
  // ITL pooled over requests: 100 x4, 200 x2.
  EXPECT_NEAR(m.itl.mean, 800.0 / 6.0, 1e-9);
  EXPECT_NEAR(m.itl.median, 100, 1e-9);
  EXPECT_NEAR(m.itl.p95, 200, 1e-9);  // rank 4.75 lies between two 200s
  EXPECT_NEAR(m.itl.p99, 200, 1e-9);
  EXPECT_NEAR(m.itl.max, 200, 1e-9);
  // TTFT: 100, 300, 200.
  EXPECT_NEAR(m.ttft.mean, 200, 1e-9);
  EXPECT_NEAR(m.ttft.median, 200, 1e-9);
  EXPECT_NEAR(m.ttft.p99, 298, 1e-9);  // rank 1.98: 200 + 0.98 * 100
  // E2E: 200, 500, 700.
  EXPECT_NEAR(m.e2e.mean, 1400.0 / 3.0, 1e-9);
  EXPECT_NEAR(m.e2e.p90, 660, 1e-9);  // rank 1.8: 500 + 0.8 * 200
  // Token times: a at 0.1..0.5 (5 in second 0), one_token at 0.3 (second 0), b at 1.1, 1.3, 1.5.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 6);
  // Second 0 has all three requests in flight (b starts at 0.8).
  EXPECT_EQ(m.max_concurrent_requests, 3);
}

TEST(Metrics, NothingSucceeded) {
  RequestOutput f;
  const BenchmarkMetrics m = calculate_metrics({f, f}, 1.0);
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.total_output, 0);
  EXPECT_DOUBLE_EQ(m.e2e.mean, 0);
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 0);
}

}  // namespace
}  // namespace tandem::bench
