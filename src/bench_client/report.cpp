#include "bench_client/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tandem::bench {

namespace {

// Python's "{s:{c}^{n}}": centred, the odd fill character going to the right.
std::string centred(const std::string& s, char fill, size_t width = 50) {
  if (s.size() >= width) return s;
  const size_t left = (width - s.size()) / 2;
  return std::string(left, fill) + s + std::string(width - s.size() - left, fill);
}

void row(std::string& out, const std::string& label, const std::string& value) {
  out += fmt::format("{:<40} {:<10}\n", label, value);
}

void row(std::string& out, const std::string& label, double value) {
  out += fmt::format("{:<40} {:<10.2f}\n", label, value);
}

}  // namespace

std::string py_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);  // shortest round-trip, as Python's repr
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

std::string format_report(const RunDescription& run, const BenchResult& res) {
  const BenchmarkMetrics& m = res.metrics;
  std::string out = "\n";
  out += centred(" Serving Benchmark Result ", '=');
  out += '\n';
  row(out, "Backend:", backend_name(run.backend));
  row(out, "Traffic request rate:", py_float(run.request_rate));
  row(out, "Max request concurrency:",
      run.max_concurrency > 0 ? std::to_string(run.max_concurrency) : std::string("not set"));
  row(out, "Successful requests:", std::to_string(m.completed));
  // Not in bench_serving's layout; shown only when something failed.
  if (m.failed > 0) row(out, "Failed requests:", std::to_string(m.failed));
  row(out, "Benchmark duration (s):", res.duration);
  row(out, "Total input tokens:", std::to_string(m.total_input));
  row(out, "Total generated tokens:", std::to_string(m.total_output));
  row(out, "Request throughput (req/s):", m.request_throughput);
  row(out, "Input token throughput (tok/s):", m.input_throughput);
  row(out, "Output token throughput (tok/s):", m.output_throughput);
  row(out, "Peak output token throughput (tok/s):", m.max_output_tokens_per_s);
  row(out, "Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  row(out, "Total token throughput (tok/s):", m.total_throughput);
  row(out, "Concurrency:", m.concurrency);
  if (res.accept_length) row(out, "Accept length:", res.accept_length->value);
  out += centred("End-to-End Latency", '-') + "\n";
  row(out, "Mean E2E Latency (ms):", m.e2e.mean);
  row(out, "Median E2E Latency (ms):", m.e2e.median);
  row(out, "P90 E2E Latency (ms):", m.e2e.p90);
  row(out, "P99 E2E Latency (ms):", m.e2e.p99);
  out += centred("Time to First Token", '-') + "\n";
  row(out, "Mean TTFT (ms):", m.ttft.mean);
  row(out, "Median TTFT (ms):", m.ttft.median);
  row(out, "P99 TTFT (ms):", m.ttft.p99);
  out += centred("Time per Output Token (excl. 1st token)", '-') + "\n";
  row(out, "Mean TPOT (ms):", m.tpot.mean);
  row(out, "Median TPOT (ms):", m.tpot.median);
  row(out, "P99 TPOT (ms):", m.tpot.p99);
  out += centred("Inter-Token Latency", '-') + "\n";
  row(out, "Mean ITL (ms):", m.itl.mean);
  row(out, "Median ITL (ms):", m.itl.median);
  row(out, "P95 ITL (ms):", m.itl.p95);
  row(out, "P99 ITL (ms):", m.itl.p99);
  row(out, "Max ITL (ms):", m.itl.max);
  out += std::string(50, '=') + "\n";
  return out;
}

nlohmann::json result_json(const RunDescription& run, const BenchResult& res) {
  const BenchmarkMetrics& m = res.metrics;
  using json = nlohmann::json;
  json j;
  j["backend"] = backend_name(run.backend);
  j["dataset_name"] = run.dataset_name;
  j["model"] = run.model;
  // bench_serving writes the float; JSON has no inf, so Python's json writes Infinity, which
  // strict parsers reject. A string keeps the file valid JSON.
  if (std::isinf(run.request_rate))
    j["request_rate"] = "inf";
  else
    j["request_rate"] = run.request_rate;
  j["max_concurrency"] = run.max_concurrency > 0 ? json(run.max_concurrency) : json(nullptr);
  j["num_prompts"] = run.num_prompts;
  j["random_input_len"] = run.random_input_len;
  j["random_output_len"] = run.random_output_len;
  j["random_range_ratio"] = run.random_range_ratio;
  j["server_info"] = res.server_info;
  j["duration"] = res.duration;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["input_throughput"] = m.input_throughput;
  j["output_throughput"] = m.output_throughput;
  j["total_throughput"] = m.total_throughput;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  j["concurrency"] = m.concurrency;
  j["accept_length"] = res.accept_length ? json(res.accept_length->value) : json(nullptr);
  j["accept_length_source"] = res.accept_length ? json(res.accept_length->source) : json(nullptr);
  auto dist = [&](const char* name, const Distribution& d, bool with_p90, bool with_p95,
                  bool with_max) {
    const std::string n = name;
    j["mean_" + n + "_ms"] = d.mean;
    j["median_" + n + "_ms"] = d.median;
    j["std_" + n + "_ms"] = d.std;
    if (with_p90) j["p90_" + n + "_ms"] = d.p90;
    if (with_p95) j["p95_" + n + "_ms"] = d.p95;
    j["p99_" + n + "_ms"] = d.p99;
    if (with_max) j["max_" + n + "_ms"] = d.max;
  };
  dist("e2e_latency", m.e2e, true, false, false);
  dist("ttft", m.ttft, false, false, false);
  dist("tpot", m.tpot, false, false, false);
  dist("itl", m.itl, false, true, true);
  return j;
}

BenchChart bench_chart(const std::string& title, const std::vector<int64_t>& max_concurrency,
                       const std::vector<BenchResult>& results) {
  std::vector<size_t> order(std::min(max_concurrency.size(), results.size()));
  std::iota(order.begin(), order.end(), 0);
  // Ascending, "no limit" (0) after every bound.
  const auto key = [&](size_t i) {
    return max_concurrency[i] > 0 ? max_concurrency[i] : std::numeric_limits<int64_t>::max();
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) < key(b); });
  const bool speculative = !order.empty() && std::all_of(order.begin(), order.end(), [&](size_t i) {
    return results[i].accept_length.has_value();
  });
  const bool per_position = std::any_of(order.begin(), order.end(), [&](size_t i) {
    return results[i].accept_length && !results[i].accept_length->per_position.empty();
  });
  BenchChart c;
  c.title = title;
  auto& tok_s = speculative ? c.mtp_tok_s : c.plain_tok_s;
  auto& tpot = speculative ? c.mtp_tpot_ms : c.plain_tpot_ms;
  for (size_t i : order) {
    const BenchResult& r = results[i];
    c.concurrency.push_back(max_concurrency[i]);
    tok_s.push_back(r.metrics.output_throughput);
    tpot.push_back(r.metrics.tpot.mean);
    if (per_position)
      c.accept_per_position.push_back(r.accept_length ? r.accept_length->per_position
                                                      : std::vector<double>{});
  }
  return c;
}

}  // namespace tandem::bench
