// Error checking for CUDA runtime calls and kernel launches.
#pragma once

#include <cuda_runtime.h>

#include "core/error.h"

#define TD_CUDA_CHECK(expr)                                                                    \
  do {                                                                                         \
    cudaError_t err_ = (expr);                                                                 \
    if (err_ != cudaSuccess)                                                                   \
      ::tandem::fail("CUDA error {} at {}:{}: {}", cudaGetErrorName(err_), __FILE__, __LINE__, \
                     cudaGetErrorString(err_));                                                \
  } while (0)

// After a launch: catches bad configurations immediately (asynchronous faults surface later).
#define TD_CUDA_LAUNCH_CHECK() TD_CUDA_CHECK(cudaGetLastError())
