// MoE on the GPU: sigmoid routing, grouping of (token, slot) pairs by expert, the grouped expert
// SwiGLU (each active expert's weights streamed once per 8 of its rows), and the weighted
// combine. Every step runs on the device without host synchronization (graph-capturable); the
// backend adds a cuBLASLt path for prefill-sized batches.
#include <cfloat>

#include "backends/cuda/elementwise.cuh"
#include "backends/cuda/skinny.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kMoeMT = 8;  // activation rows per pass over an expert's weights

// One block per token. Mirrors CpuBackend::moe_route step by step (same fp32 expressions, same
// tie-breaking: groups by stable order of score, experts by value then lower index).
__global__ void moe_route_kernel(const float* logits, int64_t ls, const float* bias, int E, int k,
                                 int n_group, int topk_group, bool normalize, float scaling,
                                 int local_first, int local_count, int32_t* idx, float* wout) {
  pdl_wait();
  extern __shared__ float sm[];
  float* s = sm;                                          // [E] sigmoid scores
  float* choice = s + E;                                  // [E] selection scores
  float* gscore = choice + E;                             // [n_group]
  int* taken = reinterpret_cast<int*>(gscore + n_group);  // [E]
  int* gkeep = taken + E;                                 // [n_group]
  int* sel = gkeep + n_group;                             // [k]
  __shared__ float rv[32];
  __shared__ int ri[32];
  const int64_t t = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
  for (int e = tid; e < E; e += blockDim.x) {
    const float l = logits[t * ls + e];
    s[e] = 1.0f / (1.0f + expf(-l));
    choice[e] = s[e] + (bias ? bias[e] : 0.0f);
    taken[e] = 0;
  }
  __syncthreads();
  if (n_group > 1) {
    const int per = E / n_group;
    for (int g = tid; g < n_group; g += blockDim.x) {
      float a = -INFINITY, b = -INFINITY;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        if (choice[e] > a)
          b = a, a = choice[e];
        else if (choice[e] > b)
          b = choice[e];
      }
      gscore[g] = a + b;
      gkeep[g] = 0;
    }
    __syncthreads();
    if (tid == 0)
      for (int r = 0; r < topk_group; ++r) {
        int best = -1;
        for (int g = 0; g < n_group; ++g)
          if (!gkeep[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
        if (best >= 0) gkeep[best] = 1;
      }
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x)
      if (!gkeep[e / per]) choice[e] = -INFINITY;
    __syncthreads();
  }
  auto better = [](float va, int ia, float vb, int ib) {
    return ib < 0 || (ia >= 0 && (va > vb || (va == vb && ia < ib)));
  };
  for (int j = 0; j < k; ++j) {
    float bv = -INFINITY;
    int bi = -1;
    for (int e = tid; e < E; e += blockDim.x)
      if (!taken[e] && better(choice[e], e, bv, bi)) bv = choice[e], bi = e;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    if (lane == 0) rv[warp] = bv, ri[warp] = bi;
    __syncthreads();
    if (tid == 0) {
      for (int w = 1; w < nw; ++w)
        if (better(rv[w], ri[w], bv, bi)) bv = rv[w], bi = ri[w];
      sel[j] = bi;
      if (bi >= 0) taken[bi] = 1;
    }
    __syncthreads();
  }
  if (tid == 0) {
    float sum = 0.f;
    for (int j = 0; j < k; ++j) sum += s[sel[j]];
    const float norm = normalize ? 1.0f / (sum + 1e-20f) : 1.0f;
    for (int j = 0; j < k; ++j) {
      const int e = sel[j];
      idx[t * k + j] = local_count < 0                                     ? e
                       : e >= local_first && e < local_first + local_count ? e - local_first
                                                                           : -1;
      wout[t * k + j] = s[sel[j]] * norm * scaling;
    }
  }
}

