#include <gtest/gtest.h>

#include <sstream>

#include "bench_client/report.h"

namespace tandem::bench {
namespace {

BenchResult sample_result() {
  BenchResult r;
  r.duration = 12.3456;
  BenchmarkMetrics& m = r.metrics;
  m.completed = 100;
  m.total_input = 51200;
  m.total_output = 25600;
  m.request_throughput = 8.1;
  m.input_throughput = 4147.2;
  m.output_throughput = 2073.6;
  m.max_output_tokens_per_s = 2500;
  m.max_concurrent_requests = 64;
  m.total_throughput = 6220.8;
  m.concurrency = 31.987;
  m.e2e = {1234.5, 1200.25, 0, 1500, 0, 1600.125, 0};
  m.ttft = {50.0, 45.5, 0, 0, 0, 120.75, 0};
  m.tpot = {12.3, 12.0, 0, 0, 0, 15.5, 0};
  m.itl = {4.1, 4.0, 0, 0, 6.5, 9.25, 30.0};
  return r;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

TEST(Report, SglangLayoutLineByLine) {
  RunDescription run;
  run.backend = Backend::kSglang;
  run.request_rate = INFINITY;
  BenchResult res = sample_result();
  res.accept_length = AcceptLength{2.854, "metrics"};
  const std::vector<std::string> want = {
      "",
      "============ Serving Benchmark Result ============",
      "Backend:                                 sglang    ",
      "Traffic request rate:                    inf       ",
      "Max request concurrency:                 not set   ",
      "Successful requests:                     100       ",
      "Benchmark duration (s):                  12.35     ",
      "Total input tokens:                      51200     ",
      "Total generated tokens:                  25600     ",
      "Request throughput (req/s):              8.10      ",
      "Input token throughput (tok/s):          4147.20   ",
      "Output token throughput (tok/s):         2073.60   ",
      "Peak output token throughput (tok/s):    2500.00   ",
      "Peak concurrent requests:                64        ",
      "Total token throughput (tok/s):          6220.80   ",
      "Concurrency:                             31.99     ",
      "Accept length:                           2.85      ",
      "----------------End-to-End Latency----------------",
      "Mean E2E Latency (ms):                   1234.50   ",
      "Median E2E Latency (ms):                 1200.25   ",
      "P90 E2E Latency (ms):                    1500.00   ",
      "P99 E2E Latency (ms):                    1600.12   ",
      "---------------Time to First Token----------------",
      "Mean TTFT (ms):                          50.00     ",
      "Median TTFT (ms):                        45.50     ",
      "P99 TTFT (ms):                           120.75    ",
      "-----Time per Output Token (excl. 1st token)------",
      "Mean TPOT (ms):                          12.30     ",
      "Median TPOT (ms):                        12.00     ",
      "P99 TPOT (ms):                           15.50     ",
      "---------------Inter-Token Latency----------------",
      "Mean ITL (ms):                           4.10      ",
      "Median ITL (ms):                         4.00      ",
      "P95 ITL (ms):                            6.50      ",
      "P99 ITL (ms):                            9.25      ",
      "Max ITL (ms):                            30.00     ",
      "==================================================",
  };
  EXPECT_EQ(lines(format_report(run, res)), want);
}

TEST(Report, OptionalLines) {
  RunDescription run;
  run.backend = Backend::kOpenAIChat;
  run.request_rate = 4;
  run.max_concurrency = 16;
  BenchResult res = sample_result();
  res.metrics.failed = 3;
  const std::string s = format_report(run, res);
  EXPECT_NE(s.find("Backend:                                 openai-chat\n"), std::string::npos);
  EXPECT_NE(s.find("Traffic request rate:                    4.0       \n"), std::string::npos);
  EXPECT_NE(s.find("Max request concurrency:                 16        \n"), std::string::npos);
  EXPECT_NE(s.find("Failed requests:                         3         \n"), std::string::npos);
  EXPECT_EQ(s.find("Accept length"), std::string::npos);  // no speculation reported
}

TEST(Report, PythonFloatRepr) {
  EXPECT_EQ(py_float(INFINITY), "inf");
  EXPECT_EQ(py_float(4), "4.0");
  EXPECT_EQ(py_float(0.25), "0.25");
  EXPECT_EQ(py_float(2.5), "2.5");
}

TEST(Report, JsonUsesBenchServingKeys) {
  RunDescription run;
  run.request_rate = INFINITY;
  BenchResult res = sample_result();
  res.accept_length = AcceptLength{2.5, "metrics"};
  const auto j = result_json(run, res);
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["completed"], 100);
  EXPECT_EQ(j["total_output_tokens"], 25600);
  EXPECT_DOUBLE_EQ(j["accept_length"].get<double>(), 2.5);
  EXPECT_EQ(j["accept_length_source"], "metrics");
  EXPECT_DOUBLE_EQ(j["p99_itl_ms"].get<double>(), 9.25);
  EXPECT_DOUBLE_EQ(j["median_ttft_ms"].get<double>(), 45.5);
  EXPECT_DOUBLE_EQ(j["mean_e2e_latency_ms"].get<double>(), 1234.5);
  EXPECT_TRUE(j["max_concurrency"].is_null());
}

}  // namespace
}  // namespace tandem::bench
