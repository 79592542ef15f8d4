#include "backends/init.h"

#include "backends/cpu/cpu_backend.h"
#include "ops/backend.h"

#ifdef TANDEM_WITH_CUDA
#include "backends/cuda/cuda_init.h"
#endif

namespace tandem {

bool init_backends(int cuda_device) {
  register_backend(DeviceType::CPU, &cpu::cpu_backend());
#ifdef TANDEM_WITH_CUDA
  return cuda::init_cuda_backend(cuda_device);
#else
  (void)cuda_device;
  return false;
#endif
}

}  // namespace tandem
