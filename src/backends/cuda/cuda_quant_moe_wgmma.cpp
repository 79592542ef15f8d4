// CudaBackend::moe_experts on the grouped FP8 wgmma kernels (moe_wgmma_fp8.cu): FP8 block experts
// as they are, MXFP4 W4A4 experts as FP8 blocks (mxfp4_fp8.cu, exact within 8 binades per K
// block). No host sync.
#include <algorithm>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/quant_kernels.h"
#include "backends/cuda/quant_views.h"

namespace tandem::cuda {

using namespace check;
using k::DT;
using quant::Pieces;

// Each token quantized once (FP8 group scales, or MXFP4 written as FP8 blocks), its e4m3 row
// copied to each of its slots in expert order with the scales transposed for the kernels' TMA
// strips; gate_up over device-listed tiles into h (f32); h quantized from its f32 value the same
// way; down into y; the combine. FP8 weights are read as they are (one group: every expert);
// MXFP4 weights are converted into FP8 blocks with per-row scales a group of experts at a time,
// within mxfp4_convert_bytes_ of scratch, each group's GEMM over its own experts' tiles (every
// expert converted once per chunk: gate_up in the first pass, down in the second).
void CudaBackend::grouped_fp8_moe_chunk(const Tensor& x, const Weight& gate_up, const Weight& down,
                                        const Tensor& idx, const Tensor& weights, Tensor& out) {
  const bool fp8 = gate_up.format == WeightFormat::kFp8Block;
  const k::Fp8W g8 = fp8 ? quant::fp8_view(gate_up) : k::Fp8W{},
                d8 = fp8 ? quant::fp8_view(down) : k::Fp8W{};
  const k::Mx4W g4 = fp8 ? k::Mx4W{} : quant::mx4_view(gate_up),
                d4 = fp8 ? k::Mx4W{} : quant::mx4_view(down);
  const int64_t T = x.size(0), D = x.size(1), E = gate_up.w.size(0), kk = idx.size(1);
  const int64_t I = fp8 ? d8.K : d4.K, P = T * kk;
  const int64_t kbx = (D + 127) / 128, kbh = (I + 127) / 128;
  const int64_t Pp = round_up(P, 4);  // the transposed scales' row length: 16-byte TMA strides
  // Experts per weight group: all of them for FP8; for MXFP4 as many as gate_up's FP8 copy (the
  // larger) and its scales fit in the conversion budget.
  const int64_t per_expert = 2 * I * D + 2 * I * kbx * 4;
  const int64_t G = fp8 ? E : std::clamp<int64_t>(mxfp4_convert_bytes_ / per_expert, 1, E);
  const int64_t max_tiles = k::fp8_moe_wgmma_max_tiles(P, G);
  const int64_t conv = fp8 ? 0 : G;
  Pieces sz;
  sz.take<int32_t>(3 * E + 2 + 2 * P);
  sz.take<int32_t>(4 * max_tiles + 1);
  sz.take<uint8_t>(T * D);
  sz.take<float>(T * kbx);
  sz.take<uint8_t>(P * D);
  sz.take<float>(kbx * Pp);
  sz.take<float>(P * I);
  sz.take<uint8_t>(P * I);
  sz.take<float>(kbh * Pp);
  sz.take<float>(P * D);
  sz.take<uint8_t>(conv * 2 * I * D);
  sz.take<float>(conv * 2 * I * kbx);
  Pieces pc(static_cast<char*>(scratch(sz.bytes())));
  auto* ints = pc.take<int32_t>(3 * E + 2 + 2 * P);   // counts, offsets, perm, inv, active, n
  auto* tiles = pc.take<int32_t>(4 * max_tiles + 1);  // [max_tiles] int4 entries, then the count
  auto* xq = pc.take<uint8_t>(T * D);                 // [T, D] e4m3
  auto* xs = pc.take<float>(T * kbx);                 // [T, kbx]
  auto* xsort = pc.take<uint8_t>(P * D);              // [P, D] e4m3, expert order
  auto* xst = pc.take<float>(kbx * Pp);               // [kbx, Pp]
  auto* h = pc.take<float>(P * I);                    // [P, I] f32
  auto* hq = pc.take<uint8_t>(P * I);                 // [P, I] e4m3
  auto* hst = pc.take<float>(kbh * Pp);               // [kbh, Pp]
  auto* y = pc.take<float>(P * D);                    // [P, D] f32
  auto* wq = pc.take<uint8_t>(conv * 2 * I * D);      // MXFP4: [G, 2I, D] or [G, D, I] e4m3
  auto* ws = pc.take<float>(conv * 2 * I * kbx);      // MXFP4: [G, rows, K / 128]
  int32_t* counts = ints;
  int32_t* offsets = counts + E;
  int32_t* perm = offsets + E + 1;
  int32_t* inv = perm + P;
  int32_t* active = inv + P;
  int32_t* num_tiles = tiles + 4 * max_tiles;
  // rows x [rows, K] (row stride rs) into e4m3 q with scales at m * s_m + b * s_b, by the rule
  // of the weight that reads them.
  auto quantize = [&](const void* src, int64_t rs, DT dt, int64_t rows, int64_t K, bool ue8m0,
                      uint8_t* q, float* sc, int64_t s_m, int64_t s_b) {
    if (fp8)
      k::act_quant_fp8(src, rs, dt, rows, K, 128, ue8m0, q, K, sc, s_m, s_b, stream_);
    else
      k::act_mxfp4_fp8(src, rs, dt, rows, K, q, K, sc, s_m, s_b, stream_);
  };
  k::moe_prepare(idx.data<int32_t>(), P, E, counts, offsets, perm, inv, active, active + E,
                 stream_);
  quantize(x.raw(), x.stride(0), DT::BF16, T, D, gate_up.ue8m0, xq, xs, kbx, 1);
  // offsets[E]: the rows routed to this rank's experts (the others have no sorted row).
  k::moe_gather_fp8(xq, xs, D, kbx, kk, perm, offsets + E, P, xsort, xst, Pp, stream_);
  TD_CUDA_LAUNCH_CHECK();
  for (int pass = 0; pass < 2; ++pass) {  // 0: gate_up into h; 1: down into y
    if (pass == 1) quantize(h, I, DT::F32, P, I, down.ue8m0, hq, hst, 1, Pp);
    for (int64_t e0 = 0; e0 < E; e0 += G) {
      const int64_t ne = std::min(G, E - e0);
      k::Fp8W w = pass == 0 ? g8 : d8;
      if (!fp8) {
        // This group's FP8 copy: per-row scales (bn = 1) of 128-wide K blocks.
        const k::Mx4W& src = pass == 0 ? g4 : d4;
        k::mxfp4_to_fp8(src, e0, ne, wq, ws, stream_);
        w.w = wq, w.s = ws, w.N = src.N, w.K = src.K, w.bn = 1, w.bk = 128;
        w.s_rs = src.K / 128, w.w_es = src.N * src.K, w.s_es = src.N * (src.K / 128);
      }
      k::fp8_moe_wgmma_tiles(counts, e0, ne, tiles, num_tiles, stream_);
      k::fp8_moe_wgmma_gemm(pass == 0, pass == 0 ? xsort : hq, pass == 0 ? xst : hst, Pp, P, counts,
                            offsets, w, e0, ne, tiles, num_tiles, pass == 0 ? h : y, stream_);
      TD_CUDA_LAUNCH_CHECK();
    }
  }
  k::moe_combine(y, DT::F32, inv, weights.data<float>(), T, kk, D, out.raw(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
