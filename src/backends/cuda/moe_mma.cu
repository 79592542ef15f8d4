// The grouped expert GEMMs of the graph path on the tensor cores (mma.sync m16n8k16, bf16 in,
// fp32 accumulate). At decode sizes an expert sees a handful of rows, so these are weight
// streams: the SIMT kernels of moe.cu spend ~30 instructions per 16 weight bytes converting
// and multiplying, and the register pressure of that limits the loads each SM keeps in flight.
// Here one mma takes 256 weights and 8 activation rows straight from the registers they were
// loaded into.
//
// A block owns 32 weight rows (two 16-row tiles) of one expert and up to 16 activation rows per
// pass. Its 8 warps split K into 64-wide chunks (warp w: chunks w, w + 8, ...) and their partial
// sums are added in warp order at the end, so every output is reduced in an order fixed by K
// alone: a row's result does not depend on how many other rows its expert has (batch-invariant).
//
// Prefill-sized experts (dozens to hundreds of rows) would stream the weights once per 16-row
// pass; a block may instead take G = 4 groups of 16 rows per pass, each group's activations
// multiplied with the same weight fragments: a quarter of the weight traffic. A row's products,
// K order and warp-order reduction are those of the one-group pass (each mma output row depends
// on its own activation row only), so the bits do not depend on G either.
//
// The K order inside a chunk is permuted so that each thread's fragments are two 16-byte loads
// per row: thread (g, c) loads elements [16c, 16c + 16) of weight rows g and g + 8 and of
// activation row g, and mma j of the chunk takes elements 16c + 4j .. 16c + 4j + 3 of each as
// its k = {2c, 2c + 1, 2c + 8, 2c + 9}. A and B agree on the permutation, so the dot product is
// the same sum in another order.
#include "backends/cuda/mma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunk = 64;     // K per chunk
constexpr int kPassRows = 16;  // activation rows per pass: two n-tiles of 8

// Weights are read once per pass: keep them out of L1.
__device__ __forceinline__ uint4 ld_stream(const bf16* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Word m (elements 2m, 2m + 1) of 16 elements held as two 16-byte vectors.
__device__ __forceinline__ uint32_t word(const uint4 (&v)[2], int m) {
  const uint4& h = v[m >> 2];
  const int i = m & 3;
  return i == 0 ? h.x : i == 1 ? h.y : i == 2 ? h.z : h.w;
}

// One chunk's fragments for one thread: weight rows g and g + 8 of both tiles, activation row g
// of both n-tiles.
struct Frag {
  uint4 w[2][2][2];  // [tile][row g, g + 8][two vectors]
  uint4 x[2][2];     // [n-tile][two vectors]
};

// Partial sums of one warp: [tile][n-tile][mma C fragment].
using Acc = float[2][2][4];

// Where this thread's weight rows are: row g of tile 0 at element 16c, and the element
// distances to tile 1 and to row g + 8.
struct WeightRows {
  const bf16* w;
  int64_t tile, row8;
};

__device__ __forceinline__ void load_w(Frag& f, const WeightRows& wr, int64_t k0) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const bf16* p = wr.w + t * wr.tile + r * wr.row8 + k0;
      f.w[t][r][0] = ld_stream(p);
      f.w[t][r][1] = ld_stream(p + 8);
    }
}

// x_rows[n]: activation row 8n + g at element 16c, null when that row does not exist (zeros).
__device__ __forceinline__ void load_x(uint4 (&x)[2][2], const bf16* const (&x_rows)[2], int64_t k0,
                                       int ntiles) {
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    if (n < ntiles && x_rows[n]) {
      x[n][0] = __ldg(reinterpret_cast<const uint4*>(x_rows[n] + k0));
      x[n][1] = __ldg(reinterpret_cast<const uint4*>(x_rows[n] + k0 + 8));
    } else {
      x[n][0] = x[n][1] = make_uint4(0, 0, 0, 0);
    }
  }
}
__device__ __forceinline__ void load_x(Frag& f, const bf16* const (&x_rows)[2], int64_t k0,
                                       int ntiles) {
  load_x(f.x, x_rows, k0, ntiles);
}

