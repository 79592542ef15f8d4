// bench_serving's calculate_metrics: throughput, latency distributions, peak throughput.
#pragma once

#include <cstdint>
#include <vector>

#include "bench_client/types.h"

namespace tandem::bench {

// numpy.percentile's default ('linear'): the value at rank p/100 * (n - 1) of the sorted
// samples, interpolated between the two neighbours. 0 for no samples (bench_serving's
// `np.percentile(x or 0, p)`).
double percentile(std::vector<double> v, double p);
double mean(const std::vector<double>& v);    // 0 for no samples
double median(const std::vector<double>& v);  // percentile 50
double stdev(const std::vector<double>& v);   // population (numpy's ddof=0)
double max_of(const std::vector<double>& v);  // 0 for no samples

// Milliseconds.
struct Distribution {
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};
Distribution summarize_ms(const std::vector<double>& seconds);

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;   // Σ prompt_len over successful requests
  int64_t total_output = 0;  // Σ output_len (the server's counts) over successful requests
  double request_throughput = 0, input_throughput = 0, output_throughput = 0, total_throughput = 0;
  // Most output tokens in any whole second of the run (token times rebuilt from TTFT + ITLs)
  // and most requests in flight in any second.
  double max_output_tokens_per_s = 0;
  int64_t max_concurrent_requests = 0;
  double concurrency = 0;  // Σ e2e latency / duration: requests in flight on average
  Distribution e2e, ttft, tpot, itl;
};

// dur_s: first dispatch to last completion.
BenchmarkMetrics calculate_metrics(const std::vector<RequestOutput>& outputs, double dur_s);

}  // namespace tandem::bench
