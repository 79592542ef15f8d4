// The grouped expert products of moe_experts' device path on quantized experts (FP8 block,
// MXFP4): the weight stream of quant_mma.cuh over one expert's rows, looping over that expert's
// rows 8 NT at a time. gate_up: a tile is 16 units (gate rows i0 .. i0 + 15 as stream tile 0,
// the same up rows as stream tile 1) and writes h = silu(gate) * up; down: a tile is 32 rows of
// D and writes f32 y. A grid of resident blocks walks the tiles of all active experts.
#include <algorithm>

#include "backends/cuda/quant_mma.cuh"

namespace tandem::cuda::k {

namespace {

// Persistent over tiles: tile t is row tile t % tiles of active expert t / tiles (tiles = I / 16
// or ceil(D / 32)); block b takes tiles b, b + gridDim.x, ... (the grid is what stays resident
// at once). When a tile's stream ends the block requests the first chunks of its next pass or
// next tile before it reduces and stores, so those loads are in flight across the block
// barriers and the stores instead of each block starting cold (at batch 1 the 1,536 down tiles
// of 16 chunks were 3.9 waves of blocks that each waited for their first loads). A tile's
// reduction is the same whichever block runs it: the bits do not change. xs / x_rs: the
// activation rows (x: [T, D] read through perm for gate_up, h: [P, I] in sorted order for down),
// xscale / xs_rs their FP8 scales (null for MXFP4).
template <class F, class W, int NT, int B, bool kFull, bool kGateUp>
__global__ void __launch_bounds__(kQThreads, B)
    q_moe_kernel(const uint8_t* x, int64_t x_rs, const float* xscale, int64_t xs_rs, MoeGroups g,
                 W w, int64_t I, void* out, bool h_f32, int tiles) {
  if (!g.grouping_before_wait) pdl_wait();
  __shared__ float red[q_red_floats<NT>()];
  const int total = *g.num_active * tiles;
  int tile = static_cast<int>(blockIdx.x);
  if (tile >= total) return;  // uniform over the block
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, gi = lane >> 2, c = lane & 3;
  const int64_t nch = (w.K + kQChunk - 1) / kQChunk;
  int e = 0;
  int64_t r0 = 0;
  typename F::Rows wr;
  const auto start = [&](int t) {  // the tile's expert, first row and weight rows
    e = g.active[t / tiles];
    r0 = static_cast<int64_t>(t % tiles) * (kGateUp ? 16 : 32);
    int64_t n[2][2];
#pragma unroll
    for (int tt = 0; tt < 2; ++tt)
#pragma unroll
      for (int i = 0; i < 2; ++i)
        n[tt][i] = kGateUp ? tt * I + r0 + 8 * i + gi : r0 + 16 * tt + 8 * i + gi;
    wr = F::rows(w, e, n, c);
  };
  start(tile);
  // The first chunks' weights go out before the expert's row count and rows are looked up.
  QRing<F> ring;
  q_ring_fill<F, kFull>(ring, wr, 0, nch, warp, c);
  const auto next_tile = [&] {  // this block's next tile, its first chunks requested
    tile += static_cast<int>(gridDim.x);
    if (tile < total) {
      start(tile);
      q_ring_fill<F, kFull>(ring, wr, 0, nch, warp, c);
    }
  };
  if (g.grouping_before_wait) pdl_wait();  // the activations and their scales
  while (tile < total) {
    const int cnt = g.counts[e], off = g.offsets[e];
    const int64_t tr0 = r0;
    if (cnt <= 0) {  // never for an active expert; a tile that would not advance would hang
      next_tile();
      continue;
    }
    for (int m0 = 0; m0 < cnt; m0 += 8 * NT) {
      const int rows = min(8 * NT, cnt - m0);
      XTile<NT> xt;
      // The activation row of pass row m (a missing one reads the pass's first: XTile).
      const auto row_of = [&](int m) -> int64_t {
        const int s = off + m0 + (m < rows ? m : 0);
        return kGateUp ? g.perm[s] / g.k : s;
      };
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        xt.x[nt] = x + row_of(8 * nt + gi) * x_rs * F::kXBytes;
#pragma unroll
        for (int i = 0; i < 2; ++i)
          xt.sx[nt][i] = xscale ? xscale + row_of(8 * nt + 2 * c + i) * xs_rs : nullptr;
      }
      QAcc<NT> acc = {};
      q_pass<F, NT, kFull>(acc, ring, wr, xt, 0, nch, warp, c);
      // The ring is empty: what this block streams next goes out now.
      if (m0 + 8 * NT < cnt)
        q_ring_fill<F, kFull>(ring, wr, 0, nch, warp, c);
      else
        next_tile();
      q_stash<NT>(red, acc, warp, lane);
      const int r = tid & 15;
      for (int col = tid >> 4; col < rows; col += kQThreads / 16) {
        const int64_t s = off + m0 + col;
        if (kGateUp) {
          const float gv = q_reduce<NT>(red, 0, r, col), uv = q_reduce<NT>(red, 1, r, col);
          const float hv = gv / (1.0f + expf(-gv)) * uv;
          if (h_f32)
            static_cast<float*>(out)[s * I + tr0 + r] = hv;
          else
            static_cast<bf16*>(out)[s * I + tr0 + r] = from_f<bf16>(hv);
        } else {
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const int64_t d = tr0 + 16 * t + r;
            if (d < w.N) static_cast<float*>(out)[s * w.N + d] = q_reduce<NT>(red, t, r, col);
          }
        }
      }
      __syncthreads();  // red is rewritten by the next pass
    }
  }
}

