#include "bench_client/driver.h"

#include <sys/resource.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "bench_client/dataset.h"
#include "bench_client/progress.h"
#include "bench_client/send.h"
#include "bench_client/server_api.h"
#include "core/error.h"

namespace tandem::bench {

namespace {

void say(const BenchConfig& cfg, const std::string& msg) {
  if (!cfg.log) return;
  std::fprintf(cfg.log, "%s\n", msg.c_str());
  std::fflush(cfg.log);
}

// One socket per request in flight: lift the soft descriptor limit to the hard one, as
// bench_serving does, so that a thousand concurrent requests do not hit 1024.
void raise_fd_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

void warm_up(const BenchConfig& cfg, const DatasetRow& first) {
  if (cfg.warmup_requests <= 0) return;
  say(cfg, fmt::format("Starting warmup with {} sequences...", cfg.warmup_requests));
  std::vector<RequestOutput> outs(static_cast<size_t>(cfg.warmup_requests));
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (auto& o : outs)
    threads.emplace_back([&cfg, &first, &o, t0] {
      o = send_request(cfg.endpoint, cfg.backend, first, std::min<int64_t>(first.output_len, 32),
                       cfg.request, t0);
    });
  for (auto& t : threads) t.join();
  bool any = false;
  for (const auto& o : outs) any = any || o.success;
  if (!any)
    fail("Warmup failed - please make sure the benchmark arguments are correct. Error: {}",
         outs[0].error);
  say(cfg, fmt::format("Warmup completed with {} sequences. Starting main benchmark run...",
                       cfg.warmup_requests));
}

// Arrival-ordered requests handed to a fixed set of workers. With max_concurrency workers,
// a request that arrives while all are busy waits its turn, like bench_serving's semaphore;
// without a limit there is a worker per request.
class WorkQueue {
 public:
  void push(size_t i) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(i);
    }
    cv_.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }
  std::optional<size_t> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return closed_ || !q_.empty(); });
    if (q_.empty()) return std::nullopt;
    const size_t i = q_.front();
    q_.pop_front();
    return i;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<size_t> q_;
  bool closed_ = false;
};

std::optional<AcceptLength> accept_length(const BenchConfig& cfg,
                                          const std::optional<SpecCounters>& before,
                                          const std::optional<SpecCounters>& after,
                                          const std::vector<RequestOutput>& outputs,
                                          const nlohmann::json& server_info) {
  if (before && after)
    if (auto v = accept_length_delta(*before, *after))
      return AcceptLength{*v, "metrics", acceptance_per_position_delta(*before, *after)};
  if (cfg.backend == Backend::kSglang) {
    double tokens = 0, rounds = 0;
    for (const auto& o : outputs)
      if (o.success && o.spec_verify_ct > 0) {
        tokens += static_cast<double>(o.output_len - 1);
        rounds += static_cast<double>(o.spec_verify_ct);
      }
    if (rounds > 0) return AcceptLength{tokens / rounds, "meta_info"};
  }
  if (auto v = server_info_accept_length(server_info)) return AcceptLength{*v, "server_info"};
  return std::nullopt;
}

}  // namespace

BenchResult run_benchmark(const BenchConfig& cfg, const std::vector<DatasetRow>& rows) {
  if (rows.empty()) throw InvalidArgument("no requests to send (--num-prompts is 0)");
  if (cfg.max_concurrency < 0) throw InvalidArgument("--max-concurrency must be positive");
  warm_up(cfg, rows[0]);
  if (cfg.flush_cache)
    if (auto err = flush_cache(cfg.endpoint)) say(cfg, "Warning: /flush_cache failed: " + *err);
  if (cfg.pause_after_warmup_s > 0)
    std::this_thread::sleep_for(std::chrono::duration<double>(cfg.pause_after_warmup_s));
  raise_fd_limit();

  Rng rng = arrival_rng(cfg.seed);
  const std::vector<double> arrivals =
      arrival_times(static_cast<int64_t>(rows.size()), cfg.request_rate, rng);
  const auto before = fetch_spec_counters(cfg.endpoint);

  BenchResult res;
  res.outputs.resize(rows.size());
  const size_t n_workers = cfg.max_concurrency > 0
                               ? std::min(rows.size(), static_cast<size_t>(cfg.max_concurrency))
                               : rows.size();
  WorkQueue queue;
  ProgressBar bar(static_cast<int64_t>(rows.size()), cfg.progress);
  Clock::time_point t0;  // written before the first push; the queue's mutex publishes it
  std::vector<std::thread> workers;
  workers.reserve(n_workers);
  for (size_t w = 0; w < n_workers; ++w)
    workers.emplace_back([&] {
      while (auto i = queue.pop()) {
        const DatasetRow& row = rows[*i];
        res.outputs[*i] =
            send_request(cfg.endpoint, cfg.backend, row, row.output_len, cfg.request, t0);
        bar.tick();
      }
    });
  t0 = Clock::now();
  for (size_t i = 0; i < rows.size(); ++i) {
    // Absolute arrival times, so sleep overshoot does not accumulate into a lower rate.
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(arrivals[i])));
    queue.push(i);
  }
  queue.close();
  for (auto& t : workers) t.join();
  res.duration = std::chrono::duration<double>(Clock::now() - t0).count();
  bar.finish();

  const auto after = fetch_spec_counters(cfg.endpoint);
  res.server_info = fetch_server_info(cfg.endpoint);
  res.metrics = calculate_metrics(res.outputs, res.duration);
  res.accept_length = accept_length(cfg, before, after, res.outputs, res.server_info);
  return res;
}

}  // namespace tandem::bench
