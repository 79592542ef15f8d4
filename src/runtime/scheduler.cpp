#include "runtime/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

int64_t pages_for(int64_t tokens, int64_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

bool Scheduler::any_decoding() const {
  return std::any_of(running_.begin(), running_.end(), [](const auto& s) { return s->prefilled; });
}

Scheduler::Scheduler(int64_t num_pages, SchedulerOptions o)
    : opt_(o), pages_(num_pages), prefix_(pages_, o.page_size) {}

void Scheduler::add(std::unique_ptr<Sequence> s) {
  waiting_.push_back(std::move(s));
}

StepPlan Scheduler::plan(std::chrono::steady_clock::time_point now) {
  if (last_plan_prefill_)
    last_prefill_seconds_ = std::chrono::duration<double>(now - last_plan_).count();
  last_plan_ = now;
  last_plan_prefill_ = false;
  StepPlan p;
  const bool admit_waiting = !waiting_.empty() && admission_due(now);
  bool prefill_pending = admit_waiting;
  for (auto& s : running_) prefill_pending |= !s->prefilled;
  if (prefill_pending) {
    std::vector<ScheduledChunk> decoding;
    if (opt_.mixed_chunk) decoding = decode_chunks();
    const int64_t budget = opt_.max_prefill_tokens - static_cast<int64_t>(decoding.size());
    p.prefill = prefill_chunks(budget, admit_waiting);
    if (!p.prefill.empty()) {
      p.kind = StepPlan::Kind::kPrefill;
      p.prefill.insert(p.prefill.begin(), decoding.begin(), decoding.end());
      last_plan_prefill_ = true;
      return p;
    }
  }
  if (!any_decoding()) return p;
  grow_decode_pages(opt_.draft_steps + 1);  // a round writes x_L and S drafts
  p.kind = StepPlan::Kind::kDecode;
  p.draft_steps = opt_.draft_steps;
  for (auto& s : running_)
    if (s->prefilled) p.decode.push_back(s.get());
  return p;
}

// Whether the waiting queue may be admitted now under delay_factor (see SchedulerOptions). The
// front of the queue is its oldest request: requests join at the back, and preempted ones go to
// the front in reverse admission order, having been admitted before everything still waiting.
bool Scheduler::admission_due(std::chrono::steady_clock::time_point now) const {
  if (opt_.delay_factor <= 0) return true;
  if (!any_decoding()) return true;
  if (static_cast<int64_t>(running_.size() + waiting_.size()) >= opt_.max_running_requests)
    return true;  // no later arrival could join the step
  int64_t tokens = 0;
  for (const auto& s : waiting_) {
    tokens += static_cast<int64_t>(s->tokens.size());
    if (tokens >= opt_.max_prefill_tokens) return true;  // they fill a step already
  }
  const double waited = std::chrono::duration<double>(now - waiting_.front()->arrival).count();
  return waited >= opt_.delay_factor * last_prefill_seconds_;
}

// Unfinished prompts first (in admission order), then admissions from the waiting queue (when
// admit_waiting), each taking up to chunked_prefill_size tokens of the step's budget. While no
// sequence decodes, what is left of the budget then goes to the same chunks in the same order
// (see SchedulerOptions::chunked_prefill_size).
std::vector<ScheduledChunk> Scheduler::prefill_chunks(int64_t budget, bool admit_waiting) {
  std::vector<ScheduledChunk> batch;
  auto schedule = [&](Sequence& s) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    const int64_t len = std::min({n - s.kv_len, opt_.chunked_prefill_size, budget});
    if (len <= 0) return;
    batch.push_back({&s, s.kv_len, s.kv_len + len});
    budget -= len;
  };
  for (auto& s : running_)
    if (!s->prefilled && budget > 0) schedule(*s);
  while (admit_waiting && !waiting_.empty() && budget > 0 &&
         static_cast<int64_t>(running_.size()) < opt_.max_running_requests) {
    Sequence& s = *waiting_.front();
    if (!admit(s)) {
      if (running_.empty())
        fail("KV cache too small for a {}-token request ({} pages of {})", s.tokens.size(),
             pages_.num_pages(), opt_.page_size);
      break;
    }
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
    schedule(*running_.back());
  }
  if (!any_decoding())
    for (ScheduledChunk& c : batch) {
      const int64_t more = std::min(static_cast<int64_t>(c.seq->tokens.size()) - c.end, budget);
      c.end += more;
      budget -= more;
    }
  return batch;
}

// Mixed steps: each decoding sequence's last token as a one-token chunk [kv_len, kv_len + 1),
// after growing its pages for that token (which may preempt, as before a decode step).
std::vector<ScheduledChunk> Scheduler::decode_chunks() {
  TD_CHECK(opt_.draft_steps == 0, "mixed prefill and decode steps need plain decoding");
  if (!any_decoding()) return {};
  grow_decode_pages(1);
  std::vector<ScheduledChunk> out;
  for (auto& s : running_)
    if (s->prefilled) {
      TD_CHECK(static_cast<int64_t>(s->tokens.size()) == s->kv_len + 1,
               "a decoding sequence holds {} tokens and the KV of {}", s->tokens.size(), s->kv_len);
      out.push_back({s.get(), s->kv_len, s->kv_len + 1});
    }
  return out;
}

