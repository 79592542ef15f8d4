#include "runtime/engine.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/thread_name.h"
#include "runtime/geometry.h"
#include "runtime/model_runner.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"
#include "runtime/sequence.h"
#include "runtime/spec_depth_policy.h"
#include "runtime/spec_depth_trace.h"
#include "runtime/spec_worker.h"
#include "runtime/step_executor.h"
#include "runtime/step_message.h"
#include "runtime/step_trace.h"

namespace tandem {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    default:
      return "";
  }
}

namespace {

EngineOptions validated(EngineOptions o, const Model& model) {
  o.validate();
  if (o.spec.enabled() && !model.has_mtp())
    throw InvalidArgument(
        "speculative decoding needs the checkpoint's MTP layer, which is not loaded");
  return o;
}

SpecDepthOptions depth_options(const SpeculativeOptions& o) {
  SpecDepthOptions d;
  d.max_depth = o.max_depth();
  d.initial_depth = o.num_steps;
  d.adaptive = o.adaptive;
  d.batch_fill = o.adaptive_batch_fill;
  d.accept_relax = o.adaptive_accept_relax;
  if (o.adaptive_catch_up_alpha > 0) d.catch_up_alpha = o.adaptive_catch_up_alpha;
  return d;
}

SchedulerOptions scheduler_options(const EngineOptions& o) {
  SchedulerOptions s;
  s.max_running_requests = o.max_running_requests;
  s.page_size = o.page_size;
  s.chunked_prefill_size = o.chunked_prefill_size;
  s.max_prefill_tokens = o.max_prefill_tokens;
  s.mixed_chunk = o.enable_mixed_chunk;  // validate() turned it off when speculating
  s.delay_factor = o.scheduler_delay_factor;
  s.enable_prefix_cache = o.enable_prefix_cache;
  s.draft_steps = o.spec.enabled() ? o.spec.max_depth() : 0;
  s.draft_catches_up = o.spec.enabled() && o.spec.adaptive;
  return s;
}

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  EngineOptions opt;
  ProcessGroup* group;  // the other ranks, or null
  EngineGeometry geo;   // draft steps per round (0: plain decoding), KV pages, longest request
  Scheduler sched;
  ModelRunner runner;
  OutputProcessor out;
  std::unique_ptr<SpecWorker> spec;
  StepExecutor exec;
  std::unique_ptr<SpecDepthPolicy> depth;  // the depth of each decode step, when speculating
  // What the policy was asked and shown, when TANDEM_SPEC_DEPTH_TRACE names a file.
  std::unique_ptr<SpecDepthTrace> depth_trace;

  // Messages from other threads.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> inbox;
  std::vector<uint64_t> aborts;
  std::vector<std::promise<bool>> flushes;
  bool stopping = false;
  uint64_t next_id = 1;  // under mu

  // Engine::pin_depth: every decode step's depth, not shown to the policy (-1: the policy's).
  std::atomic<int64_t> pinned_depth{-1};
  bool calibrating = false;  // the last decode step was pinned (the loop thread's own)

  // warm_up_decode: every decode step runs this depth (-1: off), with no policy to ask.
  int64_t warm_depth = -1;

  LoopClock clock;       // the engine thread's own
  StepTrace trace;       // one line per step when TANDEM_STEP_TRACE names a file
  bool decoded = false;  // this iteration of the loop ran a decode step
  std::thread thread;

