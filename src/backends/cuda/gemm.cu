// Skinny GEMM for decode-sized M (linear at M <= 16, head_matmul at any M): each block owns 16
// weight rows (2 per warp) and streams them once per 16 activation rows with 16-byte loads.
// Few output rows (N) with a long K split K across blocks; the partial sums are reduced in a
// fixed order so results never depend on timing: by the last block of each output tile to finish
// (an arrival counter per tile), or by a second kernel when no counters are given.
#include <algorithm>
#include <type_traits>

#include "backends/cuda/skinny.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerBlock = 8 * kRowsPerWarp;
constexpr int64_t kSplitAlign = 256;  // split boundaries: a multiple of every warp step

template <typename TO>
__device__ __forceinline__ void store(TO* p, float v) {
  *p = from_f<TO>(v);
}

// grid (ceil(N / 16), batch, splits * ceil(M / MT)): a block owns 16 weight rows, one K split
// and one tile of MT activation rows.
template <typename TW, typename TO, int MT>
__global__ void __launch_bounds__(kSkinnyThreads) skinny_kernel(SkinnyParams p, int64_t ks) {
  pdl_wait();
  constexpr int KC = skinny_chunk<TW, MT>();
  __shared__ __align__(16) bf16 xs[MT * KC];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.y, split = blockIdx.z % p.splits, mtile = blockIdx.z / p.splits;
  const bf16* x = static_cast<const bf16*>(p.x) + b * p.x_bs;
  const TW* w = static_cast<const TW*>(p.w) + b * p.w_bs;
  const int64_t k_begin = split * ks, k_end = min64(p.K, k_begin + ks);
  const int64_t n0 = blockIdx.x * static_cast<int64_t>(kRowsPerBlock) + warp * kRowsPerWarp;
  bool ok[kRowsPerWarp];
  const TW* wrow[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    ok[r] = n0 + r < p.N;
    wrow[r] = w + (ok[r] ? n0 + r : 0) * p.K;
  }
  {
    const int64_t m0 = mtile * MT;
    const int mt = static_cast<int>(min64(MT, p.M - m0));
    float acc[kRowsPerWarp][MT] = {};
    for (int64_t kc0 = k_begin; kc0 < k_end; kc0 += KC) {
      const int kcl = static_cast<int>(min64(KC, k_end - kc0));
      stage_x(xs, KC, mt, kc0, kcl, [&](int m) { return x + (m0 + m) * p.x_rs; });
      const TW* wr[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) wr[r] = wrow[r] + kc0;
      skinny_chunk_dot<TW, MT, kRowsPerWarp>(wr, ok, xs, KC, mt, kcl, lane, acc);
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        if (m >= mt) break;
        const float v = warp_sum(acc[r][m]);
        if (lane == 0 && ok[r]) {
          if (p.splits == 1)
            store(static_cast<TO*>(p.out) + b * p.o_bs + (m0 + m) * p.o_rs + n0 + r, v);
          else
            p.partial[((split * p.batch + b) * p.M + m0 + m) * p.N + n0 + r] = v;
        }
      }
    // The last of the tile's split blocks to arrive sums the partials (no second kernel).
    if (p.splits > 1 && p.counters &&
        last_split_block(p.counters + (mtile * p.batch + b) * gridDim.x + blockIdx.x, p.splits)) {
      const int64_t nb = blockIdx.x * static_cast<int64_t>(kRowsPerBlock);
      const int64_t total = p.batch * p.M * p.N;
      for (int i = threadIdx.x; i < kRowsPerBlock * mt; i += blockDim.x) {
        const int m = i / kRowsPerBlock, r = i - m * kRowsPerBlock;
        if (nb + r >= p.N) continue;
        const float v =
            sum_split_partials(p.partial + (b * p.M + m0 + m) * p.N + nb + r, p.splits, total);
        store(static_cast<TO*>(p.out) + b * p.o_bs + (m0 + m) * p.o_rs + nb + r, v);
      }
    }
  }
}

template <typename TO>
__global__ void split_reduce_kernel(SkinnyParams p) {
  pdl_wait();
  const int64_t total = p.batch * p.M * p.N;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = sum_split_partials(p.partial + i, p.splits, total);
    const int64_t n = i % p.N, m = (i / p.N) % p.M, b = i / (p.N * p.M);
    store(static_cast<TO*>(p.out) + b * p.o_bs + m * p.o_rs + n, v);
  }
}

// Any alignment, any K: one warp per output element (tiny shapes only).
template <typename TW, typename TO>
__global__ void skinny_scalar_kernel(SkinnyParams p) {
  pdl_wait();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t n = blockIdx.x * 8 + warp, m = blockIdx.y, b = blockIdx.z;
  if (n >= p.N) return;
  const bf16* x = static_cast<const bf16*>(p.x) + b * p.x_bs + m * p.x_rs;
  const TW* w = static_cast<const TW*>(p.w) + b * p.w_bs + n * p.K;
  float acc = 0.f;
  for (int64_t k = lane; k < p.K; k += 32) acc = fmaf(to_f(w[k]), to_f(x[k]), acc);
  acc = warp_sum(acc);
  if (lane == 0) store(static_cast<TO*>(p.out) + b * p.o_bs + m * p.o_rs + n, acc);
}

