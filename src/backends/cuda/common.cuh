// Device helpers shared by the kernels: bf16 <-> f32, 16-byte vectors, warp and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/kernels.h"

namespace tandem::cuda::k {

using bf16 = __nv_bfloat16;

// Programmatic dependent launch (sm_90): every kernel is launched with
// cudaLaunchAttributeProgrammaticStreamSerialization, so its blocks may be scheduled while the
// previous kernel on the stream is still finishing, which hides the launch and ramp-up of the
// many short kernels of a decode step. In exchange every kernel calls pdl_wait() before it
// touches global memory: it returns once the previous grid has completed and its writes are
// visible (a no-op when the kernel was launched without the attribute). TANDEM_PDL=0 turns the
// attribute off.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

inline bool pdl_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TANDEM_PDL");
    if (v && std::strcmp(v, "0") == 0) return false;
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major >= 9;
  }();
  return on;
}

// kernel<<<grid, block, smem, stream>>>(args...) with programmatic stream serialization (above).
template <typename... P, typename... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            A&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = pdl_enabled() ? 1 : 0;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...);
}

// Lets Kernel launch with smem bytes of dynamic shared memory: above the default 48 KB a kernel
// must opt in (cudaFuncAttributeMaxDynamicSharedMemorySize). Done once per kernel and again
// only when a launch needs more than it was opted in to (not thread-safe, like the launches).
template <auto Kernel>
void opt_in_smem(size_t smem) {
  static size_t configured = 0;
  if (smem > 48 * 1024 && smem > configured) {
    cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
    configured = smem;
  }
}

__device__ __forceinline__ float to_f(float v) {
  return v;
}
__device__ __forceinline__ float to_f(bf16 v) {
  return __bfloat162float(v);
}
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float v) {
  return __float2bfloat16_rn(v);
}

// Eight bf16 values (one 16-byte load) as floats.
__device__ __forceinline__ void bf16x8_to_f(const uint4& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `red` is 32 floats of shared memory; the call contains barriers (all threads must reach it).
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = 0.f;
  for (int i = 0; i < nw; ++i) r += red[i];  // fixed order: the same result in every thread
  return r;
}

// K splits reduced by the last block to arrive: call after the block has written its partial
// sums. Counts the block's arrival on `counter` (one zeroed int per output tile; the last block
// zeroes it again for the next launch, which the stream orders after this one) and returns true,
// in every thread, in the one block that arrives last, which then sees every block's partials.
// Contains barriers (all threads must reach it).
__device__ __forceinline__ bool last_split_block(int* counter, int64_t splits) {
  __shared__ bool last;
  __threadfence();  // this block's partials are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1) == splits - 1;
    if (last) *counter = 0;
  }
  __syncthreads();
  const bool is_last = last;
  if (is_last) __threadfence();
  return is_last;
}

// The sum of `splits` partials `stride` apart, in split order from +0: the one expression every
// split-K reduction uses, so an output's bits do not depend on which block or kernel reduced it.
__device__ __forceinline__ float sum_split_partials(const float* part, int64_t splits,
                                                    int64_t stride) {
  float v = 0.f;
  for (int64_t sp = 0; sp < splits; ++sp) v += __ldcg(part + sp * stride);
  return v;
}

// Exclusive prefix sum of v over the block, in thread order; *total gets the block's sum.
// `red` is 32 ints of shared memory; contains barriers.
__device__ __forceinline__ int block_exclusive_scan(int v, int* red, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) red[warp] = x;
  __syncthreads();
  // Every warp scans the warp totals itself (shuffles, not a loop of dependent shared loads).
  const int r = lane < nw ? red[lane] : 0;
  int incl = r;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += y;
  }
  *total = __shfl_sync(0xffffffffu, incl, 31);
  return __shfl_sync(0xffffffffu, incl - r, warp) + x - v;
}

// Slot of position pos of sequence seq in the paged cache.
__device__ __forceinline__ int64_t paged_slot(const PagedMeta& m, int seq, int64_t pos) {
  return static_cast<int64_t>(m.page_table[seq * m.max_pages + pos / m.page_size]) * m.page_size +
         pos % m.page_size;
}

__host__ __device__ __forceinline__ int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

// The key-list entries [it0, it1) of one mla_decode split of a token at position pos and their
// number of chunks of `chunk` entries; the last split runs to the end of the token's list.
struct SplitRange {
  int64_t it0, it1;
  int nchunks;
};
__device__ __forceinline__ SplitRange split_range(const MlaDecodeParams& p, int64_t pos, int split,
                                                  int chunk) {
  const int64_t range = p.topk ? p.topk_k : pos + 1;
  SplitRange r;
  r.it0 = static_cast<int64_t>(split) * p.split_len;
  r.it1 = split == p.num_splits - 1 ? range : min64(range, r.it0 + p.split_len);
  r.nchunks = r.it1 > r.it0 ? static_cast<int>((r.it1 - r.it0 + chunk - 1) / chunk) : 0;
  return r;
}
__host__ __device__ __forceinline__ int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

inline unsigned cdiv(int64_t a, int64_t b) {
  return static_cast<unsigned>((a + b - 1) / b);
}

}  // namespace tandem::cuda::k
