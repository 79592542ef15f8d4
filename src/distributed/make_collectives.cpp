#include "distributed/make_collectives.h"

#include "distributed/cpu_collectives.h"
#ifdef TANDEM_WITH_NCCL
#include "distributed/nccl_collectives.h"
#endif

namespace tandem {

std::unique_ptr<Collectives> make_collectives(ProcessGroup& group, Device d) {
  if (d.is_cpu()) return std::make_unique<CpuCollectives>(group);
#ifdef TANDEM_WITH_NCCL
  return std::make_unique<NcclCollectives>(group, d);
#else
  fail("tensor parallelism on {} needs NCCL, and this build has no CUDA", d.str());
#endif
}

}  // namespace tandem
