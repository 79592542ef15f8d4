#include "bench_client/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem::bench {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double median(const std::vector<double>& v) {
  return percentile(v, 50);
}

double stdev(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const double m = mean(v);
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size()));
}

double max_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

Distribution summarize_ms(const std::vector<double>& s) {
  Distribution d;
  d.mean = mean(s) * 1000;
  d.median = median(s) * 1000;
  d.std = stdev(s) * 1000;
  d.p90 = percentile(s, 90) * 1000;
  d.p95 = percentile(s, 95) * 1000;
  d.p99 = percentile(s, 99) * 1000;
  d.max = max_of(s) * 1000;
  return d;
}

BenchmarkMetrics calculate_metrics(const std::vector<RequestOutput>& outputs, double dur_s) {
  BenchmarkMetrics m;
  std::vector<double> e2e, ttft, tpot, itl;
  double min_start = INFINITY, max_end = -INFINITY;
  for (const RequestOutput& o : outputs) {
    if (!o.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input += o.prompt_len;
    m.total_output += o.output_len;
    // TPOT excludes the first token, so it needs at least two.
    if (o.output_len > 1)
      tpot.push_back((o.latency - o.ttft) / static_cast<double>(o.output_len - 1));
    itl.insert(itl.end(), o.itl.begin(), o.itl.end());
    ttft.push_back(o.ttft);
    e2e.push_back(o.latency);
    min_start = std::min(min_start, o.start_time);
    max_end = std::max(max_end, o.start_time + o.latency);
  }
  if (dur_s > 0) {
    m.request_throughput = static_cast<double>(m.completed) / dur_s;
    m.input_throughput = static_cast<double>(m.total_input) / dur_s;
    m.output_throughput = static_cast<double>(m.total_output) / dur_s;
    m.total_throughput = static_cast<double>(m.total_input + m.total_output) / dur_s;
    m.concurrency = std::accumulate(e2e.begin(), e2e.end(), 0.0) / dur_s;
  }
  m.e2e = summarize_ms(e2e);
  m.ttft = summarize_ms(ttft);
  m.tpot = summarize_ms(tpot);
  m.itl = summarize_ms(itl);

  if (m.completed > 0) {
    // One-second buckets from the first request's start, as bench_serving counts them.
    const size_t n_buckets = static_cast<size_t>(std::ceil(max_end - min_start)) + 1;
    std::vector<double> tokens(n_buckets, 0.0);
    std::vector<int64_t> in_flight(n_buckets, 0);
    auto bucket = [&](double t) { return static_cast<int64_t>(t - min_start); };  // truncation
    for (const RequestOutput& o : outputs) {
      if (!o.success) continue;
      double t = o.start_time + o.ttft;
      auto count = [&](double at) {
        const int64_t b = bucket(at);
        if (b >= 0 && b < static_cast<int64_t>(n_buckets)) tokens[static_cast<size_t>(b)] += 1;
      };
      count(t);
      for (double gap : o.itl) count(t += gap);
      const int64_t first = bucket(o.start_time);
      const int64_t last =
          std::min<int64_t>(bucket(o.start_time + o.latency), static_cast<int64_t>(n_buckets) - 1);
      for (int64_t s = std::max<int64_t>(first, 0); s <= last; ++s)
        ++in_flight[static_cast<size_t>(s)];
    }
    m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
    m.max_concurrent_requests = *std::max_element(in_flight.begin(), in_flight.end());
  }
  return m;
}

}  // namespace tandem::bench