bool Scheduler::allocate(Sequence& s, int64_t tokens) {
  const int64_t need = pages_for(tokens, opt_.page_size) - static_cast<int64_t>(s.pages.size());
  if (need <= 0) return true;
  if (pages_.num_free() < need) prefix_.evict(need);
  return pages_.allocate(need, s.pages);
}

void Scheduler::release(Sequence& s, bool keep_prefix) {
  if (s.pages.empty()) return;
  // The draft's KV covers the positions it does not lag on (all of them unless adaptive depth).
  if (keep_prefix && opt_.enable_prefix_cache)
    prefix_.insert(s.tokens, s.kv_len, s.pages, s.kv_len - s.draft_lag);
  pages_.release(s.pages);
  s.pages.clear();
}

// Reuses the longest cached prefix, then takes pages for the whole prompt, its first token and
// a round's drafts; on failure takes nothing.
bool Scheduler::admit(Sequence& s) {
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  const int64_t S = opt_.draft_steps;
  if (s.pages.empty() && opt_.enable_prefix_cache) {
    int64_t draft_pages = 0;
    s.pages = prefix_.match(s.tokens, n - 1, &draft_pages);  // one token is always computed
    // Without the stash the draft cannot read a cached page that lacks its KV later: such pages
    // are computed again, the draft with them.
    if (S > 0 && !opt_.draft_catches_up && draft_pages < static_cast<int64_t>(s.pages.size())) {
      const std::vector<int32_t> rest(s.pages.begin() + draft_pages, s.pages.end());
      pages_.release(rest);
      s.pages.resize(static_cast<size_t>(draft_pages));
    }
    s.kv_len = static_cast<int64_t>(s.pages.size()) * opt_.page_size;
    // The draft's pair (h_i, x_{i+1}) at the last cached position needs h_i: recompute it.
    if (S > 0 && s.kv_len > 0) --s.kv_len;
    if (s.generated == 0) s.cached_tokens = s.kv_len;
    // Cached pages past the first without draft KV (their owner decoded plainly, adaptive depth
    // 0): the draft reads them from the stashed target states before it drafts again.
    if (opt_.draft_catches_up)
      s.draft_lag = s.kv_len - std::min(s.kv_len, draft_pages * opt_.page_size);
  }
  if (!allocate(s, n + 1 + S)) {
    pages_.release(s.pages);
    s.pages.clear();
    s.kv_len = 0;
    s.cached_tokens = 0;
    s.draft_lag = 0;
    return false;
  }
  return true;
}

// Makes every decoding sequence hold pages for kv_len + extra tokens, preempting the most
// recently admitted sequences when the cache is full.
void Scheduler::grow_decode_pages(int64_t extra) {
  for (;;) {
    int64_t need = 0;
    for (auto& s : running_)
      if (s->prefilled)
        need += std::max<int64_t>(0, pages_for(s->kv_len + extra, opt_.page_size) -
                                         static_cast<int64_t>(s->pages.size()));
    if (pages_.num_free() < need) prefix_.evict(need);
    if (pages_.num_free() >= need || running_.size() <= 1) break;
    preempt_last();
  }
  for (auto& s : running_)
    if (s->prefilled && !allocate(*s, s->kv_len + extra))
      fail("KV cache exhausted: {} tokens do not fit in {} pages of {}", s->kv_len + extra,
           pages_.num_pages(), opt_.page_size);
}

void Scheduler::preempt_last() {
  std::unique_ptr<Sequence> s = std::move(running_.back());
  running_.pop_back();
  release(*s, /*keep_prefix=*/true);
  // It restarts from its committed tokens; the prefix cache usually still holds them.
  s->kv_len = 0;
  s->prefilled = false;
  s->next_draft = -1;
  s->draft_lag = 0;  // the prefill redoes the draft's KV too
  waiting_.push_front(std::move(s));
  ++preemptions_;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::retire_finished() {
  std::vector<std::unique_ptr<Sequence>> done;
  for (auto& s : running_)
    if (s->finished) {
      release(*s, /*keep_prefix=*/true);
      done.push_back(std::move(s));
    }
  running_.erase(std::remove(running_.begin(), running_.end(), nullptr), running_.end());
  return done;
}

std::unique_ptr<Sequence> Scheduler::remove(uint64_t id, bool keep_prefix) {
  std::unique_ptr<Sequence> out;
  for (auto it = waiting_.begin(); it != waiting_.end() && !out; ++it)
    if ((*it)->id == id) {
      out = std::move(*it);
      waiting_.erase(it);
      break;
    }
  for (auto it = running_.begin(); it != running_.end() && !out; ++it)
    if ((*it)->id == id) {
      out = std::move(*it);
      running_.erase(it);
      break;
    }
  if (out) release(*out, keep_prefix);
  return out;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_running() {
  std::vector<std::unique_ptr<Sequence>> out;
  out.swap(running_);
  for (auto& s : out) release(*s, /*keep_prefix=*/false);
  return out;
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_waiting() {
  std::vector<std::unique_ptr<Sequence>> out;
  for (auto& s : waiting_) out.push_back(std::move(s));
  waiting_.clear();
  for (auto& s : out) release(*s, /*keep_prefix=*/false);
  return out;
}

bool Scheduler::flush_prefix_cache() {
  const bool idle = running_.empty() && waiting_.empty();
  if (idle) prefix_.clear();
  return idle;
}

}  // namespace tandem
