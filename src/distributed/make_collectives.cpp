#include "distributed/make_collectives.h"

#include "core/log.h"
#include "distributed/cpu_collectives.h"
#ifdef TANDEM_WITH_NCCL
#include "distributed/nccl_collectives.h"
#endif

namespace tandem {

std::unique_ptr<Collectives> make_collectives(ProcessGroup& group, Device d,
                                              size_t batch_invariant_bytes) {
  // The host-memory collectives add in rank order whatever the size: batch-invariant already.
  if (d.is_cpu()) return std::make_unique<CpuCollectives>(group);
#ifdef TANDEM_WITH_NCCL
  NcclOptions o;
  if (batch_invariant_bytes > 0) o.one_shot_max_bytes = batch_invariant_bytes;
  auto c = std::make_unique<NcclCollectives>(group, d, o);
  if (batch_invariant_bytes > 0 && group.world() > 1 && !c->one_shot_available())
    log_warn(
        "deterministic mode: the one-shot all-reduce is not available here (several hosts?); "
        "NCCL's sums depend on the batch, so outputs may too");
  return c;
#else
  (void)batch_invariant_bytes;
  fail("tensor parallelism on {} needs NCCL, and this build has no CUDA", d.str());
#endif
}

}  // namespace tandem