  Impl(std::shared_ptr<const Model> mdl, EngineOptions o, ProcessGroup* g)
      : model(std::move(mdl)),
        opt(validated(std::move(o), *model)),
        group(g && g->world() > 1 ? g : nullptr),
        geo(engine_geometry(opt, model->config(), group)),
        sched(geo.num_pages, scheduler_options(opt)),
        runner(model, opt, geo.num_pages, geo.context_length, geo.draft_steps),
        out(geo.draft_steps),
        spec(geo.draft_steps > 0
                 ? std::make_unique<SpecWorker>(runner, out, opt.spec, opt.profile_spec_phases,
                                                opt.max_prefill_tokens)
                 : nullptr),
        exec(runner, out, spec.get()),
        depth(spec ? std::make_unique<SpecDepthPolicy>(depth_options(opt.spec)) : nullptr),
        depth_trace(spec ? std::make_unique<SpecDepthTrace>(depth_options(opt.spec)) : nullptr) {
    out.publish(sched);
    exec.set_clock(&clock);
    // Under tensor parallelism every follower runs the same forwards (run_follower).
    if (const int64_t tokens = opt.warm_up_tokens_for(model->device()); tokens > 0) {
      const auto t0 = std::chrono::steady_clock::now();
      const int64_t forwards = runner.warm_up(tokens, opt.max_running_requests);
      out.count_warm_up(forwards);
      const int64_t steps = warm_up_decode();
      log_info(
          "warm-up: {} forwards (prefill of up to {} tokens, up to {} sequences), {} steps of "
          "throwaway requests (every decode batch bucket{}) in {:.0f} ms",
          forwards, tokens, opt.max_running_requests, steps,
          spec ? (opt.spec.adaptive ? " at every depth" : " at the depth") : "",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    thread = std::thread([this] {
      name_this_thread("tandem-engine");
      device_interface(model->device().type).make_current(model->device());
      loop();
    });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> g(mu);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
    if (group && !fatal_seen) {
      try {
        Bytes stop = encode_stop();
        group->broadcast(stop);
      } catch (const std::exception& e) {
        log_warn("telling the other ranks to stop: {}", e.what());
      }
    }
  }

  // The ranks cannot continue together: stop everything (EngineOptions::on_fatal).
  void fatal(const std::string& why) {
    fatal_seen = true;
    if (group) group->abort(why);
    if (Collectives* c = model->collectives()) c->abort(why);
    if (opt.on_fatal) {
      opt.on_fatal(why);
      return;
    }
    log_error("tensor parallelism: {}; stopping the server", why);
    std::_Exit(1);
  }
  bool fatal_seen = false;
  ReplicatedConstraints replicated;  // which constraints the followers hold (step_message.h)

  // Before the loop thread starts: throwaway requests of a few tokens run through step() itself,
  // a batch of them at every decode batch bucket and, when speculating, at every depth the
  // engine may run (each pinned by warm_depth), so that every decode-shaped graph (decode,
  // verify, the draft's loop and extend) is built and captured here and not in a request's
  // step (a build costs 1-4 ms against a replay's few hundred microseconds on the shipped model).
  // Without a policy or trace (they see none of it), then the prefix cache flushed and every
  // count of these requests dropped. Under tensor parallelism the followers run these steps as
  // any other. Returns the steps run.
  int64_t warm_up_decode() {
    std::unique_ptr<SpecDepthPolicy> policy = std::move(depth);
    std::unique_ptr<SpecDepthTrace> policy_trace = std::move(depth_trace);
    std::vector<int64_t> depths = {0};
    if (spec) {
      depths.clear();
      for (int64_t d = opt.spec.adaptive ? 0 : geo.draft_steps; d <= geo.draft_steps; ++d)
        depths.push_back(d);
    }
    const int64_t V = model->config().vocab_size;
    // Prompt and answer lengths: at least three decode steps per batch at depth d, each
    // committing at most d + 1 tokens (the first runs a shape eagerly, the second captures it,
    // the third replays), within the context.
    const int64_t prompt_len = std::min<int64_t>(4, geo.context_length / 4);
    const auto answer_at = [&](int64_t d) {
      return std::min<int64_t>(1 + 3 * (d + 1),
                               geo.context_length - prompt_len - geo.draft_steps - 2);
    };
    Rng rng(0x6465636f);
    int64_t steps = 0;
    for (int64_t d : depths) {
      const int64_t answer = answer_at(d);
      if (prompt_len < 1 || answer < 1) break;
      warm_depth = spec ? d : -1;
      for (int64_t bucket : decode_batch_buckets(opt.max_running_requests)) {
        const int64_t n = std::min(bucket, opt.max_running_requests);
        for (int64_t i = 0; i < n; ++i) {
          Request r;
          for (int64_t t = 0; t < prompt_len; ++t)
            r.prompt.push_back(static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(V)));
          r.max_new_tokens = answer;
          std::unique_ptr<Sequence> seq = sequence_of(std::move(r));
          {
            std::lock_guard<std::mutex> g(mu);
            number(*seq);
          }
          sched.add(std::move(seq));
        }
        // Bounded: a batch ends within its answer's length in decode steps, prefill included.
        for (int64_t k = 0;
             k < 4 * answer + 64 && (sched.num_waiting() > 0 || !sched.running().empty()); ++k) {
          bool sent = false;
          trace.begin();
          step(sent);
          ++steps;
        }
        for (auto& s : sched.take_running()) out.finish(*s, FinishReason::kAbort, "warm-up");
        for (auto& s : sched.take_waiting()) out.finish(*s, FinishReason::kAbort, "warm-up");
      }
    }
    warm_depth = -1;
    sched.flush_prefix_cache();
    depth = std::move(policy);
    depth_trace = std::move(policy_trace);
    out.forget_warm_up_requests();
    out.publish(sched);
    clock.take();  // the warm-up's loop time is no one's
    return steps;
  }

  // ---------------------------------------------------------------- messages

  // A request's sequence before it has an id: its tokens are the prompt.
  static std::unique_ptr<Sequence> sequence_of(Request r) {
    auto s = std::make_unique<Sequence>();
    s->tokens = r.prompt;
    s->prompt_len = static_cast<int64_t>(r.prompt.size());
    s->req = std::move(r);
    s->arrival = std::chrono::steady_clock::now();
    return s;
  }
  // Under mu: the next id, the sampling stream (seeded from the id unless the request seeds its
  // own) and the output stream.
  void number(Sequence& s) {
    s.id = next_id++;
    const uint64_t seed = s.req.sampling.seed;
    s.rng = Rng(seed ^ (0x5851f42d4c957f2dull * s.id * (seed == 0)));
    s.stream = std::make_shared<StreamImpl>(s.id);
  }

  std::shared_ptr<RequestStream> submit(Request r) {
    const int64_t V = model->config().vocab_size;
    if (r.prompt.empty()) throw InvalidArgument("the prompt is empty");
    for (int32_t t : r.prompt)
      if (t < 0 || t >= V)
        throw InvalidArgument(fmt::format("token id {} is outside the vocabulary [0, {})", t, V));
    const int64_t P = static_cast<int64_t>(r.prompt.size());
    if (const std::string e = request_length_error(P, r.max_new_tokens, geo.context_length);
        !e.empty())
      throw InvalidArgument(e);
    if (r.sampling.temperature < 0) throw InvalidArgument("temperature must not be negative");
    if (!(r.sampling.top_p > 0 && r.sampling.top_p <= 1))
      throw InvalidArgument("top_p must be in (0, 1]");
    if (group && r.constraint && r.constraint->replica_spec().empty())
      throw InvalidArgument("this constraint cannot be copied to the other tensor-parallel ranks");
    std::unique_ptr<Sequence> s = sequence_of(std::move(r));
    std::shared_ptr<RequestStream> stream;
    {
      std::lock_guard<std::mutex> g(mu);
      // Waiting = not yet taken by the engine thread plus its waiting queue as of its last step.
      if (opt.max_queued_requests > 0 &&
          static_cast<int64_t>(inbox.size()) + out.metrics().num_waiting >= opt.max_queued_requests)
        throw Overloaded(fmt::format("the server is at capacity: {} requests are already waiting",
                                     opt.max_queued_requests));
      number(*s);
      stream = s->stream;
      inbox.push_back(std::move(s));
    }
    out.count_request();
    cv.notify_all();
    return stream;
  }

  void abort(uint64_t id) {
    {
      std::lock_guard<std::mutex> g(mu);
      aborts.push_back(id);
    }
    cv.notify_all();
  }

  bool flush() {
    std::future<bool> f;
    {
      std::lock_guard<std::mutex> g(mu);
      flushes.emplace_back();
      f = flushes.back().get_future();
    }
    cv.notify_all();
    return f.get();
  }

  // ---------------------------------------------------------------- the loop

  void loop() {
    for (;;) {
      std::vector<uint64_t> to_abort;
      std::vector<std::promise<bool>> to_flush;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_for(lk, std::chrono::milliseconds(20), [&] {
          return stopping || !inbox.empty() || !aborts.empty() || !flushes.empty() ||
                 sched.num_waiting() > 0 || !sched.running().empty();
        });
        clock.lap(LoopPhase::kWait);
        trace.begin();
        if (stopping) break;
        while (!inbox.empty()) {
          sched.add(std::move(inbox.front()));
          inbox.pop_front();
        }
        to_abort.swap(aborts);
        to_flush.swap(flushes);
      }
      if (group && !fatal_seen) {
        // A rank that died between steps is found here, not at the next request.
        try {
          group->check_peers();
          if (Collectives* c = model->collectives()) c->check();
        } catch (const std::exception& e) {
          fatal(e.what());
        }
      }
      if (fatal_seen) {
        for (auto& s : sched.take_running()) out.finish(*s, FinishReason::kError, "server failed");
        for (auto& s : sched.take_waiting()) out.finish(*s, FinishReason::kError, "server failed");
        continue;
      }
      // An abort arrives between steps, so the KV of the committed tokens is complete and worth
      // keeping (the server aborts requests that hit a stop string).
      for (uint64_t id : to_abort)
        if (auto s = sched.remove(id, /*keep_prefix=*/true))
          out.finish(*s, FinishReason::kAbort, "");
      for (auto& p : to_flush) {
        const bool idle = sched.flush_prefix_cache();
        out.publish(sched);  // callers read metrics right after the flush returns
        p.set_value(idle);
      }
      bool sent = false;  // the other ranks have this step
      decoded = false;
      try {
        step(sent);
      } catch (const std::exception& e) {
        if (sent) {
          // The other ranks ran (or are running) this step: they cannot be brought back in line.
          fatal(fmt::format("step failed after it was sent to the other ranks: {}", e.what()));
          continue;
        }
        // A failed forward must not take the server down: fail the requests it carried.
        log_error("engine step failed: {}", e.what());
        for (auto& s : sched.take_running()) out.finish(*s, FinishReason::kError, e.what());
      }
      out.publish(sched);
      clock.lap(LoopPhase::kPublish);
      out.add_loop_seconds(clock.take(), decoded);
    }
    for (auto& s : sched.take_running())
      out.finish(*s, FinishReason::kAbort, "server shutting down");
    for (auto& s : sched.take_waiting())
      out.finish(*s, FinishReason::kAbort, "server shutting down");
  }

