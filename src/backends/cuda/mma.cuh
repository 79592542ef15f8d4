// Tensor-core building blocks shared by the mma kernels (MLA attention, indexer scores, the
// batch-invariant GEMM). Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16".
#pragma once

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

// Two adjacent bf16 values as one 32-bit fragment register.
__device__ __forceinline__ uint32_t ld32(const bf16* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// d += A (16 x 16, row) . B (16 x 8, col): bf16 in, fp32 accumulate.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace tandem::cuda::k