bool vector_path(const SkinnyParams& p, DT w_dt) {
  auto al = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  const int64_t wv = w_dt == DT::BF16 ? 8 : 4;
  return p.K % 8 == 0 && p.x_rs % 8 == 0 && p.x_bs % 8 == 0 && p.w_bs % wv == 0 && al(p.x) &&
         al(p.w);
}

int64_t split_len(const SkinnyParams& p) {
  return (p.K + p.splits - 1) / p.splits / kSplitAlign * kSplitAlign +
         ((p.K + p.splits - 1) / p.splits % kSplitAlign ? kSplitAlign : 0);
}

template <typename TW, typename TO, int MT>
void launch(const SkinnyParams& p, cudaStream_t s) {
  const int64_t ks = p.splits == 1 ? p.K : split_len(p);
  const dim3 g(cdiv(p.N, kRowsPerBlock), static_cast<unsigned>(p.batch),
               static_cast<unsigned>(p.splits) * cdiv(p.M, MT));
  launch(skinny_kernel<TW, TO, MT>, g, kSkinnyThreads, 0, s, p, ks);
  if (p.splits > 1 && !p.counters)
    skinny_split_reduce(p, std::is_same_v<TO, float> ? DT::F32 : DT::BF16, s);
}

// fp32 weights on the vector path: skinny_f32_tiles' shape for p, or -1 (this file's kernel).
int f32_shape(const SkinnyParams& p) {
  return p.f32_tile == -1 ? skinny_f32_tile_shape(p) : p.f32_tile;
}

template <typename TW, typename TO>
void dispatch_mt(const SkinnyParams& p, cudaStream_t s) {
  if (!vector_path(p, std::is_same_v<TW, float> ? DT::F32 : DT::BF16)) {
    const dim3 g(cdiv(p.N, 8), static_cast<unsigned>(p.M), static_cast<unsigned>(p.batch));
    launch(skinny_scalar_kernel<TW, TO>, g, 256, 0, s, p);
    return;
  }
  if constexpr (std::is_same_v<TW, float>) {
    if (const int shape = f32_shape(p); shape >= 0) {
      skinny_f32_tiles(p, shape, p.splits == 1 ? p.K : split_len(p),
                       std::is_same_v<TO, float> ? DT::F32 : DT::BF16, s);
      if (p.splits > 1 && !p.counters)
        skinny_split_reduce(p, std::is_same_v<TO, float> ? DT::F32 : DT::BF16, s);
      return;
    }
  }
  if (p.M <= 1)
    launch<TW, TO, 1>(p, s);
  else if (p.M <= 2)
    launch<TW, TO, 2>(p, s);
  else if (p.M <= 4)
    launch<TW, TO, 4>(p, s);
  else if (p.M <= 8)
    launch<TW, TO, 8>(p, s);
  else
    launch<TW, TO, 16>(p, s);
}

}  // namespace

void skinny_split_reduce(const SkinnyParams& p, DT out_dt, cudaStream_t s) {
  const int64_t total = p.batch * p.M * p.N;
  const unsigned blocks = std::min<unsigned>(cdiv(total, 256), 4096);
  if (out_dt == DT::BF16)
    launch(split_reduce_kernel<bf16>, blocks, 256, 0, s, p);
  else
    launch(split_reduce_kernel<float>, blocks, 256, 0, s, p);
}

int64_t skinny_tiles(const SkinnyParams& p, DT w_dt) {
  if (w_dt == DT::F32 && vector_path(p, w_dt))
    if (const int shape = f32_shape(p); shape >= 0) return skinny_f32_tiles_count(p, shape);
  const int64_t mt = p.M <= 1 ? 1 : p.M <= 2 ? 2 : p.M <= 4 ? 4 : p.M <= 8 ? 8 : 16;  // dispatch_mt
  return static_cast<int64_t>(cdiv(p.N, kRowsPerBlock)) * p.batch * ((p.M + mt - 1) / mt);
}

int64_t skinny_splits(const SkinnyParams& p, DT w_dt, int num_sms) {
  // Never a function of M: the split boundaries are part of every row's reduction order, and
  // decode and speculative verify must reduce a token's row identically (batch invariance).
  if (!vector_path(p, w_dt)) return 1;
  const int64_t blocks = static_cast<int64_t>(cdiv(p.N, kRowsPerBlock)) * p.batch;
  const int64_t target = 2 * static_cast<int64_t>(num_sms);
  if (blocks >= target) return 1;
  int64_t splits = std::min<int64_t>((target + blocks - 1) / blocks, p.K / 1024);
  if (splits <= 1) return 1;
  // Round to what the aligned split length really gives.
  SkinnyParams q = p;
  q.splits = splits;
  const int64_t ks = split_len(q);
  return (p.K + ks - 1) / ks;
}

void skinny_gemm(const SkinnyParams& p, DT w_dt, DT out_dt, cudaStream_t s) {
  if (p.M == 0 || p.N == 0 || p.batch == 0) return;
  if (w_dt == DT::BF16) {
    if (out_dt == DT::BF16)
      dispatch_mt<bf16, bf16>(p, s);
    else
      dispatch_mt<bf16, float>(p, s);
  } else {
    if (out_dt == DT::BF16)
      dispatch_mt<float, bf16>(p, s);
    else
      dispatch_mt<float, float>(p, s);
  }
}

}  // namespace tandem::cuda::k
