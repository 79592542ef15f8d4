// Registers the backends this build has. Call once at start-up (CLI, server, tests).
#pragma once

namespace tandem {

// Always registers the CPU backend; registers CUDA when built with it and a GPU is present.
// Returns true when CUDA is usable.
bool init_backends();

}  // namespace tandem
