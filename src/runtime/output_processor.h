// What leaves the engine: committed tokens checked against the stop rules, each step's new
// tokens sent to the requests' streams (where the server detokenizes them), finished requests
// retired, and the per-request and server metrics. Runs on the engine thread; metrics() may be
// read from any thread.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "runtime/sequence.h"

namespace tandem {

class OutputProcessor {
 public:
  explicit OutputProcessor(int64_t draft_steps);

  // Appends tokens to s, stopping at a stop token or at max_new_tokens; its KV never covers
  // more than the committed tokens minus the newest one.
  static void commit(Sequence& s, const std::vector<int32_t>& toks);
  // Sends each running sequence's pending tokens and retires the finished ones.
  void send(Scheduler& sched);
  // Ends a request that did not finish by itself (abort, failed step, shutdown).
  void finish(Sequence& s, FinishReason why, const std::string& error);

  void count_request();
  void count_step();
  void count_graphed_prefill();  // the step just counted was a prefill replayed as a graph
  // One sequence's verify round: S drafts, `accepted` of them accepted.
  void count_round(int64_t draft_steps, int64_t accepted);
  // A decode step of a speculating engine ran at this depth (0: plain).
  void count_depth(int64_t depth);
  // Positions the draft read inside prefill steps and in catch-ups before rounds.
  void count_draft_reads(int64_t prefill, int64_t catch_up);
  void add_phase_seconds(const std::array<double, 4>& seconds);
  // One iteration of the engine loop; decode: it ran a decode step.
  void add_loop_seconds(const std::array<double, static_cast<size_t>(LoopPhase::kCount)>& seconds,
                        bool decode);
  void publish(const Scheduler& sched);  // queue and cache gauges, recent throughput
  void count_warm_up(int64_t forwards);
  // The engine's warm-up requests ran through the ordinary loop: their counts (requests, tokens,
  // steps, speculation, loop time) are dropped; their forward steps are added to
  // warm_up_forwards.
  void forget_warm_up_requests();
  EngineMetrics metrics() const;

 private:
  static void fill_totals(const Sequence& s, RequestOutput& o);
  using Clock = std::chrono::steady_clock;
  mutable std::mutex mu_;
  EngineMetrics m_;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_tokens_;  // last_gen_throughput
  int64_t recent_sum_ = 0;  // the sum of recent_tokens_' counts
};

}  // namespace tandem
