// Prometheus text format: HELP/TYPE before each family's samples, families unique, counters
// ending in _total, cumulative histogram buckets ending in +Inf == _count, and the series names
// SGLang and vLLM clients scrape.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "server/metrics.h"

namespace tandem::server {
namespace {

TEST(Histogram, CumulativeBuckets) {
  Histogram h({0.1, 1, 10});
  h.observe(0.05);
  h.observe(0.1);  // "le" is inclusive
  h.observe(0.5, 3);
  h.observe(100);
  const auto s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), 4u);
  EXPECT_EQ(s.cumulative[0], 2u);
  EXPECT_EQ(s.cumulative[1], 5u);
  EXPECT_EQ(s.cumulative[2], 5u);
  EXPECT_EQ(s.cumulative[3], 6u);
  EXPECT_EQ(s.count, 6u);
  EXPECT_DOUBLE_EQ(s.sum, 0.05 + 0.1 + 1.5 + 100);
}

// Threads observe while another takes snapshots (as pump threads and /metrics do): no count is
// lost, every snapshot is cumulative with its +Inf bucket equal to its count, and the final sum is
// exact (the values are exact in binary).
TEST(Histogram, ObservationsFromManyThreadsAreAllCounted) {
  Histogram h({0.25, 0.5, 1});
  constexpr int kThreads = 8, kEach = 20000;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      const auto s = h.snapshot();
      for (size_t i = 1; i < s.cumulative.size(); ++i)
        ASSERT_LE(s.cumulative[i - 1], s.cumulative[i]);
      ASSERT_EQ(s.cumulative.back(), s.count);
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t)
    writers.emplace_back([&h, t] {
      for (int i = 0; i < kEach; ++i) h.observe((t % 4) * 0.25 + 0.125, 1 + (i & 1));
    });
  for (auto& w : writers) w.join();
  done = true;
  reader.join();
  const auto s = h.snapshot();
  const uint64_t per_thread = kEach / 2 * 3;  // times 1 and 2 alternately
  EXPECT_EQ(s.count, kThreads * per_thread);
  // Two threads per value: 0.125 -> le 0.25, 0.375 -> le 0.5, 0.625 and 0.875 -> le 1.
  EXPECT_EQ(s.cumulative[0], 2 * per_thread);
  EXPECT_EQ(s.cumulative[1], 4 * per_thread);
  EXPECT_EQ(s.cumulative[2], 8 * per_thread);
  EXPECT_DOUBLE_EQ(s.sum, 2.0 * per_thread * (0.125 + 0.375 + 0.625 + 0.875));
}

struct Parsed {
  std::map<std::string, std::string> type;  // family -> type
  std::map<std::string, double> samples;    // "name{labels}" -> value
};

Parsed parse(const std::string& text) {
  // Sample: name{labels} value, with the model_name label on every sample.
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(model_name="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_]+="(?:[^"\\]|\\.)*")*)\} (\S+)$)");
  Parsed p;
  std::istringstream in(text);
  std::string line, current;
  std::set<std::string> helped;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(helped.insert(name).second) << "family twice: " << name;
      current = name;
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream ls(line.substr(7));
      std::string name, type;
      ls >> name >> type;
      EXPECT_EQ(name, current) << "TYPE without its HELP";
      EXPECT_TRUE(type == "counter" || type == "gauge" || type == "histogram") << line;
      if (type == "counter") {
        EXPECT_TRUE(name.ends_with("_total")) << name;
      }
      p.type[name] = type;
      continue;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << "bad sample line: " << line;
    if (m.empty()) continue;
    const std::string name = m[1];
    // Samples belong to the family announced just before them.
    EXPECT_TRUE(name == current || name == current + "_bucket" || name == current + "_sum" ||
                name == current + "_count")
        << name << " under " << current;
    p.samples[name + "{" + std::string(m[2]) + "}"] = std::stod(m[3]);
  }
  return p;
}

