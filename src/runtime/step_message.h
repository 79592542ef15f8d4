// Tensor parallelism: rank 0 schedules, and before each step sends the other ranks its plan with
// the state of every sequence the step touches (tokens it reads, pages, lengths, sampling
// parameters and RNG state, speculative state). A message is self-contained: a follower rebuilds
// the sequences from it, runs the step (step_executor.h) and drops them, so no per-request state
// can drift between ranks. Every rank then computes the same tokens (the sharded model's logits
// are identical on all ranks), which is what keeps their KV caches in step.
#pragma once

#include <memory>
#include <vector>

#include "distributed/process_group.h"
#include "runtime/scheduler.h"

namespace tandem {

Bytes encode_step(const StepPlan& plan);
Bytes encode_stop();  // rank 0 is shutting down

// A step rebuilt on a follower: plan points into seqs.
struct ReceivedStep {
  bool stop = false;
  std::vector<std::unique_ptr<Sequence>> seqs;
  StepPlan plan;
};
// Throws Error on a malformed message.
ReceivedStep decode_step(const Bytes& b);

}  // namespace tandem
