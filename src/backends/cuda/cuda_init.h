// Start-up of the CUDA backend (host-only header: no CUDA types).
#pragma once

namespace tandem::cuda {

// Registers the CUDA device interface and backend if a device is present; false otherwise.
bool init_cuda_backend(int device = 0);

}  // namespace tandem::cuda
