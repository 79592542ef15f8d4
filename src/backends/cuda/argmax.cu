// Argmax over f32 rows: blocks of kArgmaxChunk values, the row's last block picks the winner.
#include <algorithm>
#include <cfloat>

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

namespace {

// Argmax over a row in chunks of kArgmaxChunk values, one block per (chunk, row): a single block
// per row spent ~15 us walking 154880 logits with scalar loads, on the critical path of every
// decode and speculative phase. Each block writes its chunk's best (value, index) and the last
// block of the row to arrive (an arrival counter, reset by it) picks the row's best. The answer
// does not depend on the order: (value desc, index asc) is a total order on the candidates, NaN
// never wins, and a row without a value above -inf gives index 0, as on the CPU.
constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxPerThread = 16;  // four float4 per thread
constexpr int64_t kArgmaxChunk = int64_t{kArgmaxThreads} * kArgmaxPerThread;
constexpr int kArgmaxNone = 0x7fffffff;  // no candidate yet

__device__ __forceinline__ bool argmax_better(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

// The block's best (value, index) in thread 0 (warp shuffles, then the warps' results).
__device__ __forceinline__ void argmax_block(float& bv, int& bi, float* sv, int* si) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (argmax_better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (argmax_better(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
}

// grid (chunks, T). part_v / part_i: [T, chunks]; counters: [T], zero, left zero.
__global__ void argmax_kernel(const float* logits, int64_t ls, int64_t V, bool vec, float* part_v,
                              int* part_i, int* counters, int32_t* out) {
  pdl_wait();
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ bool last;
  const int64_t t = blockIdx.y, c0 = blockIdx.x * kArgmaxChunk;
  const float* row = logits + t * ls;
  float bv = -INFINITY;
  int bi = kArgmaxNone;
  if (vec) {  // four float4 per thread, all in flight; each thread's indices ascend
    float4 x[kArgmaxPerThread / 4];
#pragma unroll
    for (int k = 0; k < kArgmaxPerThread / 4; ++k) {
      const int64_t v = c0 + (int64_t{k} * kArgmaxThreads + threadIdx.x) * 4;
      x[k] = v < V ? *reinterpret_cast<const float4*>(row + v)
                   : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
#pragma unroll
    for (int k = 0; k < kArgmaxPerThread / 4; ++k) {
      const int v = static_cast<int>(c0 + (int64_t{k} * kArgmaxThreads + threadIdx.x) * 4);
      const float e[4] = {x[k].x, x[k].y, x[k].z, x[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (e[j] > bv) bv = e[j], bi = v + j;
    }
  } else {
    for (int64_t v = c0 + threadIdx.x; v < V && v < c0 + kArgmaxChunk; v += kArgmaxThreads) {
      const float x = row[v];
      if (x > bv) bv = x, bi = static_cast<int>(v);
    }
  }
  argmax_block(bv, bi, sv, si);
  const int chunks = static_cast<int>(gridDim.x);
  if (chunks == 1) {
    if (threadIdx.x == 0) out[t] = bi == kArgmaxNone ? 0 : bi;
    return;
  }
  if (threadIdx.x == 0) {
    part_v[t * chunks + blockIdx.x] = bv;
    part_i[t * chunks + blockIdx.x] = bi;
    __threadfence();
    last = atomicAdd(counters + t, 1) == chunks - 1;
    if (last) counters[t] = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  bv = -INFINITY, bi = kArgmaxNone;
  for (int c = threadIdx.x; c < chunks; c += kArgmaxThreads) {
    const float v = __ldcg(part_v + t * chunks + c);
    const int i = __ldcg(part_i + t * chunks + c);
    if (argmax_better(v, i, bv, bi)) bv = v, bi = i;
  }
  __syncthreads();  // sv / si are reused
  argmax_block(bv, bi, sv, si);
  if (threadIdx.x == 0) out[t] = bi == kArgmaxNone ? 0 : bi;
}

}  // namespace

int64_t argmax_chunks(int64_t V) {
  return (V + kArgmaxChunk - 1) / kArgmaxChunk;
}

void argmax(const float* logits, int64_t ls, int64_t T, int64_t V, float* part_v, int* part_i,
            int* counters, int32_t* out, cudaStream_t s) {
  if (T == 0) return;
  const bool vec = V % 4 == 0 && ls % 4 == 0 && (reinterpret_cast<uintptr_t>(logits) & 15) == 0;
  const dim3 g(static_cast<unsigned>(std::max<int64_t>(argmax_chunks(V), 1)),
               static_cast<unsigned>(T));
  launch(argmax_kernel, g, kArgmaxThreads, 0, s, logits, ls, V, vec, part_v, part_i, counters, out);
}

}  // namespace tandem::cuda::k
