// Tensor parallelism: rank 0 schedules, and before each step sends the other ranks its plan with
// the state of every sequence the step touches (tokens it reads, pages, lengths, sampling
// parameters and RNG state, the next draft token). A follower rebuilds the sequences from it,
// runs the step (step_executor.h) and drops them. Every rank computes the same tokens (the
// sharded model's logits are identical on all ranks), which keeps their KV caches in step.
//
// One exception to "self-contained": the draft's hidden state and top-k row (24 KB a sequence
// on GLM-5) are not sent. Each follower computed the same values in the step that produced them
// and keeps its own (DraftStates); the message lists the running sequences so that it can
// forget the others.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "runtime/scheduler.h"

namespace tandem {

// running: the ids of every running sequence (followers keep draft state for these only).
Bytes encode_step(const StepPlan& plan, const std::vector<uint64_t>& running);
Bytes encode_stop();  // rank 0 is shutting down

// A step rebuilt on a follower: plan points into seqs.
struct ReceivedStep {
  bool stop = false;
  std::vector<std::unique_ptr<Sequence>> seqs;
  StepPlan plan;
  std::vector<uint64_t> running;
};
// Throws Error on a malformed message.
ReceivedStep decode_step(const Bytes& b);

// A follower's copy of each running sequence's draft state, kept between steps.
class DraftStates {
 public:
  // Before the step: the draft state of every sequence that has one.
  void restore(ReceivedStep& step) const;
  // After it: what the step left, and forget sequences rank 0 no longer runs.
  void keep(ReceivedStep& step);
  size_t size() const { return states_.size(); }

 private:
  struct State {
    std::vector<float> hidden;  // [D]
    std::vector<int32_t> topk;  // [index_topk] or empty
  };
  std::map<uint64_t, State> states_;
};

}  // namespace tandem
