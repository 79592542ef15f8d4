#include "backends/init.h"

#include "backends/cpu/cpu_backend.h"
#include "ops/backend.h"

#ifdef TANDEM_WITH_CUDA
#include "backends/cuda/cuda_init.h"
#endif

namespace tandem {

bool init_backends() {
  register_backend(DeviceType::CPU, &cpu::cpu_backend());
#ifdef TANDEM_WITH_CUDA
  return cuda::init_cuda_backend();
#else
  return false;
#endif
}

}  // namespace tandem
