// Decides what the next step runs: which waiting requests are admitted against free KV pages,
// which prompt chunks are prefilled (chunked prefill under a token budget), which sequences
// decode, and whom to preempt when pages run out. Plain host data, no tensors and no device:
// tests/unit/scheduler_test.cpp drives it alone.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "runtime/page_allocator.h"
#include "runtime/prefix_cache.h"
#include "runtime/sequence.h"

namespace tandem {

// Prompt tokens [start, end) of one sequence, prefilled this step.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0, end = 0;
};

// One step's work. Prefill steps run chunks; decode steps run every prefilled sequence, each
// with its next token (and, when speculating, a round of draft_steps drafts). With mixed_chunk a
// prefill step's chunks also hold decoding sequences, each as the one-token chunk of its last
// token, which is sampled like the end of a prompt.
struct StepPlan {
  enum class Kind { kIdle, kPrefill, kDecode };
  Kind kind = Kind::kIdle;
  std::vector<ScheduledChunk> prefill;  // kPrefill: in batch order
  std::vector<Sequence*> decode;        // kDecode: in admission order
  int64_t draft_steps = 0;              // kDecode: S drafts per sequence (0: plain decoding)
  // kPrefill of an engine with the hidden-state stash (adaptive depth): the draft also reads the
  // chunks of sequences it has not fallen behind on, as a fixed-depth engine always does; false
  // leaves them to a catch-up at their first speculative round (SpecWorker::after_prefill).
  bool fill_draft = true;
};

struct SchedulerOptions {
  int64_t max_running_requests = 64;
  int64_t page_size = 16;
  // A prompt's chunk in a step: at most chunked_prefill_size tokens while any sequence decodes
  // (a prefill step holds every decoder for its whole length: small steps keep their TPOT);
  // while none does, the budget the other prompts leave too, up to max_prefill_tokens (nobody
  // waits on the step, and a long prompt alone takes 4x fewer steps at the defaults: on a MoE
  // model each step streams every expert's weights once).
  int64_t chunked_prefill_size = 512;
  int64_t max_prefill_tokens = 2048;  // prefill token budget of one step
  // Prefill steps carry every decoding sequence's next token too (one token of the budget each;
  // plain decoding only).
  bool mixed_chunk = false;
  bool enable_prefix_cache = true;
  int64_t draft_steps = 0;        // S when speculating: a round writes S + 1 positions
  bool draft_catches_up = false;  // adaptive depth: the draft reads stashed positions later
  // vLLM's --scheduler-delay-factor. While sequences decode, a waiting request is admitted only
  // once the oldest waiting one has waited delay_factor times the last prefill step's duration,
  // or once the waiting prompts would fill a step's prefill budget or the running set; with
  // nothing decoding, at once. Requests arriving a few hundred microseconds apart then share one
  // prefill step instead of each stalling every decoder with a step of its own. 0: no delay.
  double delay_factor = 0;
};

class Scheduler {
 public:
  Scheduler(int64_t num_pages, SchedulerOptions o);

  void add(std::unique_ptr<Sequence> s);  // joins the back of the waiting queue
  // The next step. Prefill comes first while any prompt is unfinished and a chunk can be
  // scheduled (with mixed_chunk, the decoding sequences' tokens first); otherwise every
  // prefilled sequence decodes, after growing its pages for the step and preempting the most
  // recently admitted sequences (back to the front of the waiting queue) while the cache is
  // short. Throws when a request can never fit. `now` times the prefill steps and the waiting
  // requests for delay_factor.
  StepPlan plan(std::chrono::steady_clock::time_point now);
  StepPlan plan() { return plan(std::chrono::steady_clock::now()); }
  // Removes finished sequences from the running set, oldest first, returning their pages (the
  // prefix cache keeps their full computed pages).
  std::vector<std::unique_ptr<Sequence>> retire_finished();
  // Removes a sequence, waiting or running (nullptr if neither); its pages are released, and
  // kept in the prefix cache when keep_prefix (its committed tokens' KV is complete).
  std::unique_ptr<Sequence> remove(uint64_t id, bool keep_prefix);
  // Every running (then every waiting) sequence, pages released: a failed step, shutdown.
  std::vector<std::unique_ptr<Sequence>> take_running();
  std::vector<std::unique_ptr<Sequence>> take_waiting();
  // Drops the prefix cache when nothing runs or waits; false otherwise.
  bool flush_prefix_cache();

  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t pages_total() const { return pages_.num_pages(); }
  int64_t pages_used() const { return pages_.num_pages() - pages_.num_free(); }
  int64_t pages_cached() const { return prefix_.evictable(); }
  uint64_t preemptions() const { return preemptions_; }

 private:
  bool allocate(Sequence& s, int64_t tokens);
  void release(Sequence& s, bool keep_prefix);
  bool admit(Sequence& s);
  std::vector<ScheduledChunk> prefill_chunks(int64_t budget, bool admit_waiting);
  bool admission_due(std::chrono::steady_clock::time_point now) const;
  bool any_decoding() const;  // some running sequence has finished its prompt
  std::vector<ScheduledChunk> decode_chunks();
  void grow_decode_pages(int64_t extra);
  void preempt_last();

  SchedulerOptions opt_;
  PageAllocator pages_;
  PrefixCache prefix_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  uint64_t preemptions_ = 0;
  // delay_factor's clock: when the last plan was made, whether it was a prefill step, and how
  // long the last prefill step took (from its plan to the next).
  std::chrono::steady_clock::time_point last_plan_{};
  bool last_plan_prefill_ = false;
  double last_prefill_seconds_ = 0;
};

int64_t pages_for(int64_t tokens, int64_t page_size);

}  // namespace tandem
