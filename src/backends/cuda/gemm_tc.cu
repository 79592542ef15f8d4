// Batch-invariant tensor-core GEMM for decode-shaped M (linear and head_matmul with bf16
// weights): out[b][m, n] = sum_k x[b][m, k] * w[b][n, k], fp32 accumulation.
//
// Why it exists: decode (one token per sequence) and speculative verify (S + 1 tokens per
// sequence) must produce bit-identical rows for the same token, or greedy speculation stops being
// lossless. Every output element here is reduced in one fixed order that depends only on N, K,
// the batch and the GPU, never on M or on the other rows:
//   - a block owns 16 * RT weight rows; its 8 warps take 32-wide k steps round-robin (warp w gets
//     steps w, w + 8, ...) and each warp accumulates its steps in increasing order with mma;
//   - the 8 warp partials are summed in warp order through shared memory;
//   - K splits across blocks (few weight rows, long K) are chosen from N, K and the SM count and
//     summed in split order by a second kernel.
// The tile shape (RT weight-row tiles x MT activation-row tiles per warp) varies with M for
// speed but never changes that order, so the same row gives the same bits at any M.
//
// Operands come straight from global memory with 16-byte loads, no shared-memory staging: the
// weights are the mma A operand (16 rows x 16 k) and the activations the B operand (16 k x 8
// rows). Thread (g, t) of a warp (g = lane / 4, t = lane % 4) loads k elements [8t, 8t + 8) of a
// 32-wide step for weight rows g and g + 8 and activation row g; the step's two
// mma.m16n8k16 take element pairs (0,1 | 2,3) and (4,5 | 6,7). That permutes k inside each mma
// identically for both operands, so the products summed are exactly the right ones.
// Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16".
#include <algorithm>

#include "backends/cuda/mma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kTcWarps = 8;
constexpr int kTcThreads = kTcWarps * 32;
constexpr int kTcStep = 32;                            // k elements per warp step
constexpr int kTcInFlight = 2;                         // steps loaded ahead per warp
constexpr int64_t kTcSplitAlign = kTcStep * kTcWarps;  // split boundaries: whole warp rounds
constexpr int64_t kTcNominalRows = 64;                 // block rows assumed when choosing splits

template <typename TO>
__device__ __forceinline__ void store(TO* p, float v) {
  *p = from_f<TO>(v);
}

// grid (ceil(M / (8 MT)), ceil(N / (16 RT)), batch * splits), kTcThreads threads. The M tile is
// the fastest grid index so blocks sharing a weight tile run together and re-read it from L2.
template <typename TO, int RT, int MT>
__global__ void __launch_bounds__(kTcThreads, (RT * MT <= 4 ? 2 : 1))
    tc_gemm_kernel(SkinnyParams p, int64_t ks) {
  pdl_wait();
  constexpr int ROWS = RT * 16, COLS = MT * 8;
  __shared__ float red[kTcWarps][ROWS][COLS + 1];  // warp partials, +1 against bank conflicts
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * COLS;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * ROWS;
  const int64_t b = blockIdx.z / p.splits, split = blockIdx.z % p.splits;
  const int64_t k_begin = split * ks, k_end = min64(p.K, k_begin + ks);
  const bf16* W = static_cast<const bf16*>(p.w) + b * p.w_bs;
  const bf16* X = static_cast<const bf16*>(p.x) + b * p.x_bs;

  // This thread's weight rows (g and g + 8 of each 16-row tile) and activation rows.
  const bf16* wrow[RT][2];
  bool wok[RT][2];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t n = n0 + r * 16 + g + 8 * h;
      wok[r][h] = n < p.N;
      wrow[r][h] = W + (wok[r][h] ? n : 0) * p.K + k_begin + 8 * t;
    }
  const bf16* xrow[MT];
  bool xok[MT];
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    const int64_t m = m0 + i * 8 + g;
    xok[i] = m < p.M;
    xrow[i] = X + (xok[i] ? m : 0) * p.x_rs + k_begin + 8 * t;
  }

  float acc[RT][MT][4] = {};
  const int64_t len = k_end - k_begin;  // a multiple of 8 (K is)
  const int64_t nsteps = (len + kTcStep - 1) / kTcStep;
  for (int64_t s0 = warp; s0 < nsteps; s0 += kTcWarps * kTcInFlight) {
    uint4 wv[kTcInFlight][RT][2], xv[kTcInFlight][MT];
#pragma unroll
    for (int u = 0; u < kTcInFlight; ++u) {
      const int64_t off = (s0 + u * kTcWarps) * kTcStep;  // from k_begin; + 8t in the pointers
      const bool in = off + 8 * t < len;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          wv[u][r][h] = in && wok[r][h] ? __ldg(reinterpret_cast<const uint4*>(wrow[r][h] + off))
                                        : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int i = 0; i < MT; ++i)
        xv[u][i] =
            in && xok[i] ? *reinterpret_cast<const uint4*>(xrow[i] + off) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kTcInFlight; ++u) {
      if (s0 + u * kTcWarps >= nsteps) break;
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const uint4& a = wv[u][r][0];
          const uint4& a8 = wv[u][r][1];
          mma_bf16(acc[r][i], a.x, a8.x, a.y, a8.y, xv[u][i].x, xv[u][i].y);
          mma_bf16(acc[r][i], a.z, a8.z, a.w, a8.w, xv[u][i].z, xv[u][i].w);
        }
    }
  }

  // D fragment: d0, d1 = (weight row g, activation rows 2t, 2t + 1), d2, d3 = weight row g + 8.
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        red[warp][r * 16 + g + (e >> 1) * 8][i * 8 + 2 * t + (e & 1)] = acc[r][i][e];
  __syncthreads();
  for (int idx = threadIdx.x; idx < ROWS * COLS; idx += kTcThreads) {
    const int row = idx / COLS, col = idx - row * COLS;
    const int64_t n = n0 + row, m = m0 + col;
    if (n >= p.N || m >= p.M) continue;
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kTcWarps; ++w) v += red[w][row][col];  // fixed order
    if (p.splits == 1)
      store(static_cast<TO*>(p.out) + b * p.o_bs + m * p.o_rs + n, v);
    else
      p.partial[((split * p.batch + b) * p.M + m) * p.N + n] = v;
  }
}

