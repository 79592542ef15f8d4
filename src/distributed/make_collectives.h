// The collectives for a model on device d: host-memory ones for the CPU backend, NCCL for CUDA.
#pragma once

#include <memory>

#include "core/device.h"
#include "distributed/process_group.h"
#include "ops/collectives.h"

namespace tandem {

std::unique_ptr<Collectives> make_collectives(ProcessGroup& group, Device d);

}  // namespace tandem
