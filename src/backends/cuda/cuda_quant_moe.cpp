// CudaBackend::moe_experts on quantized experts (FP8 block, MXFP4): the grouped expert kernels
// of quant_kernels.h (graph-capturable, batch-invariant), or for many rows per expert one
// cuBLASLt GEMM per expert (block-scaled FP8; MXFP4 dequantized to bf16).
#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_fp8.h"
#include "backends/cuda/lt_gemm.h"
#include "backends/cuda/quant_kernels.h"
#include "backends/cuda/quant_views.h"
#include "core/error.h"

namespace tandem::cuda {

using namespace check;
using k::DT;
using quant::Pieces;

void CudaBackend::quant_moe_chunk(const Tensor& x, const Weight& gate_up, const Weight& down,
                                  const Tensor& idx, const Tensor& weights, Tensor& out,
                                  bool host_path) {
  const ActQuant act_gu = gate_up.act, act_dn = down.act;
  const bool ue8m0_gu = gate_up.ue8m0, ue8m0_dn = down.ue8m0;
  const char* op = "moe_experts";
  quant::check_quant_weight(gate_up, op, "gate_up");
  quant::check_quant_weight(down, op, "down");
  TD_CHECK(gate_up.format == down.format, "cuda moe_experts: gate_up and down formats differ");
  const bool fp8 = gate_up.format == WeightFormat::kFp8Block;
  if (fp8 && (act_gu != ActQuant::kFp8Group || act_dn != ActQuant::kFp8Group))
    fail("cuda moe_experts: FP8 block experts need FP8 group activations on the GPU");
  if (!fp8 && (act_gu == ActQuant::kFp8Group || act_dn == ActQuant::kFp8Group))
    fail("cuda moe_experts: MXFP4 experts take unquantized or MXFP4 activations");
  const int64_t T = x.size(0), D = x.size(1), E = gate_up.w.size(0), kk = idx.size(1);
  const int64_t I = gate_up.w.size(1) / 2, P = T * kk;
  TD_CHECK(gate_up.in_features() == D && down.out_features() == D && down.in_features() == I &&
               down.experts() == E,
           "cuda moe_experts: gate_up {} and down {} do not fit x {}", gate_up.w.str(),
           down.w.str(), x.str());
  TD_CHECK(I % 16 == 0,
           "cuda moe_experts: quantized experts need the intermediate size {} to be a "
           "multiple of 16",
           I);
  const k::Fp8W g8 = fp8 ? quant::fp8_view(gate_up) : k::Fp8W{},
                d8 = fp8 ? quant::fp8_view(down) : k::Fp8W{};
  const k::Mx4W g4 = fp8 ? k::Mx4W{} : quant::mx4_view(gate_up),
                d4 = fp8 ? k::Mx4W{} : quant::mx4_view(down);
  const bool qx = !fp8 && act_gu == ActQuant::kMxfp4, qh = !fp8 && act_dn == ActQuant::kMxfp4;
  // The grouped FP8 wgmma kernels take FP8 block experts, and MXFP4 W4A4 experts as FP8 blocks.
  const bool grouped_fits = fp8 ? k::fp8_moe_wgmma_applies(g8, d8, E)
                                : qx && qh && k::mxfp4_fp8_applies(g4) && k::mxfp4_fp8_applies(d4);
  if (grouped_fits &&
      heuristics::moe_fp8_wgmma(moe_fp8_wgmma_mode_, host_path, deterministic_, fp8)) {
    grouped_fp8_moe_chunk(x, gate_up, down, idx, weights, out);
    return;
  }
  // The host path needs cuBLASLt's block layout for FP8 (anything else keeps the device path).
  host_path = host_path && (!fp8 || (quant::lt_block_layout(g8) && quant::lt_block_layout(d8)));
  const int64_t kbx = fp8 ? (D + g8.bk - 1) / g8.bk : 0, kbh = fp8 ? (I + d8.bk - 1) / d8.bk : 0;

  // Device path: the grouped expert kernels (graph-capturable, batch-invariant).
  // h stays f32 where the down weight quantizes it (FP8; MXFP4 with MXFP4 activations): it is
  // quantized from its f32 value, as the contract does, not from a bf16 rounding of it.
  const bool h32 = fp8 || qh;
  auto device_path = [&] {
    Pieces sz;
    sz.take<int32_t>(3 * E + 2 + 2 * P);
    sz.take<uint8_t>(P * I * (h32 ? 4 : 2));
    sz.take<float>(P * D);
    sz.take<uint16_t>(fp8 || qx ? T * D : 0);
    sz.take<float>(T * kbx);
    sz.take<uint16_t>(fp8 || qh ? P * I : 0);
    sz.take<float>(P * kbh);
    Pieces pc(static_cast<char*>(scratch(sz.bytes())));
    auto* ints = pc.take<int32_t>(3 * E + 2 + 2 * P);     // counts, offsets, perm, inv, active, n
    auto* h = pc.take<uint8_t>(P * I * (h32 ? 4 : 2));    // [P, I] f32 or bf16
    auto* y = pc.take<float>(P * D);                      // [P, D]
    auto* xq = pc.take<uint16_t>(fp8 || qx ? T * D : 0);  // [T, D] e4m3 (FP8) / bf16 (MXFP4)
    auto* xs = pc.take<float>(T * kbx);                   // [T, kb]
    auto* hq = pc.take<uint16_t>(fp8 || qh ? P * I : 0);  // [P, I] e4m3 (FP8) / bf16 (MXFP4)
    auto* hs = pc.take<float>(P * kbh);                   // [P, kb]
    k::MoeGroups g;
    int32_t* counts = ints;
    int32_t* offsets = counts + E;
    int32_t* perm = offsets + E + 1;
    int32_t* inv = perm + P;
    int32_t* active = inv + P;
    int32_t* num_active = active + E;
    k::moe_prepare(idx.data<int32_t>(), P, E, counts, offsets, perm, inv, active, num_active,
                   stream_);
    TD_CUDA_LAUNCH_CHECK();
    g.counts = counts, g.offsets = offsets, g.perm = perm, g.active = active;
    g.num_active = num_active, g.max_active = std::min(E, P), g.k = kk, g.pairs = P;
    // Each activation quantizer triggers its dependent early (after its own wait), so the
    // expert kernel behind it fetches its first weight chunks while it quantizes.
    if (fp8) {
      g.grouping_before_wait = true;
      k::act_quant_fp8(x.raw(), x.stride(0), DT::BF16, T, D, g8.bk, ue8m0_gu, xq, D, xs, kbx, 1,
                       stream_, /*early=*/true);
      k::fp8_moe_gate_up(xq, D, xs, kbx, g, g8, I, h, DT::F32, stream_, quant_ring_);
      k::act_quant_fp8(h, I, DT::F32, P, I, d8.bk, ue8m0_dn, hq, I, hs, kbh, 1, stream_,
                       /*early=*/true);
      k::fp8_moe_down(hq, I, hs, kbh, g, d8, y, stream_, quant_ring_);
    } else {
      // Quantized activations are written in the kernels' pair order (no permute in them).
      if (qx)
        k::act_qdq_mxfp4(x.raw(), x.stride(0), DT::BF16, T, D, xq, D, stream_, /*early=*/true,
                         /*paired=*/true);
      g.grouping_before_wait = qx;
      k::mxfp4_moe_gate_up(qx ? static_cast<const void*>(xq) : x.raw(), qx ? D : x.stride(0), g, g4,
                           I, h, h32 ? DT::F32 : DT::BF16, stream_, quant_ring_, qx);
      if (qh)
        k::act_qdq_mxfp4(h, I, DT::F32, P, I, hq, I, stream_, /*early=*/true, /*paired=*/true);
      g.grouping_before_wait = qh;
      k::mxfp4_moe_down(qh ? static_cast<const void*>(hq) : h, I, g, d4, y, stream_, quant_ring_,
                        qh);
    }
    TD_CUDA_LAUNCH_CHECK();
    k::moe_combine(y, DT::F32, inv, weights.data<float>(), T, kk, D, out.raw(), stream_);
    TD_CUDA_LAUNCH_CHECK();
  };
  if (!host_path) {
    device_path();
    return;
  }

  // Host path (many rows per expert, not capturing, not deterministic): the grouping's counts
  // come back to the host (one sync), then one cuBLASLt GEMM per expert on its gathered rows.
  // FP8: each expert's rows padded to a multiple of 4 (block-scaled cuBLASLt), quantized per
  // expert into that layout. MXFP4: each expert dequantized into bf16, then the bf16 GEMM.
  // Where the down weight quantizes h, gate|up and h stay f32 (h is quantized from its f32
  // value, as the contract does) when cuBLASLt can write f32.
  const int64_t Pp = P + 3 * E;  // rows with every expert padded to a multiple of 4
  const int64_t rows = fp8 ? Pp : P;
  int32_t* ints = static_cast<int32_t*>(scratch(static_cast<size_t>(3 * E + 2 + 2 * P) * 4));
  int32_t* counts = ints;
  int32_t* offsets = counts + E;
  int32_t* perm = offsets + E + 1;
  int32_t* inv = perm + P;
  int32_t* active = inv + P;
  k::moe_prepare(idx.data<int32_t>(), P, E, counts, offsets, perm, inv, active, active + E,
                 stream_);
  TD_CUDA_LAUNCH_CHECK();
  std::vector<int32_t> cnt(static_cast<size_t>(E)), off(static_cast<size_t>(E));
  TD_CUDA_CHECK(cudaMemcpyAsync(cnt.data(), counts, E * 4, cudaMemcpyDeviceToHost, stream_));
  TD_CUDA_CHECK(cudaMemcpyAsync(off.data(), offsets, E * 4, cudaMemcpyDeviceToHost, stream_));
  TD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  // Rows routed to this rank's experts: under expert parallelism the other pairs (id -1) have no
  // row in perm.
  int64_t valid = 0;
  for (int32_t c : cnt) valid += c;
  // f32 gate|up and h: FP8 if every expert's block-scaled GEMM can write f32 (else bf16, or the
  // device path if not even bf16 has an algorithm), MXFP4 with MXFP4 activations.
  bool g32 = !fp8 && qh;
  if (fp8) {
    LtFp8& l = lt8();
    bool ok32 = true, ok16 = true;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t np = round_up(cnt[e], 4);
      if (np == 0) continue;
      ok32 = ok32 && l.supported(LtFp8::Scales::kBlock128, true, np, 2 * I, D, 2 * I);
      ok16 = ok16 && l.supported(LtFp8::Scales::kBlock128, false, np, D, I, D);
      if (!ok32) ok16 = ok16 && l.supported(LtFp8::Scales::kBlock128, false, np, 2 * I, D, 2 * I);
    }
    if (!ok16) {
      device_path();
      return;
    }
    g32 = ok32;
  }
  const int64_t ge = g32 ? 4 : 2;  // bytes per gate|up and h element
  Pieces sz;
  sz.take<int32_t>(3 * E + 2 + 2 * P);
  sz.take<uint16_t>(P * D);                   // gathered x (bf16)
  sz.take<uint8_t>(rows * 2 * I * ge);        // g
  sz.take<uint8_t>(rows * I * ge);            // h
  sz.take<uint16_t>(!fp8 && qh ? P * I : 0);  // h quantize-dequantized (MXFP4 W4A4)
  sz.take<float>(P * D);                      // y (sorted rows)
  sz.take<uint8_t>(fp8 ? Pp * D : 0);         // xq
  sz.take<float>(fp8 ? Pp * kbx : 0);         // xs
  sz.take<uint8_t>(fp8 ? Pp * I : 0);         // hq
  sz.take<float>(fp8 ? Pp * kbh : 0);         // hs
  sz.take<uint16_t>(fp8 ? Pp * D : 0);        // yp: padded down output (bf16)
  sz.take<int32_t>(fp8 ? E + P : 0);          // pad offsets, the pairs' padded rows
  sz.take<uint16_t>(fp8 ? 0 : 2 * I * D);     // one expert's gate_up, dequantized
  sz.take<uint16_t>(fp8 ? 0 : D * I);         // one expert's down, dequantized
  Pieces pc(static_cast<char*>(scratch(sz.bytes())));
  // The grouping stays where moe_prepare wrote it: at the start of this same buffer, or, if the
  // scratch had to grow, in the outgrown buffer, which the backend keeps alive.
  pc.take<int32_t>(3 * E + 2 + 2 * P);
  auto* xg = pc.take<uint16_t>(P * D);                   // [P, D]
  auto* gg = pc.take<uint8_t>(rows * 2 * I * ge);        // [rows, 2I] bf16 or f32
  auto* hh = pc.take<uint8_t>(rows * I * ge);            // [rows, I] bf16 or f32
  auto* hm = pc.take<uint16_t>(!fp8 && qh ? P * I : 0);  // [P, I] bf16
  auto* y = pc.take<float>(P * D);                       // [P, D]
  auto* xq = pc.take<uint8_t>(fp8 ? Pp * D : 0);
  auto* xs = pc.take<float>(fp8 ? Pp * kbx : 0);
  auto* hq = pc.take<uint8_t>(fp8 ? Pp * I : 0);
  auto* hs = pc.take<float>(fp8 ? Pp * kbh : 0);
  auto* yp = pc.take<uint16_t>(fp8 ? Pp * D : 0);
  auto* pad = pc.take<int32_t>(fp8 ? E + P : 0);  // [E] each expert's first padded row, [P] rows
  auto* wg = pc.take<uint16_t>(fp8 ? 0 : 2 * I * D);
  auto* wdn = pc.take<uint16_t>(fp8 ? 0 : D * I);
  const DT gdt = g32 ? DT::F32 : DT::BF16;
  if (valid > 0) k::moe_gather_x(x.raw(), x.stride(0), kk, perm, valid, D, xg, stream_);
  TD_CUDA_LAUNCH_CHECK();
  if (fp8) {
    // One launch quantizes every expert's rows into its padded block (x, then h) and the pairs'
    // rows are remapped for the combine, so that per expert only the two GEMMs are launched (a
    // prefill step of GLM-5.2 has all 256 experts: two quantizers and a copy each were 768
    // launches more per layer).
    LtFp8& l = lt8();
    std::vector<int32_t> pad_off(static_cast<size_t>(E));
    int64_t po = 0;
    for (int64_t e = 0; e < E; ++e)
      pad_off[e] = static_cast<int32_t>(po), po += round_up(cnt[e], 4);
    // From pageable memory: the copy is staged before the call returns.
    TD_CUDA_CHECK(cudaMemcpyAsync(pad, pad_off.data(), E * 4, cudaMemcpyHostToDevice, stream_));
    k::act_quant_fp8_experts(xg, D, DT::BF16, false, valid, D, ue8m0_gu, offsets, pad, E, xq, D, xs,
                             stream_);
    TD_CUDA_LAUNCH_CHECK();
    for (int64_t e = 0; e < E; ++e) {
      const int64_t np = round_up(cnt[e], 4), pe = pad_off[e];
      if (np == 0) continue;
      // Scales of this expert's GEMM: [kb, np] at its own region (kb * np + m).
      if (!l.gemm(LtFp8::Scales::kBlock128, xq + pe * D, xs + pe * kbx, g8.w + e * g8.w_es,
                  g8.s + e * g8.s_es, gg + pe * 2 * I * ge, 2 * I, g32, np, 2 * I, D, stream_))
        fail("cuda moe_experts: no block-scaled cuBLASLt algorithm for {} x {} x {}", np, 2 * I, D);
    }
    if (po > 0) k::silu_mul(gg, 2 * I, hh, po, I, gdt, stream_);
    TD_CUDA_LAUNCH_CHECK();
    k::act_quant_fp8_experts(hh, I, gdt, true, valid, I, ue8m0_dn, offsets, pad, E, hq, I, hs,
                             stream_);
    TD_CUDA_LAUNCH_CHECK();
    for (int64_t e = 0; e < E; ++e) {
      const int64_t np = round_up(cnt[e], 4), pe = pad_off[e];
      if (np == 0) continue;
      if (!l.gemm(LtFp8::Scales::kBlock128, hq + pe * I, hs + pe * kbh, d8.w + e * d8.w_es,
                  d8.s + e * d8.s_es, yp + pe * D, D, false, np, D, I, stream_))
        fail("cuda moe_experts: no block-scaled cuBLASLt algorithm for {} x {} x {}", np, D, I);
    }
    // The combine reads y (bf16) through each pair's padded row.
    k::moe_pad_rows(idx.data<int32_t>(), inv, offsets, pad, P, E, pad + E, stream_);
    k::moe_combine(yp, DT::BF16, pad + E, weights.data<float>(), T, kk, D, out.raw(), stream_);
    TD_CUDA_LAUNCH_CHECK();
    return;
  }
  if (qx && valid > 0) {
    k::act_qdq_mxfp4(xg, D, DT::BF16, valid, D, xg, D, stream_);
    TD_CUDA_LAUNCH_CHECK();
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = cnt[e], o = off[e];
    if (n == 0) continue;
    k::mxfp4_dequant_bf16(g4, e, wg, stream_);
    TD_CUDA_LAUNCH_CHECK();
    if (!lt_->gemm(xg + o * D, D, wg, D, gg + o * 2 * I * ge, 2 * I, g32, n, 2 * I, D, stream_)) {
      Tensor wt = Tensor::wrap(wg, {2 * I, D}, DType::BF16, Device::cuda());
      Tensor gt = Tensor::wrap(gg + o * 2 * I * ge, {n, 2 * I}, g32 ? DType::F32 : DType::BF16,
                               Device::cuda());
      skinny(xg + o * D, D, 0, wt, 0, gt, 2 * I, 0, n, 2 * I, D, 1);
    }
  }
  if (valid > 0) k::silu_mul(gg, 2 * I, hh, valid, I, gdt, stream_);
  TD_CUDA_LAUNCH_CHECK();
  const uint16_t* hin = reinterpret_cast<const uint16_t*>(hh);  // [P, I] bf16, the down input
  if (qh && valid > 0) {
    k::act_qdq_mxfp4(hh, I, gdt, valid, I, hm, I, stream_);
    TD_CUDA_LAUNCH_CHECK();
    hin = hm;
  }
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = cnt[e], o = off[e];
    if (n == 0) continue;
    k::mxfp4_dequant_bf16(d4, e, wdn, stream_);
    TD_CUDA_LAUNCH_CHECK();
    if (!lt_->gemm(hin + o * I, I, wdn, I, y + o * D, D, true, n, D, I, stream_)) {
      Tensor wt = Tensor::wrap(wdn, {D, I}, DType::BF16, Device::cuda());
      Tensor ye = Tensor::wrap(y + o * D, {n, D}, DType::F32, Device::cuda());
      skinny(hin + o * I, I, 0, wt, 0, ye, D, 0, n, D, I, 1);
    }
  }
  k::moe_combine(y, DT::F32, inv, weights.data<float>(), T, kk, D, out.raw(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
