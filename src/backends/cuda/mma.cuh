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

// Four 8x8 bf16 matrices: thread 8m + r gives the address of row r of matrix m, and register m
// of thread (g, c) gets row g, columns 2c and 2c + 1 of matrix m (a fragment register). One
// instruction where four 32-bit shared loads would do.
__device__ __forceinline__ void ldmatrix_x4(uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3,
                                            const bf16* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}

// The A fragment of rows [0, 16) x columns [k, k + 16) of a row-major bf16 tile with row stride
// ld (elements): matrices (rows 0-7, cols k), (rows 8-15, k), (0-7, k + 8), (8-15, k + 8).
__device__ __forceinline__ void ldmatrix_a(uint32_t& a0, uint32_t& a1, uint32_t& a2, uint32_t& a3,
                                           const bf16* tile, int ld, int k, int lane) {
  ldmatrix_x4(a0, a1, a2, a3,
              tile + ((lane & 7) + ((lane >> 3) & 1) * 8) * ld + k + (lane >> 4) * 8);
}

// Four 8x8 bf16 matrices, transposed: thread 8m + r gives the address of row r of matrix m.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3, const bf16* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}

// 2^x in one MUFU instruction (relative error ~2^-22, far below P's bf16 rounding); 2^-inf = 0.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One chunk of online softmax for the two rows a thread holds in NT m16n8 score tiles: s[nt][e]
// is key 8 nt + 2c + (e & 1) of row g (e < 2) or g + 8, in log2 units, -inf where masked; mloc
// the thread's own row maxima of this chunk. Reduces them over the quad, updates the running
// max and sum (m_run, l_run), turns s into the probabilities and gives each row's correction of
// the running output (2^(old max - new max)).
template <int NT>
__device__ __forceinline__ void online_softmax_chunk(float (&s)[NT][4], float (&mloc)[2],
                                                     float (&m_run)[2], float (&l_run)[2],
                                                     float (&corr)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 1));
    mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 2));
    const float m_new = fmaxf(m_run[r], mloc[r]);
    // exp2(-inf) = 0 takes care of masked keys and of the first chunk's correction (its running
    // state is zero); a row without any key so far (m_new = -inf) gets p = 0, not nan.
    const float m_use = m_new == -INFINITY ? 0.f : m_new;
    corr[r] = fast_exp2(m_run[r] - m_use);
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      s[nt][2 * r] = fast_exp2(s[nt][2 * r] - m_use);
      s[nt][2 * r + 1] = fast_exp2(s[nt][2 * r + 1] - m_use);
      sum += s[nt][2 * r] + s[nt][2 * r + 1];
    }
    m_run[r] = m_new;
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    l_run[r] = __fmaf_rn(l_run[r], corr[r], sum);  // one rounding, as the chain repeats it
  }
}

// Two floats as one bf16x2 fragment register (round to nearest).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 bytes global -> shared without a trip through registers, cached in L2 only (a block reads
// each row once). valid = false reads nothing and writes zeros (src-size 0); src is still a
// mapped address then, as a precaution.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t d = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Returns once at most N of this thread's most recent groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace tandem::cuda::k
