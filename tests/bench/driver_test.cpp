// The whole driver against the in-process fake server (fake_server.h): totals, the accept
// length over exactly the timed run, TTFT/ITL against the server's known schedule, load shape.
#include <gtest/gtest.h>

#include <numeric>

#include "bench_client/dataset.h"
#include "bench_client/driver.h"
#include "bench_client/report.h"
#include "bench_client/server_api.h"
#include "core/error.h"
#include "fake_server.h"

namespace tandem::bench {
namespace {

using testing::FakeServer;

BenchConfig quiet_config(const FakeServer& srv, Backend b) {
  BenchConfig cfg;
  cfg.backend = b;
  cfg.endpoint = parse_base_url(srv.url());
  cfg.request.model = "fake-model";
  cfg.progress = false;
  cfg.log = nullptr;
  cfg.pause_after_warmup_s = 0;
  return cfg;
}

std::vector<DatasetRow> rows_of(int n, int64_t output_len) {
  std::vector<DatasetRow> rows;
  for (int i = 0; i < n; ++i)
    rows.push_back({"prompt " + std::to_string(i), 5 + i, output_len, {}});
  return rows;
}

// The server's schedule: 30 ms to the first token, then a 3-token chunk every 15 ms.
void expect_timings_follow_schedule(const RequestOutput& o, size_t itl_samples) {
  ASSERT_TRUE(o.success) << o.error;
  EXPECT_GE(o.ttft, 0.029);
  EXPECT_LT(o.ttft, o.latency);
  EXPECT_EQ(o.itl.size(), itl_samples);
  const double itl_sum = std::accumulate(o.itl.begin(), o.itl.end(), 0.0);
  // Every gap after the first text is in the ITLs; only the closing events follow the last one.
  EXPECT_LE(o.ttft + itl_sum, o.latency + 1e-9);
  EXPECT_LT(o.latency - (o.ttft + itl_sum), 0.05);
  // The last token left the server at least 30 ms + 13 x 15 ms after the request was sent; a
  // late first text only moves time from the ITLs into the TTFT (a bound on itl_sum alone
  // failed by 0.4 ms on a loaded 2-core machine).
  EXPECT_GE(o.ttft + itl_sum, 0.030 + 13 * 0.015 - 0.002);
}

TEST(Driver, SglangTotalsAcceptLengthAndTimings) {
  FakeServer srv;
  BenchConfig cfg = quiet_config(srv, Backend::kSglang);
  cfg.max_concurrency = 4;
  cfg.request.extra_body = {{"bench_tag", "t1"}};
  const auto rows = rows_of(8, 40);  // 40 tokens: 1 from prefill, then 13 chunks of 3
  const BenchResult res = run_benchmark(cfg, rows);

  EXPECT_EQ(res.metrics.completed, 8);
  EXPECT_EQ(res.metrics.failed, 0);
  EXPECT_EQ(res.metrics.total_output, 8 * 40);
  EXPECT_EQ(res.metrics.total_input, 5 * 8 + 28);
  // Each run chunk after the first is one verify round committing 3 tokens. The counters'
  // since-start ratio (1.5) and the warm-up's one-token chunks (1.0) must not leak in.
  ASSERT_TRUE(res.accept_length);
  EXPECT_EQ(res.accept_length->source, "metrics");
  EXPECT_NEAR(res.accept_length->value, 3.0, 1e-12);
  // Every round accepted the drafts at positions 0 and 1, none at 2 (the counters' since-start
  // values, 400 / 100 / 0, do not leak in).
  EXPECT_EQ(res.accept_length->per_position, (std::vector<double>{1.0, 1.0, 0.0}));

  EXPECT_EQ(srv.generate_calls.load(), 9);  // one warm-up, eight timed
  EXPECT_LE(srv.max_in_flight.load(), 4);
  EXPECT_GE(srv.max_in_flight.load(), 2);
  EXPECT_LE(res.metrics.concurrency, 4.01);
  EXPECT_GE(res.duration, 2 * (0.03 + 13 * 0.015) - 0.01);  // two waves of four
  for (const auto& o : res.outputs) {
    EXPECT_EQ(o.output_len, 40);
    expect_timings_follow_schedule(o, 39);  // per token: 3 samples of gap/3 per chunk
    EXPECT_EQ(o.spec_verify_ct, 13);
  }
  // TTFT is the smallest latency figure; ITL per token is about a third of the 15 ms gap.
  EXPECT_GE(res.metrics.ttft.mean, 29.0);
  EXPECT_LT(res.metrics.ttft.mean, res.metrics.e2e.mean);
  EXPECT_LE(res.metrics.ttft.median, res.metrics.ttft.p99);
  EXPECT_GE(res.metrics.itl.mean, 4.9);
  EXPECT_LT(res.metrics.itl.mean, 15.0);
  EXPECT_GE(res.metrics.tpot.mean, 4.9);

  std::lock_guard<std::mutex> lock(srv.mu);
  ASSERT_EQ(srv.bodies.size(), 9u);
  EXPECT_EQ(srv.bodies[0]["text"], rows[0].prompt);  // the warm-up copies the first request
  EXPECT_EQ(srv.bodies[0]["sampling_params"]["max_new_tokens"], 32);
  for (const auto& b : srv.bodies) {
    EXPECT_EQ(b["sampling_params"]["ignore_eos"], true);
    EXPECT_EQ(b["sampling_params"]["temperature"], 0.0);
    EXPECT_EQ(b["stream"], true);
    EXPECT_EQ(b["bench_tag"], "t1");
  }
  const std::string report = format_report(RunDescription{}, res);
  EXPECT_NE(report.find("Accept length:                           3.00"), std::string::npos);
  EXPECT_NE(report.find("Total generated tokens:                  320"), std::string::npos);
}

TEST(Driver, OpenAICompletionsPerChunkAndPerTokenItl) {
  FakeServer srv;
  BenchConfig cfg = quiet_config(srv, Backend::kOpenAI);
  cfg.warmup_requests = 0;
  BenchResult res = run_benchmark(cfg, rows_of(3, 40));
  EXPECT_EQ(res.metrics.completed, 3);
  EXPECT_EQ(res.metrics.total_output, 120);  // from the final usage chunk
  for (const auto& o : res.outputs) expect_timings_follow_schedule(o, 13);  // one per chunk
  EXPECT_GE(res.metrics.itl.mean, 14.9);
  ASSERT_TRUE(res.accept_length);
  EXPECT_NEAR(res.accept_length->value, 3.0, 1e-12);

  srv.usage_every_chunk = true;  // continuous usage: per-token ITL, as /generate gives
  res = run_benchmark(cfg, rows_of(3, 40));
  for (const auto& o : res.outputs) expect_timings_follow_schedule(o, 39);
  EXPECT_LT(res.metrics.itl.mean, 14.0);
}

TEST(Driver, ChatRoleDeltaIsNotTheFirstToken) {
  FakeServer srv;
  BenchConfig cfg = quiet_config(srv, Backend::kOpenAIChat);
  cfg.warmup_requests = 2;  // several warm-ups run at once
  const BenchResult res = run_benchmark(cfg, rows_of(2, 40));
  ASSERT_EQ(res.metrics.completed, 2);
  for (const auto& o : res.outputs) {
    expect_timings_follow_schedule(o, 13);
    EXPECT_EQ(o.generated_text.size(), 40u * 4u);
    EXPECT_EQ(o.output_len, 40);
  }
}

TEST(Driver, FailedRequestsAreCountedNotFatal) {
  FakeServer srv;
  std::vector<DatasetRow> rows = {
      {"ok 0", 3, 40, {}}, {"FAIL 1", 3, 40, {}}, {"ok 2", 3, 40, {}}, {"FAIL 3", 3, 40, {}}};
  const BenchResult res = run_benchmark(quiet_config(srv, Backend::kSglang), rows);
  EXPECT_EQ(res.metrics.completed, 2);
  EXPECT_EQ(res.metrics.failed, 2);
  EXPECT_EQ(res.metrics.total_output, 80);
  EXPECT_EQ(res.metrics.total_input, 6);
  EXPECT_FALSE(res.outputs[1].success);
  EXPECT_NE(res.outputs[1].error.find("HTTP 500"), std::string::npos);
  EXPECT_NE(format_report(RunDescription{}, res).find("Failed requests:"), std::string::npos);
}

TEST(Driver, AllWarmupsFailingStopsTheRun) {
  FakeServer srv;
  EXPECT_THROW(run_benchmark(quiet_config(srv, Backend::kSglang), {{"FAIL", 3, 8, {}}}), Error);
  EXPECT_EQ(srv.generate_calls.load(), 1);
}

TEST(Driver, AcceptLengthFallbacks) {
  FakeServer srv;
  srv.serve_metrics = false;
  BenchConfig cfg = quiet_config(srv, Backend::kSglang);
  cfg.warmup_requests = 0;
  // Without counters: the run's own /generate meta_info, prefill's token excluded: 39 / 13.
  BenchResult res = run_benchmark(cfg, rows_of(2, 40));
  ASSERT_TRUE(res.accept_length);
  EXPECT_EQ(res.accept_length->source, "meta_info");
  EXPECT_NEAR(res.accept_length->value, 3.0, 1e-12);
  EXPECT_TRUE(res.accept_length->per_position.empty());
  // Without either: SGLang's since-start average, marked as such.
  srv.meta_spec = false;
  res = run_benchmark(cfg, rows_of(2, 40));
  ASSERT_TRUE(res.accept_length);
  EXPECT_EQ(res.accept_length->source, "server_info");
  EXPECT_DOUBLE_EQ(res.accept_length->value, 9.5);
  // Nothing reported: no accept length, and no line for it.
  srv.server_info_accept = 0;
  res = run_benchmark(cfg, rows_of(2, 40));
  EXPECT_FALSE(res.accept_length);
  EXPECT_EQ(format_report(RunDescription{}, res).find("Accept length"), std::string::npos);
}

TEST(Driver, PoissonArrivalsAreHonoured) {
  FakeServer srv;
  BenchConfig cfg = quiet_config(srv, Backend::kSglang);
  cfg.request_rate = 20;
  cfg.seed = 7;
  cfg.warmup_requests = 0;
  const auto rows = rows_of(6, 4);
  const BenchResult res = run_benchmark(cfg, rows);
  Rng rng = arrival_rng(cfg.seed);
  const auto arrivals = arrival_times(6, 20, rng);
  EXPECT_GT(arrivals.back(), 0.0);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_GE(res.outputs[i].start_time, arrivals[i] - 1e-3) << i;
    EXPECT_LT(res.outputs[i].start_time, arrivals[i] + 0.05) << i;
  }
  EXPECT_GE(res.duration, arrivals.back());
}

TEST(Driver, FlushCacheAndNonStreaming) {
  FakeServer srv;
  BenchConfig cfg = quiet_config(srv, Backend::kSglang);
  cfg.flush_cache = true;
  cfg.request.stream = false;
  cfg.warmup_requests = 0;
  const BenchResult res = run_benchmark(cfg, rows_of(2, 40));
  EXPECT_EQ(srv.flush_calls.load(), 1);
  ASSERT_EQ(res.metrics.completed, 2);
  for (const auto& o : res.outputs) {
    EXPECT_TRUE(o.itl.empty());
    EXPECT_DOUBLE_EQ(o.ttft, o.latency);
    EXPECT_EQ(o.output_len, 40);
  }
}

TEST(ServerApi, ModelTokenizerAndUnreachableServers) {
  std::string url;
  {
    FakeServer srv;
    url = srv.url();
    const Endpoint ep = parse_base_url(url);
    EXPECT_EQ(fetch_model_id(ep), "fake-model");
    EXPECT_EQ(fetch_tokenizer_path(ep), "/nowhere/tok");
    const auto c = fetch_spec_counters(ep);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->verify_steps, 1000);
    EXPECT_EQ(c->accepted_tokens, 500);
  }
  // The server is gone: every query answers "nothing", none throws.
  const Endpoint gone = parse_base_url(url);
  EXPECT_FALSE(fetch_model_id(gone));
  EXPECT_FALSE(fetch_spec_counters(gone));
  EXPECT_TRUE(fetch_server_info(gone).is_null());
  BenchConfig cfg;
  cfg.endpoint = gone;
  cfg.log = nullptr;
  cfg.progress = false;
  EXPECT_THROW(run_benchmark(cfg, rows_of(1, 4)), Error);  // the warm-up cannot connect
}

}  // namespace
}  // namespace tandem::bench