__device__ __forceinline__ void load_chunk(Frag& f, const WeightRows& wr,
                                           const bf16* const (&x_rows)[2], int64_t k0, int ntiles) {
  load_w(f, wr, k0);
  load_x(f, x_rows, k0, ntiles);
}

__device__ __forceinline__ void mma_chunk(Acc& acc, const uint4 (&w)[2][2][2],
                                          const uint4 (&x)[2][2], int ntiles) {
#pragma unroll
  for (int n = 0; n < 2; ++n) {
    if (n >= ntiles) break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t b0 = word(x[n], 2 * j), b1 = word(x[n], 2 * j + 1);
#pragma unroll
      for (int t = 0; t < 2; ++t)
        mma_bf16(acc[t][n], word(w[t][0], 2 * j), word(w[t][1], 2 * j), word(w[t][0], 2 * j + 1),
                 word(w[t][1], 2 * j + 1), b0, b1);
    }
  }
}
__device__ __forceinline__ void mma_chunk(Acc& acc, const Frag& f, int ntiles) {
  mma_chunk(acc, f.w, f.x, ntiles);
}

// This warp's share of one pass: acc[t][n] += W_t[16 rows, its chunks] . X[8n + 8 rows]^T, the
// next chunk's loads in flight while the current one multiplies. a_has_w: a already holds the
// weights of the warp's first chunk (issued before the token rows were looked up).
__device__ __forceinline__ void warp_pass(Acc& acc, Frag& a, bool a_has_w, const WeightRows& w_rows,
                                          const bf16* const (&x_rows)[2], int64_t K, int ntiles,
                                          int warp) {
  const int64_t nch = K / kChunk;
  Frag b;
  int64_t ch = warp;
  if (ch < nch) {
    if (!a_has_w) load_w(a, w_rows, ch * kChunk);
    load_x(a, x_rows, ch * kChunk, ntiles);
  }
  for (; ch < nch; ch += 2 * kWarps) {
    const bool more = ch + kWarps < nch;
    if (more) load_chunk(b, w_rows, x_rows, (ch + kWarps) * kChunk, ntiles);
    mma_chunk(acc, a, ntiles);
    if (!more) break;
    if (ch + 2 * kWarps < nch) load_chunk(a, w_rows, x_rows, (ch + 2 * kWarps) * kChunk, ntiles);
    mma_chunk(acc, b, ntiles);
  }
}

// The same over G groups of 16 rows sharing each chunk's weight fragments: the weights of the
// next chunk in flight while the current one multiplies every group; a group's activations are
// loaded (from L2: every block of the expert reads them) just before its mma.
template <int G>
__device__ __forceinline__ void warp_pass_groups(Acc (&acc)[G], Frag& a, bool a_has_w,
                                                 const WeightRows& w_rows,
                                                 const bf16* const (&x_rows)[G][2], int64_t K,
                                                 const int (&ntiles)[G], int warp) {
  const int64_t nch = K / kChunk;
  Frag b;
  const auto mma_groups = [&](const Frag& f, int64_t k0) {
    uint4 x[G][2][2];  // every group's activations first: their loads overlap
#pragma unroll
    for (int g = 0; g < G; ++g) load_x(x[g], x_rows[g], k0, ntiles[g]);
#pragma unroll
    for (int g = 0; g < G; ++g) mma_chunk(acc[g], f.w, x[g], ntiles[g]);
  };
  int64_t ch = warp;
  if (ch < nch && !a_has_w) load_w(a, w_rows, ch * kChunk);
  for (; ch < nch; ch += 2 * kWarps) {
    const bool more = ch + kWarps < nch;
    if (more) load_w(b, w_rows, (ch + kWarps) * kChunk);
    mma_groups(a, ch * kChunk);
    if (!more) break;
    if (ch + 2 * kWarps < nch) load_w(a, w_rows, (ch + 2 * kWarps) * kChunk);
    mma_groups(b, (ch + kWarps) * kChunk);
  }
}