// One block of kPrepThreads, dynamic smem 2E ints + 32E bytes. Counting sort of pairs by
// expert, stable (pair order within an expert). Counts and offsets stay in shared memory and the
// offsets come from a block scan (thread t owns a run of consecutive experts): one thread walking
// all E experts through global memory took 15 us of a 440 us MoE layer at batch 1. The pairs are
// then placed a tile of kPrepThreads at a time: a pair's place is its expert's running offset,
// plus the pairs of that expert in earlier warps of the tile (per-warp counts in shared memory),
// plus its rank among its warp's lanes of the same expert (__match_any_sync). Each thread
// scanning every pair for its expert took 2.2 ms at a 4,096-token prefill (32,768 pairs).
constexpr int kPrepThreads = 1024;
constexpr int kPrepWarps = kPrepThreads / 32;
// The most bytes of x rows moe_prepare copies into expert order itself (four 16-byte copies a
// thread): above it a kernel of one block per row (moe_gather_x) is faster than one block's
// loop, below it the extra launch costs more than the copy.
constexpr int64_t kPrepGatherMaxBytes = int64_t{64} << 10;

__global__ void __launch_bounds__(kPrepThreads)
    moe_prepare_kernel(const int32_t* idx, int P, int E, int32_t* counts, int32_t* offsets,
                       int32_t* perm, int32_t* inv, int32_t* active, int32_t* num_active,
                       MoePrepareFused f) {
  pdl_wait();
  extern __shared__ int prep_sm[];
  int* cnt = prep_sm;                                           // [E]
  int* off = prep_sm + E;                                       // [E] running offsets
  uint8_t* wcnt = reinterpret_cast<uint8_t*>(prep_sm + 2 * E);  // [kPrepWarps][E] per-tile
  __shared__ int red[32];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int e = tid; e < E; e += kPrepThreads) cnt[e] = 0;
  for (int i = tid; i < kPrepWarps * E; i += kPrepThreads) wcnt[i] = 0;
  __syncthreads();
  for (int p = tid; p < P; p += kPrepThreads) {
    const int e = idx[p];
    if (e >= 0 && e < E)
      atomicAdd(&cnt[e], 1);
    else
      inv[p] = -1;
  }
  __syncthreads();
  const int per = (E + kPrepThreads - 1) / kPrepThreads, e0 = min(E, tid * per),
            e1 = min(E, e0 + per);
  int rows = 0, used = 0;
  for (int e = e0; e < e1; ++e) rows += cnt[e], used += cnt[e] > 0;
  int total_rows = 0, total_used = 0;
  int base = block_exclusive_scan(rows, red, &total_rows);
  int abase = block_exclusive_scan(used, red, &total_used);
  for (int e = e0; e < e1; ++e) {
    counts[e] = cnt[e];
    offsets[e] = off[e] = base;
    base += cnt[e];
    if (cnt[e] > 0) active[abase++] = e;
  }
  if (tid == 0) {
    offsets[E] = total_rows;
    *num_active = total_used;
  }
  if (f.tile_rows > 0) {  // moe_tiles_kernel's list: (e, 0), (e, tile_rows), ... per expert
    int tiles = 0;
    for (int e = e0; e < e1; ++e) tiles += (cnt[e] + f.tile_rows - 1) / f.tile_rows;
    int total_tiles = 0;
    int t = block_exclusive_scan(tiles, red, &total_tiles);
    for (int e = e0; e < e1; ++e)
      for (int r = 0; r < cnt[e]; r += f.tile_rows) f.tiles[t++] = make_int2(e, r);
    if (tid == 0) *f.num_tiles = total_tiles;
  }
  __syncthreads();
  const unsigned lanes_below = (1u << lane) - 1u;
  for (int p0 = 0; p0 < P; p0 += kPrepThreads) {  // block-uniform
    const int p = p0 + tid;
    const int e = p < P ? idx[p] : -1;
    const bool valid = e >= 0 && e < E;
    const unsigned peers = __match_any_sync(0xffffffffu, valid ? e : -1);
    const int rank = __popc(peers & lanes_below);
    if (valid && rank == 0) wcnt[warp * E + e] = static_cast<uint8_t>(__popc(peers));
    __syncthreads();
    if (valid) {
      int o = off[e] + rank;
      for (int w = 0; w < warp; ++w) o += wcnt[w * E + e];
      perm[o] = p;
      inv[p] = o;
    }
    __syncthreads();
    for (int x = tid; x < E; x += kPrepThreads) {
      int n = 0;
      for (int w = 0; w < kPrepWarps; ++w) n += wcnt[w * E + x], wcnt[w * E + x] = 0;
      off[x] += n;
    }
    __syncthreads();
  }
  // moe_gather_x's copy, for few rows: x_sorted[r] = x[perm[r] / k] for the routed rows (the
  // block's own perm writes are visible to it after the barrier above), 16 bytes a thread.
  if (f.x_sorted != nullptr) {
    const int64_t chunks = f.D / 8;  // D % 8 == 0 and 16-byte aligned rows (moe_prepare checks)
    const auto* x = static_cast<const uint4*>(f.x);
    auto* out = static_cast<uint4*>(f.x_sorted);
    for (int64_t i = tid; i < total_rows * chunks; i += kPrepThreads) {
      const int64_t r = i / chunks, c = i - r * chunks;
      out[i] = x[static_cast<int64_t>(perm[r] / f.k) * (f.xs / 8) + c];
    }
  }
}

