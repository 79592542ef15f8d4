// Decode-sized linear on quantized weights (FP8 block, MXFP4): the weight stream of
// quant_mma.cuh over one [N, K] weight, K split across blocks where N alone does not fill the
// GPU (the partials summed in split order by the tile's last block, or by skinny_split_reduce).
#include <algorithm>

#include "backends/cuda/quant_mma.cuh"

namespace tandem::cuda::k {

namespace {

__device__ __forceinline__ void q_store(const QGemvParams& p, int64_t m, int64_t n, float v) {
  if (p.out_dt == DT::F32)
    static_cast<float*>(p.out)[m * p.o_rs + n] = v;
  else
    static_cast<bf16*>(p.out)[m * p.o_rs + n] = __float2bfloat16_rn(v);
}

// grid (ceil(M / 8NT), ceil(N / 32), splits): the activation tile varies fastest, so the blocks
// that read the same 32 weight rows for different token tiles run side by side (the second
// read comes from L2). Each block covers chunks [split * cps, split * cps + cps).
// The warp's first weight chunks are loaded before pdl_wait(): weights are never written by the
// kernels of a step, so their fetch overlaps the end of the kernel before (the activation
// quantizer triggers its dependents early for this).
template <class F, class W, int NT, int B, bool kFull>
__global__ void __launch_bounds__(kQThreads, B) q_gemv_kernel(QGemvParams p, W w, int64_t cps) {
  __shared__ float red[q_red_floats<NT>()];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * 8 * NT;
  const int64_t n0 = static_cast<int64_t>(blockIdx.y) * 32;
  const int64_t split = blockIdx.z;
  int64_t n[2][2];
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int i = 0; i < 2; ++i) n[t][i] = n0 + 16 * t + 8 * i + g;
  const typename F::Rows wr = F::rows(w, 0, n, c);
  const int64_t nch = (w.K + kQChunk - 1) / kQChunk;
  const int64_t ch0 = split * cps, ch1 = min64(nch, ch0 + cps);
  QRing<F> ring;
  q_ring_fill<F, kFull>(ring, wr, ch0, ch1, warp, c);
  pdl_wait();
  XTile<NT> xt;
  const auto* x = static_cast<const uint8_t*>(p.x);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {  // a missing row reads row m0 (XTile)
    const int64_t m = m0 + 8 * nt + g;
    xt.x[nt] = x + (m < p.M ? m : m0) * p.x_rs * F::kXBytes;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int64_t mc = m0 + 8 * nt + 2 * c + i;
      xt.sx[nt][i] = p.xscale ? p.xscale + (mc < p.M ? mc : m0) * p.xs_rs : nullptr;
    }
  }
  QAcc<NT> acc = {};
  q_pass<F, NT, kFull>(acc, ring, wr, xt, ch0, ch1, warp, c);
  q_stash<NT>(red, acc, warp, lane);
  // 16 output rows x 8 NT columns of each tile, kQThreads / 16 columns at a time.
  const int r = tid & 15;
  for (int col = tid >> 4; col < 8 * NT; col += kQThreads / 16) {
    const int64_t m = m0 + col;
    if (m >= p.M) break;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int64_t nn = n0 + 16 * t + r;
      if (nn >= w.N) continue;
      const float v = q_reduce<NT>(red, t, r, col);
      if (p.splits > 1)
        p.partial[(split * p.M + m) * w.N + nn] = v;
      else
        q_store(p, m, nn, v);
    }
  }
  if (p.splits > 1 && p.counters) {
    // The last of the tile's split blocks to arrive sums the partials in split order, the
    // expression of skinny_split_reduce, so the result does not depend on who is last (or on
    // whether counters were given).
    __shared__ bool last;
    __threadfence();  // this block's partials are visible before its arrival is counted
    __syncthreads();
    if (tid == 0) {
      int* cnt = p.counters + blockIdx.y * gridDim.x + blockIdx.x;
      last = atomicAdd(cnt, 1) == p.splits - 1;
      if (last) *cnt = 0;  // ready for the next launch, which the stream orders after this one
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = tid; i < 32 * 8 * NT; i += kQThreads) {
      const int64_t m = m0 + i / 32, nn = n0 + i % 32;
      if (m >= p.M || nn >= w.N) continue;
      const float* part = p.partial + m * w.N + nn;
      float v = 0.f;
      for (int64_t sp = 0; sp < p.splits; ++sp) v += __ldcg(part + sp * p.M * w.N);
      q_store(p, m, nn, v);
    }
  }
}

