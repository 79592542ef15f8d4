// Pieces shared by the grouped expert GEMMs on warpgroup MMA (moe_wgmma.cu on bf16 weights,
// moe_wgmma_fp8.cu on FP8 blocks): the consumer warpgroups' barrier, and the epilogues that
// stage a tile's accumulators as [token][column] rows in the drained ring, then store them along
// each token's row in 16-byte vectors. A consumer thread's accumulator i is (weight row
// m_lane + 8 ((i / 2) % 2) of its warpgroup's 64-row half, token 8 (i / 4) + t_lane + i % 2),
// m_lane = 16 warp + lane / 4 and t_lane = 2 (lane % 4): the wgmma accumulator layout.
#pragma once

#include <cstdint>

#include "backends/cuda/common.cuh"
#include "backends/cuda/tma.cuh"

namespace tandem::cuda::k::grouped {

// The two consumer warpgroups (256 threads) meet: named barrier 1 (0 is __syncthreads).
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

// The ring's base in dynamic shared memory, rounded up to 1024 bytes (swizzled tiles start on
// 1024-byte boundaries; the kernels ask for 1024 bytes of slack).
__device__ __forceinline__ uint8_t* ring_base(uint8_t* smem) {
  return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem) + 1023) & ~uintptr_t{1023});
}

// Thread 0 sets up the ring's barriers: full[s] completes on the producer's arrival plus the
// stage's TMA bytes, empty[s] on one arrival from each consumer warp; then the block meets.
__device__ __forceinline__ void init_ring_barriers(uint64_t* full, uint64_t* empty, int stages,
                                                   int consumer_warps) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], consumer_warps);
    }
    mbar_init_fence();
  }
  __syncthreads();
}

// The producer thread's loop over nk K steps, ks of them a stage, in a ring of `stages` slots
// stage_bytes apart from base (each slot ks sub-slots of stage_bytes / ks): wait until the slot is
// free again (from the second pass on), announce its steps' copies on full[s] (`bytes` a step),
// then issue them back to back: load(sub-slot, &full[s], kb).
template <typename LoadStep>
__device__ __forceinline__ void produce(uint8_t* base, int stage_bytes, int stages, uint64_t* full,
                                        uint64_t* empty, int nk, int ks, uint32_t bytes,
                                        LoadStep&& load) {
  const int sub_bytes = stage_bytes / ks;
  int s = 0;
  uint32_t phase = 0;
  for (int kb0 = 0; kb0 < nk; kb0 += ks) {
    if (kb0 >= stages * ks) mbar_wait(&empty[s], phase ^ 1);
    const int n = min(ks, nk - kb0);
    mbar_arrive_expect_tx(&full[s], n * bytes);
    for (int j = 0; j < n; ++j) load(base + s * stage_bytes + j * sub_bytes, &full[s], kb0 + j);
    if (++s == stages) {
      s = 0;
      phase ^= 1;
    }
  }
}

// The copies every stage of both kernels holds, in this order from st: the two 64-row weight
// halves (rows w_row0 and w_row1 of w_map) and the tile's `chunks` 64-row token chunks (rows
// orow0, orow0 + 64, .. of x_map), each a kChunkBytes box at column k0, completing on bar.
template <int kChunkBytes>
__device__ __forceinline__ void load_weights_and_tokens(uint8_t* st, const CUtensorMap* w_map,
                                                        const CUtensorMap* x_map, uint64_t* bar,
                                                        int k0, int w_row0, int w_row1, int chunks,
                                                        int orow0) {
  tma_load_2d(st, w_map, bar, k0, w_row0);
  tma_load_2d(st + kChunkBytes, w_map, bar, k0, w_row1);
  for (int c = 0; c < chunks; ++c)
    tma_load_2d(st + (2 + c) * kChunkBytes, x_map, bar, k0, orow0 + 64 * c);
}

