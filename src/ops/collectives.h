// Collectives over the ranks that hold one model between them (tensor and expert parallelism),
// on the device that holds the tensors. The model calls them only where a sharded computation
// meets again: after row-parallel projections (all_reduce_sum) and after the vocab-parallel
// head (all_gather_cols). Implementations: distributed/cpu_collectives (host memory, any
// ProcessGroup) and distributed/nccl_collectives (NCCL on the CUDA backend's stream, so the calls
// are captured into CUDA graphs).
#pragma once

#include <functional>
#include <string>

#include "core/tensor.h"
#include "ops/workspace.h"

namespace tandem {

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // x = the sum of x over the ranks, in place. Every rank ends with the same bits.
  virtual void all_reduce_sum(Tensor& x) = 0;
  // in: [R, C] contiguous on every rank -> out: [R, world * C] contiguous, rank r's columns at
  // [r * C, (r + 1) * C). Scratch comes from ws (an arena keeps addresses stable for graphs).
  virtual void all_gather_cols(Workspace& ws, const Tensor& in, Tensor& out) = 0;

  // Failures that happen asynchronously (a collective that never completes inside a replayed
  // graph, a peer's abort): check() throws once one happened; on_failure is called from the
  // implementation's watchdog thread; abort(why) tears the collectives down so that nothing
  // waits forever. The host-memory implementation fails synchronously and needs none of it.
  virtual void check() const {}
  virtual void set_on_failure(std::function<void(const std::string& why)> cb) { (void)cb; }
  virtual void abort(const std::string& why) { (void)why; }
};

}  // namespace tandem
