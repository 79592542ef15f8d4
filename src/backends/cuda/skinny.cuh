// The inner loop of the skinny GEMM kernels (linear and head_matmul at small M, the MoE experts):
// a warp streams RW weight rows with 16-byte loads, U steps in flight, and multiplies them with
// up to MT activation rows staged in shared memory. fp32 accumulation, one partial sum per lane;
// the caller reduces across the warp.
#pragma once

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

constexpr int kSkinnyThreads = 256;          // 8 warps
constexpr int kSkinnySmemBytes = 48 * 1024;  // staged activations
constexpr int kSkinnyUnroll = 4;             // weight loads in flight per row

template <typename TW>
struct WeightVec;
template <>
struct WeightVec<bf16> {
  static constexpr int kElems = 8;
  using Raw = uint4;
  __device__ __forceinline__ static void to_f(const Raw& r, float* f) { bf16x8_to_f(r, f); }
};
template <>
struct WeightVec<float> {
  static constexpr int kElems = 4;
  using Raw = float4;
  __device__ __forceinline__ static void to_f(const Raw& r, float* f) {
    f[0] = r.x, f[1] = r.y, f[2] = r.z, f[3] = r.w;
  }
};

// Activations for kElems weights: 8 bf16 (uint4) or 4 bf16 (uint2) from shared memory.
template <int N>
__device__ __forceinline__ void load_x(const bf16* p, float* f);
template <>
__device__ __forceinline__ void load_x<8>(const bf16* p, float* f) {
  bf16x8_to_f(*reinterpret_cast<const uint4*>(p), f);
}
template <>
__device__ __forceinline__ void load_x<4>(const bf16* p, float* f) {
  const uint2 v = *reinterpret_cast<const uint2*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
  const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y;
}

// Largest K chunk (a multiple of the warp step) whose MT rows fit the staging buffer.
template <typename TW, int MT>
constexpr int skinny_chunk() {
  constexpr int step = 32 * WeightVec<TW>::kElems;
  return (kSkinnySmemBytes / (MT * 2)) / step * step;
}

// acc[r][m] += sum over k in [0, kcl) of w_r[k] * xs[m * KC + k], lanes striding the k range.
// w[r] points at row r's element kc0 (the chunk start); ok[r] = row exists.
template <typename TW, int MT, int RW>
__device__ __forceinline__ void skinny_chunk_dot(const TW* const (&w)[RW], const bool (&ok)[RW],
                                                 const bf16* xs, int KC, int mt, int kcl, int lane,
                                                 float (&acc)[RW][MT]) {
  using V = WeightVec<TW>;
  constexpr int E = V::kElems, STEP = 32 * E, U = kSkinnyUnroll;
  for (int k = lane * E; k < kcl; k += STEP * U) {
    typename V::Raw raw[U][RW];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int r = 0; r < RW; ++r) {
        const int kk = k + u * STEP;
        if (kk < kcl && ok[r])
          raw[u][r] = __ldg(reinterpret_cast<const typename V::Raw*>(w[r] + kk));
        else
          raw[u][r] = typename V::Raw{};
      }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kk = k + u * STEP;
      if (kk >= kcl) break;
      float wf[RW][E];
#pragma unroll
      for (int r = 0; r < RW; ++r) V::to_f(raw[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m >= mt) break;
        float xf[E];
        load_x<E>(xs + m * KC + kk, xf);
#pragma unroll
        for (int r = 0; r < RW; ++r)
#pragma unroll
          for (int e = 0; e < E; ++e) acc[r][m] = fmaf(wf[r][e], xf[e], acc[r][m]);
      }
    }
  }
}

// Stages rows [0, mt) x [kc0, kc0 + kcl) of the activations into xs (16-byte copies; rows, kc0
// and kcl are multiples of 8 elements). row(m) gives row m's first element. Barriers around.
template <typename RowFn>
__device__ __forceinline__ void stage_x(bf16* xs, int KC, int mt, int64_t kc0, int kcl, RowFn row) {
  __syncthreads();  // the previous chunk is no longer read
  const int vpr = kcl / 8;
  for (int i = threadIdx.x; i < mt * vpr; i += blockDim.x) {
    const int m = i / vpr, v = i - m * vpr;
    *reinterpret_cast<uint4*>(xs + m * KC + v * 8) =
        *reinterpret_cast<const uint4*>(row(m) + kc0 + v * 8);
  }
  __syncthreads();
}

}  // namespace tandem::cuda::k