template <class F, class W>
void run(const QGemvParams& p, const W& w, cudaStream_t s) {
  if (p.M == 0 || w.N == 0) return;
  const int64_t nch = (w.K + kQChunk - 1) / kQChunk;
  const int64_t cps = (nch + p.splits - 1) / p.splits;
  const unsigned ny = cdiv(w.N, 32), nz = static_cast<unsigned>(p.splits);
  // 8 activation rows per pass up to 8 rows, else 16 (more would spill: see quant_mma.cuh).
  with_nt_ring<F>(p.M <= 8 ? 1 : 2, false, p.ring, [&]<int NT, int B>() {
    const dim3 grid(cdiv(p.M, 8 * NT), ny, nz);
    if (w.K % kQChunk == 0)
      launch(q_gemv_kernel<F, W, NT, B, true>, grid, kQThreads, 0, s, p, w, cps);
    else
      launch(q_gemv_kernel<F, W, NT, B, false>, grid, kQThreads, 0, s, p, w, cps);
  });
  if (p.splits > 1 && !p.counters) {
    SkinnyParams sp;
    sp.out = p.out;
    sp.o_rs = p.o_rs;
    sp.M = p.M;
    sp.N = w.N;
    sp.batch = 1;
    sp.splits = p.splits;
    sp.partial = p.partial;
    skinny_split_reduce(sp, p.out_dt, s);
  }
}

}  // namespace

bool fp8_decode_applies(const Fp8W& w) {
  return w.K % 16 == 0 && w.bn >= 1 && (w.bk % kQChunk == 0 || w.bk >= w.K) &&
         w.s_rs >= (w.K + w.bk - 1) / w.bk;
}

bool mxfp4_decode_applies(const Mx4W& w) {
  return w.K % 32 == 0 && w.s_rs >= w.K / 32;
}

int64_t quant_gemv_splits(int64_t N, int64_t K, int num_sms) {
  // Never a function of M (batch invariance: the split boundaries are part of every row's
  // reduction order). While N alone does not give every SM a block, K is split up to about two
  // blocks per SM, each warp keeping at least one chunk. Past that, long rows are still split
  // while the blocks fit in one wave of the decode shapes' three per SM and each split keeps 32
  // chunks (8 a warp): at batch 1 o_proj 6144 x 16384 ran its 192 blocks of 128 chunks at 59%
  // of copy and at 67% in two splits, while short rows lost by splitting (q_b 16384 x 2048 in
  // two splits: 18 -> 22 us at one row, 28 -> 53 us at 32; shared down 6144 x 2048: 10 -> 12).
  const int64_t blocks = (N + 31) / 32, sms = num_sms;
  const int64_t nch = (K + kQChunk - 1) / kQChunk;
  int64_t want = 1;
  if (blocks < sms) {
    const int64_t most = std::max<int64_t>(1, nch / kQWarps);
    want = std::min<int64_t>(most, (2 * sms + blocks - 1) / blocks);
  } else {
    want = std::max<int64_t>(1, std::min(3 * sms / blocks, nch / 32));
  }
  if (want <= 1) return 1;
  const int64_t cps = (nch + want - 1) / want;
  return (nch + cps - 1) / cps;  // what the chunks per split really give
}

int64_t quant_gemv_tiles(int64_t M, int64_t N) {
  return (M <= 8 ? 1 : (M + 15) / 16) * ((N + 31) / 32);
}

void fp8_gemv(const QGemvParams& p, const Fp8W& w, cudaStream_t s) {
  run<Fp8Fmt>(p, w, s);
}

void mxfp4_gemv(const QGemvParams& p, const Mx4W& w, cudaStream_t s) {
  if (p.x_paired)
    run<Mx4PairedFmt>(p, w, s);
  else
    run<Mx4Fmt>(p, w, s);
}

}  // namespace tandem::cuda::k