  void step(bool& sent) {
    runner.begin_step();
    StepPlan plan = sched.plan();
    if (plan.kind == StepPlan::Kind::kIdle) {
      trace.flush();
      if (depth_trace) depth_trace->flush();
      return clock.lap(LoopPhase::kSchedule);
    }
    int64_t lag = 0;      // positions the draft must read before this step can speculate
    bool forced = false;  // pin_depth or depth_override replaced the policy's depth
    bool pinned = false;  // pin_depth did: a calibration step (SpecDepthPolicy::calibrate)
    if (depth && plan.kind == StepPlan::Kind::kDecode) {
      const int64_t B = static_cast<int64_t>(plan.decode.size());
      int64_t remaining = 0, max_remaining = 0;  // tokens the batch, and one sequence, may
      for (const Sequence* s : plan.decode) {    // still generate
        lag += s->draft_lag;
        const int64_t left = std::max<int64_t>(s->req.max_new_tokens - s->generated, 0);
        remaining += left;
        max_remaining = std::max(max_remaining, left);
      }
      // A pinned depth is not asked for; its steps calibrate the policy (Engine::pin_depth),
      // which settles on what they measured when the pin is lifted.
      if (const int64_t pin = pinned_depth.load(); pin >= 0) {
        plan.draft_steps = std::min(pin, geo.draft_steps);
        forced = pinned = calibrating = true;
      } else {
        if (calibrating) {
          calibrating = false;
          depth->settle();
          depth_trace->settle();
        }
        const int64_t chosen = depth->choose(B, lag, remaining, max_remaining);
        depth_trace->choose(B, lag, remaining, chosen, max_remaining);
        plan.draft_steps = chosen;
        if (opt.spec.depth_override) {
          plan.draft_steps =
              std::clamp<int64_t>(opt.spec.depth_override(B, chosen), 0, geo.draft_steps);
          forced = plan.draft_steps != chosen;
          if (forced) depth->overridden(B);
        }
      }
    }
    if (warm_depth >= 0 && plan.kind == StepPlan::Kind::kDecode) plan.draft_steps = warm_depth;
    // With a fixed depth the draft reads every prompt as it is prefilled. With adaptive depth
    // and --speculative-draft-reads-prompts, where the policy speculates at the batch size they
    // will decode in (the running set) and reading the whole prompts pays for itself (judged as
    // the catch-up of them would be, not chunk by chunk), so that their first round does not
    // stall the whole batch on a catch-up over them; by default not at all (their positions lag
    // and the catch-up before their first speculative round reads them).
    if (depth && plan.kind == StepPlan::Kind::kPrefill) {
      if (opt.spec.adaptive && !opt.spec.draft_reads_prompts) {
        plan.fill_draft = false;  // the prompts lag; a catch-up reads them (SpeculativeOptions)
      } else {
        int64_t positions = 0, remaining = 0;
        for (const ScheduledChunk& c : plan.prefill)
          positions += static_cast<int64_t>(c.seq->tokens.size());
        for (const auto& s : sched.running())
          remaining += std::max<int64_t>(s->req.max_new_tokens - s->generated, 0);
        plan.fill_draft = depth->worth_reading(static_cast<int64_t>(sched.running().size()),
                                               positions, remaining);
      }
    }
    if (group) {
      std::vector<uint64_t> running;
      for (const auto& s : sched.running()) running.push_back(s->id);
      Bytes msg = encode_step(plan, running, &replicated);
      sent = true;
      group->broadcast(msg);
    }
    clock.lap(LoopPhase::kSchedule);
    decoded = plan.kind == StepPlan::Kind::kDecode;
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t builds_before = runner.graph_builds();
    const SpecWorker::RoundStats stats = exec.run(plan);
    // The step ran a new shape eagerly or captured it (GPU graphs): its time is the build's.
    const bool built = runner.graph_builds() != builds_before;
    clock.lap(LoopPhase::kDevice);  // a plain decode step has charged its own phases
    if (spec) out.count_draft_reads(stats.prefill_draft_tokens, stats.catch_up_tokens);
    if (depth) {
      depth->observe_prompt_reads(stats.prefill_draft_seconds, stats.prefill_draft_tokens);
      depth_trace->prompt_reads(stats.prefill_draft_seconds, stats.prefill_draft_tokens);
    }
    if (depth && plan.kind == StepPlan::Kind::kDecode) {
      // Every decode step ends with its tokens on the host, so the host clock spans the device
      // work.
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      // A forced depth is not the policy's choice: its step would read as a probe the policy
      // never started. A pinned one is a measurement all the same (bench-offline's warm-up
      // passes pin every depth in turn): calibration.
      // A step that built a graph is no measurement of its depth either (a capture costs 1-4
      // ms on the shipped model, several times a replayed step): not shown, and a probe it
      // belonged to starts over, as for a forced depth.
      const int64_t B = static_cast<int64_t>(plan.decode.size());
      if (built && (pinned || !forced))
        depth->overridden(B);
      else if (pinned)
        depth->calibrate(plan.draft_steps, B, seconds, stats.accepted, stats.catch_up_seconds,
                         stats.catch_up_tokens);
      else if (!forced)
        depth->observe(plan.draft_steps, B, seconds, stats.accepted, stats.catch_up_seconds,
                       stats.catch_up_tokens);
      depth_trace->observe(plan.draft_steps, B, seconds, stats.catch_up_seconds,
                           stats.catch_up_tokens, stats.accepted,
                           built && (pinned || !forced) ? SpecDepthTrace::Step::kBuilt
                           : pinned                     ? SpecDepthTrace::Step::kPinned
                           : forced                     ? SpecDepthTrace::Step::kForced
                                                        : SpecDepthTrace::Step::kChosen);
      out.count_depth(plan.draft_steps);
      for (const std::string& c : depth->take_changes()) {
        log_info("{}", c);
        depth_trace->change(c);
      }
      clock.lap(LoopPhase::kSchedule);
    }
    if (depth)  // requests that ended in this step: the batch fill's tokens per request
      for (const auto& s : sched.running())
        if (s->finished) {
          depth->observe_finish(s->generated);
          depth_trace->finish(s->generated);
        }
    out.send(sched);
    clock.lap(LoopPhase::kSend);
    trace.end(plan, sched.num_waiting(), static_cast<int64_t>(sched.running().size()));
  }
};

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions opts, ProcessGroup* group)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(opts), group)) {}
Engine::~Engine() = default;
std::shared_ptr<RequestStream> Engine::submit(Request r) {
  return impl_->submit(std::move(r));
}
void Engine::abort(uint64_t id) {
  impl_->abort(id);
}
bool Engine::flush_cache() {
  return impl_->flush();
}
void Engine::pin_depth(int64_t depth) {
  TD_CHECK(depth < 0 || impl_->depth, "pin_depth({}): this engine does not speculate", depth);
  impl_->pinned_depth.store(depth < 0 ? -1 : depth);
}
EngineMetrics Engine::metrics() const {
  return impl_->out.metrics();
}
uint64_t Engine::graph_builds() const {
  return impl_->runner.graph_builds();
}
const EngineOptions& Engine::options() const {
  return impl_->opt;
}
const ModelConfig& Engine::model_config() const {
  return impl_->model->config();
}
int64_t Engine::context_length() const {
  return impl_->geo.context_length;
}

}  // namespace tandem
