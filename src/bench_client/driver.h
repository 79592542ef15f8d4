// The benchmark run itself: warm-up, the timed run at the requested load shape, then the
// metrics and the server's speculative accept length over exactly that run.
#pragma once

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_client/http.h"
#include "bench_client/metrics.h"
#include "bench_client/request.h"
#include "bench_client/types.h"

namespace tandem::bench {

struct BenchConfig {
  Backend backend = Backend::kSglang;
  Endpoint endpoint;
  RequestOptions request;
  double request_rate = INFINITY;     // requests/s; inf sends everything at once
  int64_t max_concurrency = 0;        // most requests in flight; 0 = no limit
  int64_t warmup_requests = 1;        // copies of the first request, output capped at 32 tokens
  bool flush_cache = false;           // POST /flush_cache after the warm-up
  uint64_t seed = 1;                  // arrival times
  bool progress = true;               // the bar on stderr
  double pause_after_warmup_s = 1.0;  // as bench_serving, so warm-up work has drained
  std::FILE* log = stdout;            // "Starting warmup ..." lines; nullptr = quiet
};

struct AcceptLength {
  double value = 0;
  // "metrics": difference of the /metrics counters over the run (exact);
  // "meta_info": Σ(completion_tokens - 1) / Σ spec_verify_ct of this run's /generate responses
  //   (the first token comes from prefill, not from a verify round);
  // "server_info": /get_server_info's avg_spec_accept_length, cumulative since the server
  //   started (SGLang's only figure; includes warm-up and any earlier traffic).
  std::string source;
  // "metrics" only, when the server publishes per-position counters: the share of this run's
  // verify rounds whose draft at position i (0 first) was accepted.
  std::vector<double> per_position = {};
};

struct BenchResult {
  std::vector<RequestOutput> outputs;  // in dataset order
  double duration = 0;                 // first dispatch to last completion, seconds
  BenchmarkMetrics metrics;
  std::optional<AcceptLength> accept_length;
  nlohmann::json server_info;  // /get_server_info after the run; null when not served
};

// Throws tandem::Error when every warm-up request fails (the server is unreachable or refuses
// the requests); failures during the run are counted, never thrown.
BenchResult run_benchmark(const BenchConfig& cfg, const std::vector<DatasetRow>& rows);

}  // namespace tandem::bench
