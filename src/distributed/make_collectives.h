// The collectives for a model on device d: host-memory ones for the CPU backend, NCCL for CUDA.
#pragma once

#include <memory>

#include "core/device.h"
#include "distributed/process_group.h"
#include "ops/collectives.h"

namespace tandem {

// batch_invariant_bytes > 0 (deterministic mode): every all-reduce up to that many bytes (the
// largest a forward makes) takes the one path whose bits do not depend on the message size, the
// one-shot kernel (rank-order sums per element); NCCL's ring order depends on the size, so a
// token's result would depend on what else is batched with it. One host only (CUDA IPC).
std::unique_ptr<Collectives> make_collectives(ProcessGroup& group, Device d,
                                              size_t batch_invariant_bytes = 0);

}  // namespace tandem