// grid (ceil(I / 8), max_active): warp w computes i = 8 * blockIdx.x + w, gate row i and up row
// I + i together, for every row of the block's expert.
__global__ void __launch_bounds__(kSkinnyThreads)
    moe_gate_up_kernel(const bf16* x, int64_t xs, int k, const bf16* gu, const int32_t* counts,
                       const int32_t* offsets, const int32_t* perm, const int32_t* active,
                       const int32_t* num_active, int64_t I, int64_t D, bf16* h) {
  pdl_wait();
  constexpr int KC = skinny_chunk<bf16, kMoeMT>();
  __shared__ __align__(16) bf16 xsm[kMoeMT * KC];
  if (static_cast<int>(blockIdx.y) >= *num_active) return;  // uniform over the block
  const int e = active[blockIdx.y];
  const int n = counts[e], off = offsets[e];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t i = blockIdx.x * 8 + warp;
  const bool ok[2] = {i < I, i < I};
  const bf16* gate = gu + (static_cast<int64_t>(e) * 2 * I + (ok[0] ? i : 0)) * D;
  const bf16* up = gate + I * D;
  for (int m0 = 0; m0 < n; m0 += kMoeMT) {
    const int mt = min(kMoeMT, n - m0);
    float acc[2][kMoeMT] = {};
    for (int64_t kc0 = 0; kc0 < D; kc0 += KC) {
      const int kcl = static_cast<int>(min64(KC, D - kc0));
      stage_x(xsm, KC, mt, kc0, kcl, [&](int m) { return x + (perm[off + m0 + m] / k) * xs; });
      const bf16* wr[2] = {gate + kc0, up + kc0};
      skinny_chunk_dot<bf16, kMoeMT, 2>(wr, ok, xsm, KC, mt, kcl, lane, acc);
    }
#pragma unroll
    for (int m = 0; m < kMoeMT; ++m) {
      if (m >= mt) break;
      const float g = warp_sum(acc[0][m]), u = warp_sum(acc[1][m]);
      if (lane == 0 && ok[0]) h[(off + m0 + m) * I + i] = from_f<bf16>(g / (1.0f + expf(-g)) * u);
    }
  }
}

// grid (ceil(D / 16), max_active): y[sorted, d] = down_e[d] . h[sorted].
__global__ void __launch_bounds__(kSkinnyThreads)
    moe_down_kernel(const bf16* h, const bf16* down, const int32_t* counts, const int32_t* offsets,
                    const int32_t* active, const int32_t* num_active, int64_t I, int64_t D,
                    float* y) {
  pdl_wait();
  constexpr int KC = skinny_chunk<bf16, kMoeMT>();
  __shared__ __align__(16) bf16 xsm[kMoeMT * KC];
  if (static_cast<int>(blockIdx.y) >= *num_active) return;
  const int e = active[blockIdx.y];
  const int n = counts[e], off = offsets[e];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t d0 = blockIdx.x * 16 + warp * 2;
  const bool ok[2] = {d0 < D, d0 + 1 < D};
  const bf16* wbase = down + static_cast<int64_t>(e) * D * I;
  const bf16* wrow[2] = {wbase + (ok[0] ? d0 : 0) * I, wbase + (ok[1] ? d0 + 1 : 0) * I};
  for (int m0 = 0; m0 < n; m0 += kMoeMT) {
    const int mt = min(kMoeMT, n - m0);
    float acc[2][kMoeMT] = {};
    for (int64_t kc0 = 0; kc0 < I; kc0 += KC) {
      const int kcl = static_cast<int>(min64(KC, I - kc0));
      stage_x(xsm, KC, mt, kc0, kcl,
              [&](int m) { return h + static_cast<int64_t>(off + m0 + m) * I; });
      const bf16* wr[2] = {wrow[0] + kc0, wrow[1] + kc0};
      skinny_chunk_dot<bf16, kMoeMT, 2>(wr, ok, xsm, KC, mt, kcl, lane, acc);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int m = 0; m < kMoeMT; ++m) {
        if (m >= mt) break;
        const float v = warp_sum(acc[r][m]);
        if (lane == 0 && ok[r]) y[static_cast<int64_t>(off + m0 + m) * D + d0 + r] = v;
      }
  }
}

