// fp32-weight products (the router, the indexer's head weights) from decode to prefill row
// counts, with the skinny kernel's reduction order at every M, so one path is batch-invariant
// from one row to thousands (deterministic mode needs no cuBLASLt fp32 GEMM, whose 1-row call is
// 2x the skinny kernel's).
//
// The order (gemm.cu's skinny kernel, fp32 weights): K in splits of ks (skinny_splits, a
// function of N, K and the GPU only); in a split, lane L of a warp sums the positions
// k_begin + 128 j + 4 L + e (j ascending, e = 0..3) in one fmaf chain from +0; the 32 lane
// sums meet in warp_sum's xor butterfly (offsets 16, 8, 4, 2, 1); the splits' sums are added in
// split order from +0.
//
// Here a warp owns a TM x TN tile of outputs instead of 2 weight rows x MT activation rows, and
// each lane still plays lane L for all of them: per 128-wide step it loads TN weight float4 and
// TM activation quads straight from global memory (coalesced: 512 and 256 bytes a row) and runs
// TM * TN * 4 FMAs. The TM * TN lane sums then meet by recursive halving: at offset o a lane
// keeps the half of its sums its bit o selects and adds the partner's copy of them, which pairs
// the same lanes at the same offsets as the butterfly (so the same bits) in 31 shuffles per 32
// outputs instead of 160.
#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kTileThreads = 128;  // 4 warps: WM x (4 / WM) warp tiles
constexpr int kStep = 128;         // K elements per warp step: 32 lanes x 4

// One shape of the kernel: a warp's TM x TN output tile, WM warps along M, U steps' loads issued
// before their FMAs (few rows: the loads' latency, not the FMAs, is what a step waits on).
struct TileShape {
  int tm, tn, wm, u;
};
// The instantiated shapes (index = SkinnyParams::f32_tile when forced), by growing tile: the
// ladder skinny_f32_tile_shape climbs.
constexpr TileShape kShapes[] = {{1, 1, 1, 8}, {1, 2, 1, 8}, {2, 2, 1, 4},
                                 {4, 2, 1, 4}, {4, 4, 2, 2}, {8, 8, 2, 1}};
constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);

__device__ __forceinline__ void bf16x4_to_f(const uint2& u, float* f) {
  f[0] = __uint_as_float(u.x << 16), f[1] = __uint_as_float(u.x & 0xffff0000u);
  f[2] = __uint_as_float(u.y << 16), f[3] = __uint_as_float(u.y & 0xffff0000u);
}

// One halving at offset O = 16 >> STEP: v[0..H) keep the half of v[0..2H) that the lane's bit O
// selects, each plus the partner lane's copy of it. Then the next offset, until one sum is left.
template <int STEP, int H, int G>
__device__ __forceinline__ void halve(float (&v)[G], int lane) {
  if constexpr (H >= 1) {
    constexpr int O = 16 >> STEP;
    const bool upper = (lane & O) != 0;
#pragma unroll
    for (int i = 0; i < H; ++i) {
      const float send = upper ? v[i] : v[i + H];
      const float keep = upper ? v[i + H] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
    }
    halve<STEP + 1, H / 2>(v, lane);
  }
}

// v[0..G) are this lane's sums of G outputs; returns the warp total of output
// lane >> (5 - log2 G) (every lane of the 32 / G that share those high bits holds it). The
// pairing at each offset is warp_sum's, so each output gets warp_sum's bits.
template <int G>
__device__ __forceinline__ float warp_sum_halving(float (&v)[G], int lane) {
  static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "G: a power of two up to 32");
  constexpr int kHalvings = G >= 32 ? 5 : G >= 16 ? 4 : G >= 8 ? 3 : G >= 4 ? 2 : G >= 2 ? 1 : 0;
  halve<0, G / 2>(v, lane);
  float s = v[0];
#pragma unroll
  for (int step = kHalvings; step < 5; ++step) s += __shfl_xor_sync(0xffffffffu, s, 16 >> step);
  return s;
}

