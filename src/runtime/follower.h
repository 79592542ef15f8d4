// A tensor-parallel rank other than 0: builds the same model runner as rank 0's engine (same
// geometry, agreed with it), then runs every step rank 0 sends, in order, until rank 0 says stop.
// It has no scheduler and no requests of its own; its outputs are discarded (rank 0's are the
// same).
#pragma once

#include <memory>

#include "distributed/process_group.h"
#include "model/model.h"
#include "runtime/engine_options.h"
#include "runtime/token_constraint.h"

namespace tandem {

// Returns when rank 0 stops; throws PeerError when rank 0 goes away, or the step's error.
// constraints: builds this rank's copies of constrained requests' constraints (structured
// outputs); without it, rank 0 must not submit constrained requests.
void run_follower(std::shared_ptr<const Model> model, EngineOptions opt, ProcessGroup& group,
                  ConstraintFactory constraints = {});

}  // namespace tandem