// valid: the number of rows to gather, read on the device (null: all of the grid's rows). vec:
// x's rows, out and D allow 16-byte copies.
__global__ void moe_gather_x_kernel(const uint16_t* x, int64_t xs, int k, const int32_t* perm,
                                    const int32_t* valid, int64_t D, bool vec, uint16_t* out) {
  pdl_wait();
  const int64_t r = blockIdx.x;
  if (valid && r >= *valid) return;
  const uint16_t* src = x + static_cast<int64_t>(perm[r] / k) * xs;
  uint16_t* dst = out + r * D;
  if (vec)
    for (int64_t d = 8 * threadIdx.x; d < D; d += 8 * blockDim.x)
      *reinterpret_cast<uint4*>(dst + d) = *reinterpret_cast<const uint4*>(src + d);
  else
    for (int64_t d = threadIdx.x; d < D; d += blockDim.x) dst[d] = src[d];
}

// moe_combine_kernel<float> four columns a thread (D a multiple of 4): 16-byte loads of y, the
// same sum per column in the same order (same bits).
__global__ void moe_combine_f32x4_kernel(const float* y, const int32_t* inv, const float* w, int k,
                                         int64_t D, bf16* out) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int64_t d = 4 * (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x);
  if (d >= D) return;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (int j = 0; j < k; ++j) {
    const int32_t sl = inv[t * k + j];
    if (sl >= 0) {
      const float wj = w[t * k + j];
      const float4 v = *reinterpret_cast<const float4*>(y + static_cast<int64_t>(sl) * D + d);
      acc[0] += wj * v.x, acc[1] += wj * v.y, acc[2] += wj * v.z, acc[3] += wj * v.w;
    }
  }
  __nv_bfloat162 o[2] = {__floats2bfloat162_rn(acc[0], acc[1]),
                         __floats2bfloat162_rn(acc[2], acc[3])};
  *reinterpret_cast<uint2*>(out + t * D + d) = *reinterpret_cast<const uint2*>(o);
}

template <typename TY>
__global__ void moe_combine_kernel(const TY* y, const int32_t* inv, const float* w, int k,
                                   int64_t D, bf16* out) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int64_t d = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (d >= D) return;
  float acc = 0.f;
  for (int j = 0; j < k; ++j) {
    const int32_t sl = inv[t * k + j];
    if (sl >= 0) acc += w[t * k + j] * to_f(y[static_cast<int64_t>(sl) * D + d]);
  }
  out[t * D + d] = from_f<bf16>(acc);
}

// inv_out[p] = pad_off[e] + inv[p] - offsets[e] for pair p of expert e = idx[p] (-1 kept):
// the pair's row in a layout where each expert's rows start at pad_off[e].
__global__ void moe_pad_rows_kernel(const int32_t* idx, const int32_t* inv, const int32_t* offsets,
                                    const int32_t* pad_off, int P, int E, int32_t* inv_out) {
  pdl_wait();
  const int p = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (p >= P) return;
  const int32_t sl = inv[p], e = idx[p];
  inv_out[p] = sl >= 0 && e >= 0 && e < E ? pad_off[e] + sl - offsets[e] : -1;
}

}  // namespace

void moe_route(const float* logits, int64_t ls, const float* bias, int64_t T, int64_t E, int64_t k,
               int64_t n_group, int64_t topk_group, bool normalize, float scaling,
               int64_t local_first, int64_t local_count, int32_t* idx, float* weights,
               cudaStream_t s) {
  if (T == 0) return;
  const size_t smem = (2 * E + n_group) * sizeof(float) + (E + n_group + k) * sizeof(int);
  launch(moe_route_kernel, T, 256, smem, s, logits, ls, bias, static_cast<int>(E),
         static_cast<int>(k), static_cast<int>(n_group), static_cast<int>(topk_group), normalize,
         scaling, static_cast<int>(local_first), static_cast<int>(local_count), idx, weights);
}

