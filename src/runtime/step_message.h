// Tensor parallelism: rank 0 schedules, and before each step sends the other ranks its plan with
// the state of every sequence the step touches (tokens it reads, pages, lengths, sampling
// parameters and RNG state, the next draft token). A follower updates its copies of the
// sequences from it (FollowerSequences) and runs the step (step_executor.h). Every rank computes
// the same tokens (the sharded model's logits are identical on all ranks), which keeps their KV
// caches in step.
//
// Not sent: the draft's hidden state and top-k row (24 KB a sequence on GLM-5), which each
// follower computed itself in the step that produced them, and the tokens outside the window
// the step reads. The message lists the running sequences so that followers forget the others.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "distributed/process_group.h"
#include "runtime/scheduler.h"

namespace tandem {

class StepReader;

// Rank 0's record of which sequences' constraints the followers already hold: a constraint
// travels (as its replica spec, with the tokens it has accepted) in the first message that
// carries its sequence after the followers last forgot it, and is followed locally after that.
using ReplicatedConstraints = std::set<uint64_t>;

// running: the ids of every running sequence (followers keep state for these only).
// replicated: null when no request is constrained (tests); updated for the message.
Bytes encode_step(const StepPlan& plan, const std::vector<uint64_t>& running,
                  ReplicatedConstraints* replicated = nullptr);
Bytes encode_stop();  // rank 0 is shutting down

// A follower's sequences, kept between steps by id: each message updates the fields it carries
// (tokens only in the window the step reads; the vector keeps its length and storage, so a step
// costs the window, not the context), the draft state stays as this rank's own steps left it,
// and sequences rank 0 no longer runs are forgotten.
class FollowerSequences {
 public:
  // factory: builds this rank's copies of constrained requests' constraints; without one a
  // constrained sequence in a message is an error.
  explicit FollowerSequences(ConstraintFactory factory = {}) : factory_(std::move(factory)) {}
  struct Step {
    bool stop = false;
    StepPlan plan;  // points into this object's sequences
  };
  // Throws Error on a malformed message, or a speculative step for a sequence this rank has no
  // draft state for (it would draft other tokens than rank 0).
  Step apply(const Bytes& msg);
  size_t size() const { return seqs_.size(); }
  const Sequence* find(uint64_t id) const;

 private:
  Sequence* read_sequence(StepReader& r);

  ConstraintFactory factory_;
  std::map<uint64_t, std::unique_ptr<Sequence>> seqs_;
};

}  // namespace tandem
