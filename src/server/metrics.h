// Prometheus metrics, written by hand in the text exposition format (version 0.0.4). Every series
// exists as tandem:<name>; the ones SGLang dashboards and benchmarks scrape also as sglang:<name>,
// and the speculative-decoding counters also under vLLM's names (vllm:spec_decode_*), so
// `vllm bench serve` can difference them. docs/server.md lists them all.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace tandem::server {

// Lock-free: the stream pump threads observe every token event, and a mutex they all take per
// event showed up as contention (docs/benchmarks.md, "HTTP against in-process").
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value, uint64_t times = 1);

  struct Snapshot {
    std::vector<double> bounds;        // finite upper bounds, ascending
    std::vector<uint64_t> cumulative;  // per bound, then one for +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket (not cumulative), last = overflow
  std::atomic<double> sum_{0.0};
};

// What the server itself measures (the engine counts tokens and pages).
struct ServerMetrics {
  ServerMetrics();
  Histogram ttft;  // submit to first token, seconds
  Histogram itl;   // gap between tokens; a multi-token message splits its gap evenly
  Histogram e2e;   // submit to finish
  std::array<std::atomic<uint64_t>, 5> finished{};  // by FinishReason
  void record_finish(FinishReason r) { finished[static_cast<size_t>(r)] += 1; }
  uint64_t finished_total() const;
};

struct MetricsContext {
  std::string model_name;
  int64_t page_size = 1;
};

std::string render_prometheus(const EngineMetrics& engine, const ServerMetrics& server,
                              const MetricsContext& ctx);

}  // namespace tandem::server