// Writes this warp's partial sums to red [warps][tile][16 rows][16 cols] and waits for all.
__device__ __forceinline__ void stash(float* red, const Acc& acc, int warp, int lane) {
  const int g = lane >> 2, c = lane & 3;
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      float* r = red + (warp * 2 + t) * 256;
      const int col = 8 * n + 2 * c;
      r[g * 16 + col] = acc[t][n][0];
      r[g * 16 + col + 1] = acc[t][n][1];
      r[(g + 8) * 16 + col] = acc[t][n][2];
      r[(g + 8) * 16 + col + 1] = acc[t][n][3];
    }
  __syncthreads();
}

// Tile t's output (row, col) summed over the warps in warp order.
__device__ __forceinline__ float reduce(const float* red, int t, int row, int col) {
  float s = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) s += red[(w * 2 + t) * 256 + row * 16 + col];
  return s;
}

// The passes of one block over its expert's rows, shared by both kernels. The first chunk's
// weights go out before the expert's row count and rows are looked up (two more dependent
// loads): at one row per expert that wait is a visible part of a block's life. row(s): sorted
// row s's activations at element 16c; store(s, r, v0, v1): output row r of tiles 0 and 1 for
// sorted row s.
template <int G, typename RowFn, typename StoreFn>
__device__ __forceinline__ void expert_passes(float* red, const WeightRows& w_rows, int64_t K,
                                              int e, const int32_t* counts, const int32_t* offsets,
                                              RowFn row, StoreFn store) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2;
  Frag a;
  if (warp < K / kChunk) load_w(a, w_rows, warp * kChunk);
  const int n = counts[e], off = offsets[e];
  if constexpr (G > 1) {
    for (int m0 = 0; m0 < n; m0 += G * kPassRows) {
      const bf16* x_rows[G][2];
      int ntiles[G];
#pragma unroll
      for (int q = 0; q < G; ++q) {
        const int rows = max(0, min(kPassRows, n - m0 - q * kPassRows));
        ntiles[q] = (rows + 7) / 8;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int m = 8 * t + g;
          x_rows[q][t] = m < rows ? row(off + m0 + q * kPassRows + m) : nullptr;
        }
      }
      Acc acc[G] = {};
      warp_pass_groups<G>(acc, a, m0 == 0, w_rows, x_rows, K, ntiles, warp);
#pragma unroll
      for (int q = 0; q < G; ++q) {
        const int rows = min(kPassRows, n - m0 - q * kPassRows);
        if (rows <= 0) break;
        stash(red, acc[q], warp, lane);
        const int r = tid & 15, col = tid >> 4;
        if (col < rows)
          store(off + m0 + q * kPassRows + col, r, reduce(red, 0, r, col), reduce(red, 1, r, col));
        __syncthreads();
      }
    }
  } else {
    for (int m0 = 0; m0 < n; m0 += kPassRows) {
      const int rows = min(kPassRows, n - m0), ntiles = (rows + 7) / 8;
      const bf16* x_rows[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int m = 8 * t + g;
        x_rows[t] = m < rows ? row(off + m0 + m) : nullptr;
      }
      Acc acc = {};
      warp_pass(acc, a, m0 == 0, w_rows, x_rows, K, ntiles, warp);
      stash(red, acc, warp, lane);
      const int r = tid & 15, col = tid >> 4;  // 16 consecutive output rows per token row
      if (col < rows) store(off + m0 + col, r, reduce(red, 0, r, col), reduce(red, 1, r, col));
      __syncthreads();  // red is rewritten by the next pass
    }
  }
}