// acc[m][n] += the four products of one 128-wide step, in the order of the skinny kernel.
template <int TM, int TN>
__device__ __forceinline__ void fma_step(const float4 (&w4)[TN], const uint2 (&xq)[TM],
                                         float (&acc)[TM][TN]) {
#pragma unroll
  for (int m = 0; m < TM; ++m) {
    float xf[4];
    bf16x4_to_f(xq[m], xf);
#pragma unroll
    for (int n = 0; n < TN; ++n) {
      acc[m][n] = fmaf(w4[n].x, xf[0], acc[m][n]);
      acc[m][n] = fmaf(w4[n].y, xf[1], acc[m][n]);
      acc[m][n] = fmaf(w4[n].z, xf[2], acc[m][n]);
      acc[m][n] = fmaf(w4[n].w, xf[3], acc[m][n]);
    }
  }
}

// The operands of one step at k (elements past the split's first position of this lane).
template <int TM, int TN>
__device__ __forceinline__ void load_step(const float* wb, const int (&wo)[TN], const bf16* xb,
                                          const int (&xo)[TM], int64_t k, float4 (&w4)[TN],
                                          uint2 (&xq)[TM]) {
#pragma unroll
  for (int n = 0; n < TN; ++n) w4[n] = __ldg(reinterpret_cast<const float4*>(wb + wo[n] + k));
#pragma unroll
  for (int m = 0; m < TM; ++m) xq[m] = __ldg(reinterpret_cast<const uint2*>(xb + xo[m] + k));
}

// grid (ceil(N / BN), batch, splits * ceil(M / BM)), BM = TM * WM, BN = TN * (4 / WM).
template <typename TO, int TM, int TN, int WM, int U>
__global__ void __launch_bounds__(kTileThreads)
    skinny_f32_tiles_kernel(SkinnyParams p, int64_t ks) {
  pdl_wait();
  constexpr int WN = 4 / WM, BM = TM * WM, BN = TN * WN;
  constexpr int G = TM * TN < 32 ? TM * TN : 32;  // outputs per halving group
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.y, split = blockIdx.z % p.splits, mtile = blockIdx.z / p.splits;
  const int64_t m0 = mtile * BM + (warp / WN) * TM,
                n0 = blockIdx.x * int64_t{BN} + (warp % WN) * TN;
  const int64_t k_begin = split * ks, len = min64(p.K, k_begin + ks) - k_begin;
  // Rows past M or N read the last row (always there) and are never stored. Row offsets in
  // 32 bits from one base each (skinny_f32_tile_shape keeps larger operands off this kernel).
  const bf16* xb = static_cast<const bf16*>(p.x) + b * p.x_bs + k_begin + lane * 4;
  const float* wb = static_cast<const float*>(p.w) + b * p.w_bs + k_begin + lane * 4;
  int xo[TM], wo[TN];
#pragma unroll
  for (int m = 0; m < TM; ++m) xo[m] = static_cast<int>(min64(m0 + m, p.M - 1) * p.x_rs);
#pragma unroll
  for (int n = 0; n < TN; ++n) wo[n] = static_cast<int>(min64(n0 + n, p.N - 1) * p.K);

  float acc[TM][TN] = {};
  const int64_t full = len / kStep * kStep;
  // The split's last, partial step: this lane's four positions exist or not (len is a
  // multiple of 8 and the lane's first position a multiple of 4).
  const int64_t end = full + lane * 4 < len ? full + kStep : full;
  int64_t k = 0;
  for (; k + U * kStep <= full; k += U * kStep) {
    float4 w4[U][TN];
    uint2 xq[U][TM];
#pragma unroll
    for (int u = 0; u < U; ++u) load_step<TM, TN>(wb, wo, xb, xo, k + u * kStep, w4[u], xq[u]);
#pragma unroll
    for (int u = 0; u < U; ++u) fma_step<TM, TN>(w4[u], xq[u], acc);
  }
  for (; k < end; k += kStep) {
    float4 w4[TN];
    uint2 xq[TM];
    load_step<TM, TN>(wb, wo, xb, xo, k, w4, xq);
    fma_step<TM, TN>(w4, xq, acc);
  }

  // Lane sums -> warp sums: group g holds outputs [g G, g G + G) of the flattened m * TN + n.
  constexpr int kGroups = TM * TN / G;
  const int out_lane_step = 32 / G;  // lanes holding the same output
  const bool writer = (lane & (out_lane_step - 1)) == 0;
  const int o_in_group = lane / out_lane_step;
  const int64_t total = p.batch * p.M * p.N;
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    float v[G];
#pragma unroll
    for (int i = 0; i < G; ++i) v[i] = acc[(g * G + i) / TN][(g * G + i) % TN];
    const float s = warp_sum_halving<G>(v, lane);
    const int o = g * G + o_in_group, m = o / TN, n = o % TN;
    if (writer && m0 + m < p.M && n0 + n < p.N) {
      if (p.splits == 1)
        static_cast<TO*>(p.out)[b * p.o_bs + (m0 + m) * p.o_rs + n0 + n] = from_f<TO>(s);
      else
        p.partial[split * total + (b * p.M + m0 + m) * p.N + n0 + n] = s;
    }
  }
  // The last of the tile's split blocks to arrive sums the partials (no second kernel).
  if (p.splits == 1 || !p.counters ||
      !last_split_block(p.counters + (mtile * p.batch + b) * gridDim.x + blockIdx.x, p.splits))
    return;
  const int64_t mb = mtile * BM, nb = blockIdx.x * int64_t{BN};
  for (int i = threadIdx.x; i < BM * BN; i += kTileThreads) {
    const int m = i / BN, n = i % BN;
    if (mb + m >= p.M || nb + n >= p.N) continue;
    const float v =
        sum_split_partials(p.partial + (b * p.M + mb + m) * p.N + nb + n, p.splits, total);
    static_cast<TO*>(p.out)[b * p.o_bs + (mb + m) * p.o_rs + nb + n] = from_f<TO>(v);
  }
}

