#include "backends/cpu/cpu_backend.h"

namespace tandem::cpu {

CpuBackend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace tandem::cpu