void moe_prepare(const int32_t* idx, int64_t pairs, int64_t E, int32_t* counts, int32_t* offsets,
                 int32_t* perm, int32_t* inv, int32_t* active, int32_t* num_active, cudaStream_t s,
                 const MoePrepareFused& fused) {
  const size_t smem = 2 * E * sizeof(int32_t) + kPrepWarps * E;
  opt_in_smem<moe_prepare_kernel>(smem);
  launch(moe_prepare_kernel, 1, kPrepThreads, smem, s, idx, static_cast<int>(pairs),
         static_cast<int>(E), counts, offsets, perm, inv, active, num_active, fused);
}

bool moe_prepare_gathers(int64_t pairs, int64_t D, int64_t xs, const void* x, const void* out) {
  return pairs * D * 2 <= kPrepGatherMaxBytes && D % 8 == 0 && xs % 8 == 0 && aligned16(x) &&
         aligned16(out);
}

void moe_gate_up(const void* x, int64_t xs, int64_t k, const void* gate_up, const int32_t* counts,
                 const int32_t* offsets, const int32_t* perm, const int32_t* active,
                 const int32_t* num_active, int64_t max_active, int64_t I, int64_t D, void* h,
                 cudaStream_t s) {
  if (max_active == 0) return;
  const dim3 g(cdiv(I, 8), static_cast<unsigned>(max_active));
  launch(moe_gate_up_kernel, g, kSkinnyThreads, 0, s, static_cast<const bf16*>(x), xs,
         static_cast<int>(k), static_cast<const bf16*>(gate_up), counts, offsets, perm, active,
         num_active, I, D, static_cast<bf16*>(h));
}

void moe_down(const void* h, const void* down, const int32_t* counts, const int32_t* offsets,
              const int32_t* active, const int32_t* num_active, int64_t max_active, int64_t I,
              int64_t D, float* y, cudaStream_t s) {
  if (max_active == 0) return;
  const dim3 g(cdiv(D, 16), static_cast<unsigned>(max_active));
  launch(moe_down_kernel, g, kSkinnyThreads, 0, s, static_cast<const bf16*>(h),
         static_cast<const bf16*>(down), counts, offsets, active, num_active, I, D, y);
}

void moe_gather_x(const void* x, int64_t xs, int64_t k, const int32_t* perm, int64_t pairs,
                  int64_t D, void* out, cudaStream_t s, const int32_t* valid) {
  if (pairs == 0) return;
  const bool vec = xs % 8 == 0 && D % 8 == 0 && aligned16(x) && aligned16(out);
  launch(moe_gather_x_kernel, pairs, 256, 0, s, static_cast<const uint16_t*>(x), xs,
         static_cast<int>(k), perm, valid, D, vec, static_cast<uint16_t*>(out));
}

void moe_pad_rows(const int32_t* idx, const int32_t* inv, const int32_t* offsets,
                  const int32_t* pad_off, int64_t pairs, int64_t E, int32_t* inv_out,
                  cudaStream_t s) {
  if (pairs == 0) return;
  launch(moe_pad_rows_kernel, cdiv(pairs, 256), 256, 0, s, idx, inv, offsets, pad_off,
         static_cast<int>(pairs), static_cast<int>(E), inv_out);
}

void moe_combine(const void* y, DT y_dt, const int32_t* inv, const float* w, int64_t T, int64_t k,
                 int64_t D, void* out, cudaStream_t s) {
  if (T == 0) return;
  if (y_dt == DT::F32 && D % 4 == 0 && aligned16(y) && aligned16(out)) {
    const dim3 g4(cdiv(D / 4, 256), static_cast<unsigned>(T));
    launch(moe_combine_f32x4_kernel, g4, 256, 0, s, static_cast<const float*>(y), inv, w,
           static_cast<int>(k), D, static_cast<bf16*>(out));
    return;
  }
  const dim3 g(cdiv(D, 256), static_cast<unsigned>(T));
  if (y_dt == DT::F32)
    launch(moe_combine_kernel<float>, g, 256, 0, s, static_cast<const float*>(y), inv, w,
           static_cast<int>(k), D, static_cast<bf16*>(out));
  else
    launch(moe_combine_kernel<bf16>, g, 256, 0, s, static_cast<const bf16*>(y), inv, w,
           static_cast<int>(k), D, static_cast<bf16*>(out));
}

}  // namespace tandem::cuda::k