// gate_up: the tile's 128 weight rows are 64 gate rows (half 0) and their 64 up rows (half 1).
// Half 1 passes its accumulators through shared memory at `base`; half 0 writes
// h = silu(gate) * up (fp32 math) as TH into staged rows after 64 KB; then all 256 consumer
// threads store each of the `rows` tokens' columns [n0, n0 + 64) of h (rows out_rs apart;
// columns from n_out on never leave: n_out is a multiple of the vector's values).
template <int N, typename TH>
__device__ __forceinline__ void gate_up_epilogue(const float (&acc)[N / 2], int half, uint8_t* base,
                                                 int tid, int t_lane, int m_lane, int rows,
                                                 int64_t orow0, int64_t n0, int64_t n_out, TH* h,
                                                 int64_t out_rs) {
  constexpr int kVec = 16 / sizeof(TH);        // values per 16-byte store
  constexpr int kHs = 64 + kVec;               // per staged row: 16-byte aligned, banks staggered
  float* up = reinterpret_cast<float*>(base);  // [N / 2][128] up values
  TH* hs = reinterpret_cast<TH*>(base + 128 * 128 * 4);  // [N][kHs] after 64 KB
  if (half == 1) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) up[i * 128 + tid] = acc[i];
  }
  consumers_sync();
  if (half == 0) {
#pragma unroll
    for (int i = 0; i < N / 2; ++i) {
      const float g = acc[i], u = up[i * 128 + tid];
      const int t = 8 * (i / 4) + t_lane + i % 2, m = m_lane + 8 * ((i / 2) % 2);
      hs[t * kHs + m] = from_f<TH>(g / (1.0f + expf(-g)) * u);
    }
  }
  consumers_sync();
  constexpr int kPerRow = 64 / kVec;
  for (int v = static_cast<int>(threadIdx.x) - 128; v < rows * kPerRow; v += 256) {
    const int t = v / kPerRow, q = v % kPerRow;
    if (n0 + kVec * q < n_out)
      *reinterpret_cast<uint4*>(h + (orow0 + t) * out_rs + n0 + kVec * q) =
          *reinterpret_cast<const uint4*>(hs + t * kHs + kVec * q);
  }
}

// down: both halves stage their accumulators as fp32 [token][128 columns] rows at `base`, then
// the consumers store each of the `rows` tokens' columns [n0, n0 + 128) (before n_out, a
// multiple of 4) as TY: four columns a store (16 bytes of f32, 8 of bf16).
template <int N, typename TY>
__device__ __forceinline__ void down_epilogue(const float (&acc)[N / 2], int half, uint8_t* base,
                                              int t_lane, int m_lane, int rows, int64_t orow0,
                                              int64_t n0, int64_t n_out, TY* y, int64_t out_rs) {
  constexpr int kYs = 128 + 4;  // floats per staged row: banks staggered by 4 per token
  float* ys = reinterpret_cast<float*>(base);  // [N][kYs]
#pragma unroll
  for (int i = 0; i < N / 2; ++i) {
    const int t = 8 * (i / 4) + t_lane + i % 2, m = m_lane + 8 * ((i / 2) % 2);
    ys[t * kYs + 64 * half + m] = acc[i];
  }
  consumers_sync();
  for (int v = static_cast<int>(threadIdx.x) - 128; v < rows * 32; v += 256) {
    const int t = v / 32, q = v % 32;
    if (n0 + 4 * q < n_out) {
      const float4 o = *reinterpret_cast<const float4*>(ys + t * kYs + 4 * q);
      TY* at = y + (orow0 + t) * out_rs + n0 + 4 * q;
      if constexpr (sizeof(TY) == 4) {
        *reinterpret_cast<float4*>(at) = o;
      } else {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(o.x, o.y),
                             hi = __floats2bfloat162_rn(o.z, o.w);
        uint2 pk;
        pk.x = *reinterpret_cast<const uint32_t*>(&lo);
        pk.y = *reinterpret_cast<const uint32_t*>(&hi);
        *reinterpret_cast<uint2*>(at) = pk;
      }
    }
  }
}

}  // namespace tandem::cuda::k::grouped