// grid (I / 16, max_active): tile 0 = gate rows [16 bx, 16 bx + 16), tile 1 = the same up rows;
// h[sorted, i] = silu(gate) * up. G row groups per pass (one block per SM with four).
template <int G>
__global__ void __launch_bounds__(kThreads, G == 1 ? 2 : 1)
    moe_gate_up_mma_kernel(const bf16* x, int64_t xs, int k, const bf16* gu, const int32_t* counts,
                           const int32_t* offsets, const int32_t* perm, const int32_t* active,
                           const int32_t* num_active, int64_t I, int64_t D, bf16* h) {
  pdl_wait();
  __shared__ float red[kWarps * 2 * 256];
  if (static_cast<int>(blockIdx.y) >= *num_active) return;  // uniform over the block
  const int e = active[blockIdx.y];
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * 16;
  const WeightRows w_rows{gu + (static_cast<int64_t>(e) * 2 * I + i0 + g) * D + 16 * c, I * D,
                          8 * D};
  expert_passes<G>(
      red, w_rows, D, e, counts, offsets,
      [&](int s) { return x + static_cast<int64_t>(perm[s] / k) * xs + 16 * c; },
      [&](int s, int r, float gv, float uv) {
        h[static_cast<int64_t>(s) * I + i0 + r] = from_f<bf16>(gv / (1.0f + expf(-gv)) * uv);
      });
}

// grid (D / 32, max_active): tiles = output rows [32 bx, 32 bx + 16) and [32 bx + 16, 32 bx + 32);
// y[sorted, d] = down_e[d] . h[sorted].
template <int G>
__global__ void __launch_bounds__(kThreads, G == 1 ? 2 : 1)
    moe_down_mma_kernel(const bf16* h, const bf16* down, const int32_t* counts,
                        const int32_t* offsets, const int32_t* active, const int32_t* num_active,
                        int64_t I, int64_t D, float* y) {
  pdl_wait();
  __shared__ float red[kWarps * 2 * 256];
  if (static_cast<int>(blockIdx.y) >= *num_active) return;
  const int e = active[blockIdx.y];
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
  const int64_t d0 = static_cast<int64_t>(blockIdx.x) * 32;
  const WeightRows w_rows{down + (static_cast<int64_t>(e) * D + d0 + g) * I + 16 * c, 16 * I,
                          8 * I};
  expert_passes<G>(
      red, w_rows, I, e, counts, offsets,
      [&](int s) { return h + static_cast<int64_t>(s) * I + 16 * c; },
      [&](int s, int r, float v0, float v1) {
        float* yr = y + static_cast<int64_t>(s) * D + d0;
        yr[r] = v0;
        yr[16 + r] = v1;
      });
}

}  // namespace

bool moe_mma_applies(int64_t I, int64_t D) {
  return I % kChunk == 0 && D % kChunk == 0;  // K of both GEMMs; also I % 16, D % 32
}

void moe_gate_up_mma(const void* x, int64_t xs, int64_t k, const void* gate_up,
                     const int32_t* counts, const int32_t* offsets, const int32_t* perm,
                     const int32_t* active, const int32_t* num_active, int64_t max_active,
                     int64_t I, int64_t D, void* h, int groups, cudaStream_t s) {
  if (max_active == 0) return;
  const dim3 g(static_cast<unsigned>(I / 16), static_cast<unsigned>(max_active));
  auto* kernel = groups == 4 ? moe_gate_up_mma_kernel<4> : moe_gate_up_mma_kernel<1>;
  launch(kernel, g, kThreads, 0, s, static_cast<const bf16*>(x), xs, static_cast<int>(k),
         static_cast<const bf16*>(gate_up), counts, offsets, perm, active, num_active, I, D,
         static_cast<bf16*>(h));
}

void moe_down_mma(const void* h, const void* down, const int32_t* counts, const int32_t* offsets,
                  const int32_t* active, const int32_t* num_active, int64_t max_active, int64_t I,
                  int64_t D, float* y, int groups, cudaStream_t s) {
  if (max_active == 0) return;
  const dim3 g(static_cast<unsigned>(D / 32), static_cast<unsigned>(max_active));
  auto* kernel = groups == 4 ? moe_down_mma_kernel<4> : moe_down_mma_kernel<1>;
  launch(kernel, g, kThreads, 0, s, static_cast<const bf16*>(h), static_cast<const bf16*>(down),
         counts, offsets, active, num_active, I, D, y);
}

}  // namespace tandem::cuda::k