// The blocks of kernel that are resident at once on this GPU (its occupancy times the SMs).
template <auto Kernel>
int64_t resident_blocks() {
  static const int64_t n = [] {
    int d = 0, sms = 0, occ = 0;
    cudaGetDevice(&d);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, Kernel, kQThreads, 0);
    return static_cast<int64_t>(std::max(occ, 1)) * std::max(sms, 1);
  }();
  return n;
}

// 8 rows per pass while experts see a few rows each (decode), 16 from 8 rows per expert on
// average; either way a row's reduction order is the same.
template <class F, class W, bool kGateUp>
void run(const void* x, int64_t x_rs, const float* xscale, int64_t xs_rs, const MoeGroups& g,
         const W& w, int64_t I, void* out, bool h_f32, int ring, cudaStream_t s) {
  if (g.max_active == 0) return;
  const int64_t tiles = kGateUp ? I / 16 : (w.N + 31) / 32;
  const auto* xp = static_cast<const uint8_t*>(x);
  with_nt_ring<F>(g.pairs < 8 * g.max_active ? 1 : 2, true, ring, [&]<int NT, int B>() {
    const auto go = [&]<bool kFull>() {
      constexpr auto kernel = q_moe_kernel<F, W, NT, B, kFull, kGateUp>;
      const int64_t grid = std::min(tiles * g.max_active, resident_blocks<kernel>());
      launch(kernel, dim3(static_cast<unsigned>(grid)), kQThreads, 0, s, xp, x_rs, xscale, xs_rs, g,
             w, I, out, h_f32, static_cast<int>(tiles));
    };
    if (w.K % kQChunk == 0)
      go.template operator()<true>();
    else
      go.template operator()<false>();
  });
}

}  // namespace

void fp8_moe_gate_up(const void* xq, int64_t xq_rs, const float* xscale, int64_t xs_rs,
                     const MoeGroups& g, const Fp8W& gate_up, int64_t I, void* h, DT h_dt,
                     cudaStream_t s, int ring) {
  run<Fp8Fmt, Fp8W, true>(xq, xq_rs, xscale, xs_rs, g, gate_up, I, h, h_dt == DT::F32, ring, s);
}

void fp8_moe_down(const void* hq, int64_t hq_rs, const float* hscale, int64_t hs_rs,
                  const MoeGroups& g, const Fp8W& down, float* y, cudaStream_t s, int ring) {
  run<Fp8Fmt, Fp8W, false>(hq, hq_rs, hscale, hs_rs, g, down, 0, y, false, ring, s);
}

void mxfp4_moe_gate_up(const void* x, int64_t xs, const MoeGroups& g, const Mx4W& gate_up,
                       int64_t I, void* h, DT h_dt, cudaStream_t s, int ring, bool x_paired) {
  if (x_paired)
    run<Mx4PairedFmt, Mx4W, true>(x, xs, nullptr, 0, g, gate_up, I, h, h_dt == DT::F32, ring, s);
  else
    run<Mx4Fmt, Mx4W, true>(x, xs, nullptr, 0, g, gate_up, I, h, h_dt == DT::F32, ring, s);
}

void mxfp4_moe_down(const void* h, int64_t hs, const MoeGroups& g, const Mx4W& down, float* y,
                    cudaStream_t s, int ring, bool h_paired) {
  if (h_paired)
    run<Mx4PairedFmt, Mx4W, false>(h, hs, nullptr, 0, g, down, 0, y, false, ring, s);
  else
    run<Mx4Fmt, Mx4W, false>(h, hs, nullptr, 0, g, down, 0, y, false, ring, s);
}

}  // namespace tandem::cuda::k
