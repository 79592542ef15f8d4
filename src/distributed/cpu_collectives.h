// The CPU backend's collectives over any ProcessGroup: every rank receives every rank's f32
// buffer and adds them in rank order, so all ranks hold the same bits and the result does not
// depend on which rank computes it. Built for exactness and CI, not speed.
#pragma once

#include "distributed/process_group.h"
#include "ops/collectives.h"

namespace tandem {

class CpuCollectives final : public Collectives {
 public:
  explicit CpuCollectives(ProcessGroup& pg) : pg_(pg) {}
  int rank() const override { return pg_.rank(); }
  int world() const override { return pg_.world(); }
  void all_reduce_sum(Tensor& x) override;
  void all_gather_cols(Workspace& ws, const Tensor& in, Tensor& out) override;

 private:
  ProcessGroup& pg_;
};

}  // namespace tandem
