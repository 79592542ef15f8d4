// Registers the backends this build has. Call once at start-up (CLI, server, tests).
#pragma once

namespace tandem {

// Always registers the CPU backend; registers CUDA when built with it and a GPU is present.
// Returns true when CUDA is usable. cuda_device: the GPU this process works on; the CUDA
// backend's streams, handles and buffers are created there (a process serving one rank of a
// multi-GPU model must not also open a context on GPU 0). Later calls change nothing.
bool init_backends(int cuda_device = 0);

}  // namespace tandem
