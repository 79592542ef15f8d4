#include "runtime/output_processor.h"

#include <algorithm>

namespace tandem {

OutputProcessor::OutputProcessor(int64_t draft_steps) {
  m_.spec_accepted_per_position.assign(static_cast<size_t>(draft_steps), 0);
  if (draft_steps > 0) m_.spec_depth_steps.assign(static_cast<size_t>(draft_steps + 1), 0);
}

void OutputProcessor::commit(Sequence& s, const std::vector<int32_t>& toks) {
  const auto& stops = s.req.stop_token_ids;
  TokenConstraint* c = s.req.constraint.get();
  for (int32_t t : toks) {
    const bool stop = std::find(stops.begin(), stops.end(), t) != stops.end();
    // Masking makes every committed token one the constraint allows; a refusal means the
    // grammar allowed no token at all here (the mask was empty), which ends the request.
    if (c && !stop && !c->accept(t)) {
      s.pending.finish_reason = FinishReason::kError;
      s.pending.error =
          "constrained decoding: the grammar allows no token of the vocabulary at this point";
      s.finished = true;
      break;
    }
    s.tokens.push_back(t);
    s.generated += 1;
    s.pending.new_tokens.push_back(t);
    if (stop) {
      s.pending.matched_stop_token = t;
      s.pending.finish_reason = FinishReason::kStop;
      s.finished = true;
      break;
    }
    if (s.generated >= s.req.max_new_tokens) {
      s.pending.finish_reason = FinishReason::kLength;
      s.finished = true;
      break;
    }
    // Complete, nothing may follow, and no stop token to emit (ignore_eos): the output is done.
    if (c && c->is_terminated() && stops.empty()) {
      s.pending.finish_reason = FinishReason::kStop;
      s.finished = true;
      break;
    }
  }
  s.kv_len = std::min<int64_t>(s.kv_len, static_cast<int64_t>(s.tokens.size()) - 1);
}

void OutputProcessor::fill_totals(const Sequence& s, RequestOutput& o) {
  o.prompt_tokens = s.prompt_len;
  o.completion_tokens = s.generated;
  o.cached_tokens = s.cached_tokens;
  o.spec_verify_steps = s.spec_verify_steps;
  o.spec_accepted_drafts = s.spec_accepted;
  o.spec_draft_tokens = s.spec_drafted;
}

void OutputProcessor::send(Scheduler& sched) {
  int64_t produced = 0;
  std::vector<StreamImpl*> sent;
  sent.reserve(sched.running().size());
  auto send_one = [&](Sequence& s) {
    if (s.pending.new_tokens.empty() && !s.finished) return;
    produced += static_cast<int64_t>(s.pending.new_tokens.size());
    RequestOutput o = std::move(s.pending);
    s.pending = RequestOutput{};
    o.hidden_states = std::move(s.pending_hidden);
    s.pending_hidden.clear();
    fill_totals(s, o);
    o.finished = s.finished;
    s.stream->push(std::move(o), /*notify_later=*/true);
    sent.push_back(s.stream.get());
  };
  // Finished sequences give their pages back (to the prefix cache) before their last message.
  const std::vector<std::unique_ptr<Sequence>> done = sched.retire_finished();
  for (const auto& s : sched.running()) send_one(*s);
  for (const auto& s : done) send_one(*s);
  for (StreamImpl* s : sent) s->notify();
  std::lock_guard<std::mutex> g(mu_);
  for (const auto& s : done) {
    ++m_.requests_finished;
    m_.prompt_tokens_total += static_cast<uint64_t>(s->prompt_len);
    m_.cached_tokens_total += static_cast<uint64_t>(s->cached_tokens);
  }
  m_.generation_tokens_total += static_cast<uint64_t>(produced);
  recent_tokens_.emplace_back(Clock::now(), produced);
  recent_sum_ += produced;
}

void OutputProcessor::finish(Sequence& s, FinishReason why, const std::string& error) {
  RequestOutput o = std::move(s.pending);
  fill_totals(s, o);
  o.finished = true;
  o.finish_reason = why;
  o.error = error;
  s.finished = true;
  s.stream->push(std::move(o));
  std::lock_guard<std::mutex> g(mu_);
  ++m_.requests_finished;
}

void OutputProcessor::count_request() {
  std::lock_guard<std::mutex> g(mu_);
  ++m_.requests_total;
}

void OutputProcessor::count_step() {
  std::lock_guard<std::mutex> g(mu_);
  ++m_.forward_steps_total;
}

void OutputProcessor::count_graphed_prefill() {
  std::lock_guard<std::mutex> g(mu_);
  ++m_.graphed_prefill_steps;
}

void OutputProcessor::count_warm_up(int64_t forwards) {
  std::lock_guard<std::mutex> g(mu_);
  m_.warm_up_forwards += static_cast<uint64_t>(forwards);
}

void OutputProcessor::forget_warm_up_requests() {
  std::lock_guard<std::mutex> g(mu_);
  EngineMetrics fresh;
  fresh.spec_accepted_per_position.assign(m_.spec_accepted_per_position.size(), 0);
  fresh.spec_depth_steps.assign(m_.spec_depth_steps.size(), 0);
  fresh.warm_up_forwards = m_.warm_up_forwards + m_.forward_steps_total;
  m_ = std::move(fresh);
  recent_tokens_.clear();
  recent_sum_ = 0;
}

void OutputProcessor::count_round(int64_t draft_steps, int64_t accepted) {
  std::lock_guard<std::mutex> g(mu_);
  m_.spec_verify_steps += 1;
  m_.spec_draft_tokens += static_cast<uint64_t>(draft_steps);
  m_.spec_accepted_tokens += static_cast<uint64_t>(accepted);
  for (int64_t i = 0; i < accepted; ++i) m_.spec_accepted_per_position[i] += 1;
}

void OutputProcessor::count_depth(int64_t depth) {
  std::lock_guard<std::mutex> g(mu_);
  if (depth >= 0 && depth < static_cast<int64_t>(m_.spec_depth_steps.size()))
    m_.spec_depth_steps[static_cast<size_t>(depth)] += 1;
}

void OutputProcessor::count_draft_reads(int64_t prefill, int64_t catch_up) {
  if (prefill <= 0 && catch_up <= 0) return;
  std::lock_guard<std::mutex> g(mu_);
  m_.spec_draft_prefill_tokens += static_cast<uint64_t>(std::max<int64_t>(prefill, 0));
  m_.spec_draft_catch_up_tokens += static_cast<uint64_t>(std::max<int64_t>(catch_up, 0));
}

void OutputProcessor::add_phase_seconds(const std::array<double, 4>& seconds) {
  std::lock_guard<std::mutex> g(mu_);
  for (size_t i = 0; i < seconds.size(); ++i) m_.spec_phase_seconds[i] += seconds[i];
  ++m_.spec_profiled_rounds;
}

void OutputProcessor::add_loop_seconds(
    const std::array<double, static_cast<size_t>(LoopPhase::kCount)>& seconds, bool decode) {
  std::lock_guard<std::mutex> g(mu_);
  for (size_t i = 0; i < seconds.size(); ++i) m_.loop_phase_seconds[i] += seconds[i];
  if (!decode) return;
  for (size_t i = 0; i < seconds.size(); ++i) m_.decode_loop_phase_seconds[i] += seconds[i];
  ++m_.decode_loop_steps;
}

void OutputProcessor::publish(const Scheduler& sched) {
  std::lock_guard<std::mutex> g(mu_);
  m_.num_running = static_cast<int64_t>(sched.running().size());
  m_.num_waiting = sched.num_waiting();
  m_.kv_pages_total = sched.pages_total();
  m_.kv_pages_used = sched.pages_used();
  m_.kv_pages_cached = sched.pages_cached();
  m_.preemptions_total = sched.preemptions();
  const auto now = Clock::now();
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > std::chrono::seconds(5)) {
    recent_sum_ -= recent_tokens_.front().second;
    recent_tokens_.pop_front();
  }
  m_.last_gen_throughput = recent_tokens_.empty() ? 0.0 : static_cast<double>(recent_sum_) / 5.0;
}

EngineMetrics OutputProcessor::metrics() const {
  std::lock_guard<std::mutex> g(mu_);
  return m_;
}

}  // namespace tandem