int64_t split_len(const SkinnyParams& p) {
  const int64_t per = (p.K + p.splits - 1) / p.splits;
  return (per + kTcSplitAlign - 1) / kTcSplitAlign * kTcSplitAlign;
}

template <typename TO, int RT, int MT>
void launch(const SkinnyParams& p, cudaStream_t s) {
  const int64_t ks = p.splits == 1 ? p.K : split_len(p);
  const dim3 grid(cdiv(p.M, MT * 8), cdiv(p.N, RT * 16), static_cast<unsigned>(p.batch * p.splits));
  launch(tc_gemm_kernel<TO, RT, MT>, grid, kTcThreads, 0, s, p, ks);
}

template <typename TO>
void dispatch(const SkinnyParams& p, cudaStream_t s) {
  // More weight-row tiles per warp at small M (more weight bytes in flight, activations reused
  // across tiles), more activation tiles at larger M; 64 rows per block pass at most.
  if (p.M <= 8)
    launch<TO, 4, 1>(p, s);
  else if (p.M <= 16)
    launch<TO, 4, 2>(p, s);
  else if (p.M <= 32)
    launch<TO, 2, 4>(p, s);
  else
    launch<TO, 1, 8>(p, s);
}

}  // namespace

bool tc_gemm_applies(const SkinnyParams& p) {
  auto al = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  return p.K % 8 == 0 && p.x_rs % 8 == 0 && p.x_bs % 8 == 0 && p.w_bs % 8 == 0 && al(p.x) &&
         al(p.w);
}

int64_t tc_gemm_splits(const SkinnyParams& p, int num_sms) {
  // Never a function of M: the split boundaries are part of every row's reduction order. The
  // count fills the GPU in whole waves of the decode-sized tile (64 weight rows, two blocks per
  // SM): a last wave a tenth full would cost as much as a full one.
  const int64_t blocks = static_cast<int64_t>(cdiv(p.N, kTcNominalRows)) * p.batch;
  const int64_t slots = 2 * static_cast<int64_t>(num_sms);
  const int64_t most = std::max<int64_t>(1, p.K / 1024);
  int64_t best = 1;
  double best_eff = 0;
  for (int64_t s = 1; s <= most; ++s) {
    SkinnyParams q = p;
    q.splits = s;
    const int64_t real = s == 1 ? 1 : (p.K + split_len(q) - 1) / split_len(q);
    const int64_t total = blocks * real;
    const double eff = static_cast<double>(total) / (((total + slots - 1) / slots) * slots);
    if (eff > best_eff + 1e-9) best = real, best_eff = eff;
    if (total >= slots && eff >= 0.85) break;  // the fewest splits that fill the waves
  }
  return best;
}

void tc_gemm(const SkinnyParams& p, DT out_dt, cudaStream_t s) {
  if (p.M == 0 || p.N == 0 || p.batch == 0) return;
  if (out_dt == DT::BF16)
    dispatch<bf16>(p, s);
  else
    dispatch<float>(p, s);
  if (p.splits > 1) skinny_split_reduce(p, out_dt, s);
}

}  // namespace tandem::cuda::k