template <typename TO, int S>
void launch_shape(const SkinnyParams& p, int64_t ks, cudaStream_t s) {
  constexpr TileShape t = kShapes[S];
  constexpr int BM = t.tm * t.wm, BN = t.tn * (4 / t.wm);
  const dim3 g(cdiv(p.N, BN), static_cast<unsigned>(p.batch),
               static_cast<unsigned>(p.splits) * cdiv(p.M, BM));
  launch(skinny_f32_tiles_kernel<TO, t.tm, t.tn, t.wm, t.u>, g, kTileThreads, 0, s, p, ks);
}

template <typename TO, int S = 0>
void dispatch(int shape, const SkinnyParams& p, int64_t ks, cudaStream_t s) {
  if constexpr (S < kNumShapes) {
    if (shape == S)
      launch_shape<TO, S>(p, ks, s);
    else
      dispatch<TO, S + 1>(shape, p, ks, s);
  }
}

}  // namespace

int skinny_f32_tile_shapes() {
  return kNumShapes;
}

int skinny_f32_tile_shape(const SkinnyParams& p) {
  // Measured on the H200 (kernel_bench --f32-only: every shape at 1 to 4,096 rows, the router's
  // 256 and the indexer's 32 outputs, docs/benchmarks.md): the fastest shape was the largest
  // tile whose grid still has ~6 blocks per SM (768 on 132 SMs; more, smaller blocks hide the
  // weights' latency, larger tiles load less per FMA), and the 8 x 8 tile from a grid of
  // 192 blocks, where FMAs dominate. Within 5% of the fastest shape at every measured M.
  constexpr int64_t kOffsets = int64_t{1} << 31;  // the kernel's row offsets are 32-bit
  if (p.M * p.x_rs >= kOffsets || p.N * p.K >= kOffsets) return -1;
  constexpr int kLarge = kNumShapes - 1;
  auto blocks = [&](int shape) { return skinny_f32_tiles_count(p, shape) * p.splits; };
  if (blocks(kLarge) >= 192) return kLarge;
  int shape = 0;
  while (shape + 1 < kLarge && blocks(shape + 1) >= 768) ++shape;
  return shape;
}

const char* skinny_f32_tile_name(int shape) {
  static const char* names[] = {"1x1/1u8", "1x2/1u8", "2x2/1u4", "4x2/1u4", "4x4/2u2", "8x8/2u1"};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumShapes);
  return shape < 0 ? "2rows" : shape < kNumShapes ? names[shape] : "?";
}

int64_t skinny_f32_tiles_count(const SkinnyParams& p, int shape) {
  const TileShape t = kShapes[shape];
  const int64_t BM = t.tm * t.wm, BN = t.tn * (4 / t.wm);
  return (p.N + BN - 1) / BN * p.batch * ((p.M + BM - 1) / BM);
}

void skinny_f32_tiles(const SkinnyParams& p, int shape, int64_t ks, DT out_dt, cudaStream_t s) {
  if (out_dt == DT::BF16)
    dispatch<bf16>(shape, p, ks, s);
  else
    dispatch<float>(shape, p, ks, s);
}

}  // namespace tandem::cuda::k