TEST(Prometheus, FormatAndNames) {
  EngineMetrics e;
  e.num_running = 3;
  e.num_waiting = 2;
  e.kv_pages_total = 100;
  e.kv_pages_used = 25;
  e.kv_pages_cached = 5;
  e.prompt_tokens_total = 1000;
  e.cached_tokens_total = 250;
  e.generation_tokens_total = 500;
  e.spec_verify_steps = 10;
  e.spec_draft_tokens = 30;
  e.spec_accepted_tokens = 15;
  e.spec_accepted_per_position = {8, 5, 2};
  e.spec_depth_steps = {4, 0, 3, 7};
  e.spec_draft_prefill_tokens = 900;
  e.spec_draft_catch_up_tokens = 120;
  ServerMetrics s;
  s.ttft.observe(0.02);
  s.itl.observe(0.005, 4);
  s.e2e.observe(1.5);
  s.record_finish(FinishReason::kStop);
  s.record_finish(FinishReason::kLength);
  const std::string text = render_prometheus(e, s, MetricsContext{"my \"model\"", 16});
  const Parsed p = parse(text);
  const std::string L = R"(model_name="my \"model\"")";
  auto value = [&](const std::string& series) {
    auto it = p.samples.find(series);
    EXPECT_NE(it, p.samples.end()) << "missing " << series;
    return it == p.samples.end() ? -1.0 : it->second;
  };
  for (const char* prefix : {"tandem:", "sglang:"}) {
    const std::string P = prefix;
    EXPECT_EQ(value(P + "num_running_reqs{" + L + "}"), 3);
    EXPECT_EQ(value(P + "num_queue_reqs{" + L + "}"), 2);
    EXPECT_EQ(value(P + "num_used_tokens{" + L + "}"), 25 * 16);
    EXPECT_DOUBLE_EQ(value(P + "token_usage{" + L + "}"), 0.25);
    EXPECT_DOUBLE_EQ(value(P + "cache_hit_rate{" + L + "}"), 0.25);
    EXPECT_DOUBLE_EQ(value(P + "spec_accept_length{" + L + "}"), 2.5);
    EXPECT_DOUBLE_EQ(value(P + "spec_accept_rate{" + L + "}"), 0.5);
    EXPECT_EQ(value(P + "prompt_tokens_total{" + L + "}"), 1000);
    EXPECT_EQ(value(P + "generation_tokens_total{" + L + "}"), 500);
    EXPECT_EQ(value(P + "num_requests_total{" + L + "}"), 2);
    EXPECT_EQ(p.type.at(P + "time_to_first_token_seconds"), "histogram");
    EXPECT_EQ(value(P + "time_to_first_token_seconds_count{" + L + "}"), 1);
    EXPECT_EQ(value(P + "time_to_first_token_seconds_bucket{" + L + ",le=\"+Inf\"}"), 1);
    EXPECT_EQ(value(P + "time_to_first_token_seconds_bucket{" + L + ",le=\"0.01\"}"), 0);
    EXPECT_EQ(value(P + "time_to_first_token_seconds_bucket{" + L + ",le=\"0.02\"}"), 1);
    EXPECT_EQ(value(P + "inter_token_latency_seconds_count{" + L + "}"), 4);
    EXPECT_DOUBLE_EQ(value(P + "e2e_request_latency_seconds_sum{" + L + "}"), 1.5);
  }
  EXPECT_EQ(value("tandem:kv_pages_used{" + L + "}"), 25);
  EXPECT_EQ(value("tandem:kv_pages_cached{" + L + "}"), 5);
  EXPECT_EQ(value("tandem:request_success_total{" + L + ",finished_reason=\"length\"}"), 1);
  EXPECT_EQ(value("vllm:spec_decode_num_drafts_total{" + L + "}"), 10);
  EXPECT_EQ(value("vllm:spec_decode_num_draft_tokens_total{" + L + "}"), 30);
  EXPECT_EQ(value("vllm:spec_decode_num_accepted_tokens_total{" + L + "}"), 15);
  EXPECT_EQ(value("vllm:spec_decode_num_accepted_tokens_per_pos_total{" + L + ",position=\"1\"}"),
            5);
  EXPECT_EQ(value("tandem:spec_accepted_tokens_per_pos_total{" + L + ",position=\"2\"}"), 2);
  EXPECT_EQ(value("tandem:spec_depth_steps_total{" + L + ",depth=\"0\"}"), 4);
  EXPECT_EQ(value("tandem:spec_depth_steps_total{" + L + ",depth=\"3\"}"), 7);
  EXPECT_EQ(p.type.at("tandem:spec_depth_steps_total"), "counter");
  EXPECT_EQ(value("tandem:spec_draft_prefill_tokens_total{" + L + "}"), 900);
  EXPECT_EQ(value("tandem:spec_draft_catch_up_tokens_total{" + L + "}"), 120);
  EXPECT_EQ(p.type.at("tandem:spec_draft_catch_up_tokens_total"), "counter");
  // Buckets are cumulative and non-decreasing for every histogram.
  for (const auto& [family, type] : p.type) {
    if (type != "histogram") continue;
    for (const auto& [series, v] : p.samples)
      if (series.rfind(family + "_bucket{", 0) == 0 && series.find("+Inf") == std::string::npos) {
        EXPECT_LE(v, value(family + "_count{" + L + "}")) << series;
      }
  }
}

}  // namespace
}  // namespace tandem::server
