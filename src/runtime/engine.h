// The serving engine: a loop on its own thread that runs continuous batching (chunked prefill,
// decode, optional MTP speculative decoding) over a paged KV cache with a prefix cache. The
// server talks to it only through typed messages: submit a Request, read RequestOutputs from its
// stream, abort. Inside, the engine wires four rooms, each in its own files: the Scheduler
// (what a step runs: a StepPlan), the ModelRunner (device inputs, graphs, forwards, sampling),
// the SpecWorker (draft, verify, accept) and the OutputProcessor (stop rules, streams, metrics).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/process_group.h"
#include "model/model.h"
#include "runtime/engine_options.h"
#include "runtime/loop_clock.h"
#include "runtime/sampler.h"
#include "runtime/token_constraint.h"

namespace tandem {

struct Request {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // generation ends after emitting one of these
  bool return_hidden_states = false;    // the LM-head input of every generated token
  // Constrained decoding (structured outputs, forced tool calls): every generated token is one
  // the constraint allows; null: unconstrained. One object per request: it follows its tokens.
  std::shared_ptr<TokenConstraint> constraint;
};

enum class FinishReason { kNone, kStop, kLength, kAbort, kError };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

// One message on a request's stream. With speculative decoding a message can carry several
// tokens. The last message has finished = true.
struct RequestOutput {
  std::vector<int32_t> new_tokens;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  int32_t matched_stop_token = -1;
  std::string error;
  // Running totals for the request.
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;                      // prompt tokens served from the prefix cache
  int64_t spec_verify_steps = 0;                  // verify rounds this request took part in
  int64_t spec_accepted_drafts = 0;               // drafts accepted (bonus tokens excluded)
  int64_t spec_draft_tokens = 0;                  // drafts proposed (adaptive depth varies)
  std::vector<std::vector<float>> hidden_states;  // [new_tokens][hidden] when requested
};

class RequestStream {
 public:
  virtual ~RequestStream() = default;
  virtual uint64_t id() const = 0;
  // Waits up to timeout for the next message; false if none arrived.
  virtual bool next(RequestOutput& out, std::chrono::milliseconds timeout) = 0;
  // Calls fn (on the engine's thread, so it must be quick and must not call back into the
  // stream) after each message is queued, and once at once if messages are already waiting; an
  // empty fn stops the calls. Lets a reader serve many streams from one thread instead of
  // blocking in next() on one thread per stream. Returns false if this stream cannot notify.
  virtual bool set_notify(std::function<void()> fn) {
    (void)fn;
    return false;
  }
};

struct EngineMetrics {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t kv_pages_total = 0;
  int64_t kv_pages_used = 0;    // held by requests or the prefix cache
  int64_t kv_pages_cached = 0;  // held only by the prefix cache (evictable)
  uint64_t requests_total = 0;
  uint64_t requests_finished = 0;
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t cached_tokens_total = 0;
  uint64_t preemptions_total = 0;
  uint64_t forward_steps_total = 0;
  // Prefill steps that replayed a graph of their padded shape (cuda_graph_max_prefill_tokens).
  uint64_t graphed_prefill_steps = 0;
  // Forwards (prefill part) and steps (decode part) of the start-up warm-up
  // (EngineOptions::warm_up_tokens), in none of the other counts.
  uint64_t warm_up_forwards = 0;
  // Speculative decoding (cumulative since start).
  uint64_t spec_verify_steps = 0;  // per request per round
  uint64_t spec_draft_tokens = 0;
  uint64_t spec_accepted_tokens = 0;  // accepted drafts, bonus excluded
  std::vector<uint64_t> spec_accepted_per_position;
  // Decode steps of a speculating engine by the depth they ran, [0, max depth] (0: plain).
  std::vector<uint64_t> spec_depth_steps;
  // Positions the draft read along with the target's prefill steps, and in catch-ups before a
  // round (adaptive depth: prompts and plainly decoded positions read later, stalling the round).
  uint64_t spec_draft_prefill_tokens = 0;
  uint64_t spec_draft_catch_up_tokens = 0;
  // With EngineOptions::profile_spec_phases: wall seconds spent in each phase of the speculative
  // rounds so far (draft decode, verify, accept + commit, draft extend), over spec_profiled_rounds
  // rounds (all requests of a round together).
  static constexpr std::array<const char*, 4> kSpecPhaseNames = {"draft", "verify", "accept",
                                                                 "extend"};
  std::array<double, 4> spec_phase_seconds{};
  uint64_t spec_profiled_rounds = 0;
  // Wall seconds of the engine thread by phase of its loop (loop_clock.h), cumulative: they sum
  // to the thread's lifetime, so a slower step can be told apart by where it spends its time.
  std::array<double, static_cast<size_t>(LoopPhase::kCount)> loop_phase_seconds{};
  // The same for the loop iterations that ran a decode step (plain or speculative) only, and
  // their count: a slower decode step apart from prefill steps and the turnover of requests.
  std::array<double, static_cast<size_t>(LoopPhase::kCount)> decode_loop_phase_seconds{};
  uint64_t decode_loop_steps = 0;
  double last_gen_throughput = 0.0;  // generated tokens/s over the last few seconds
  // Tokens committed per verify round, bonus included (0 if none yet).
  double avg_spec_accept_length() const {
    return spec_verify_steps
               ? static_cast<double>(spec_accepted_tokens + spec_verify_steps) / spec_verify_steps
               : 0.0;
  }
};

class Engine {
 public:
  // group: under tensor parallelism, the model's ranks; this engine is rank 0 and sends each
  // step to the others, which run run_follower() (follower.h). Null: one device.
  Engine(std::shared_ptr<const Model> model, EngineOptions opts, ProcessGroup* group = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws InvalidArgument (nothing queued) for an empty prompt, token ids
  // outside the vocabulary, max_new_tokens < 1, or prompt + max_new_tokens beyond the context.
  std::shared_ptr<RequestStream> submit(Request r);
  // Finishes a request with FinishReason::kAbort and returns its pages; unknown ids are ignored.
  void abort(uint64_t id);
  // Drops every prefix-cache entry not in use; false if requests are running.
  bool flush_cache();
  // Calibration (bench-offline's warm-up passes): every decode step from now on runs `depth`
  // drafts (clamped to the deepest the engine was built for), not asked of the adaptive policy
  // but shown to it as measurements (SpecDepthPolicy::calibrate); -1 gives the choice back to the
  // policy, which first settles each batch class on what they measured. Only for a speculating
  // engine.
  void pin_depth(int64_t depth);

  EngineMetrics metrics() const;
  // Forward steps that built a graph (a new shape's eager warm-up or capture) instead of
  // replaying one, since start; 0 without graphs. Benchmarks check that a timed pass built none.
  uint64_t graph_builds() const;
  const EngineOptions& options() const;
  const ModelConfig& model_config() const;
  int64_t context_length() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem
