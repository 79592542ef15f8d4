// CudaBackend::linear on quantized weights (FP8 block, MXFP4), which stay quantized on the GPU
// (docs/quantization.md is the numerics contract). Decode sizes run the weight-streaming kernels
// of quant_kernels.h (batch-invariant, graph-capturable); prefill sizes run cuBLASLt
// (block-scaled FP8, or per-tensor FP8 with a scale epilogue for per-channel FP8) or, for MXFP4,
// a bf16 dequantization of the weight and the bf16 GEMM.
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

LtFp8& CudaBackend::lt8() {
  if (!lt8_) lt8_ = std::make_unique<LtFp8>();
  lt8_->use_workspace(in_side_ ? 1 : 0);
  return *lt8_;
}

void CudaBackend::quant_linear(const Tensor& x, const Weight& w, Tensor& out) {
  const char* op = "linear";
  need_dtype(x, DType::BF16, op, "x");
  need_unit_last(x, op, "x");
  need_vec(x, {x.stride(0)}, op, "x");
  need_unit_last(out, op, "out");
  quant::check_quant_weight(w, op, "weight");
  kdt(out, op, "out");
  if (x.size(0) == 0) return;
  if (w.format == WeightFormat::kFp8Block)
    fp8_linear(x, w, out);
  else
    mxfp4_linear(x, w, out);
}

void CudaBackend::fp8_linear(const Tensor& x, const Weight& w, Tensor& out) {
  const bool ue8m0 = w.ue8m0;
  const DT odt = kdt(out, "linear", "out");
  const int64_t M = x.size(0), K = w.in_features(), N = w.out_features();
  if (w.act != ActQuant::kFp8Group)
    fail("cuda linear: FP8 block weights need FP8 group activations (kFp8Group) on the GPU");
  const k::Fp8W v = quant::fp8_view(w);
  const int64_t kb = (K + v.bk - 1) / v.bk;
  const size_t out_align = odt == DT::F32 ? 16 : 8;  // the kernel's 4-column stores
  if (heuristics::fp8_linear_wgmma(fp8_linear_wgmma_mode_, deterministic_) &&
      k::fp8_linear_wgmma_applies(v) && out.stride(0) % 4 == 0 &&
      reinterpret_cast<uintptr_t>(out.raw()) % out_align == 0) {
    // The grouped FP8 wgmma kernel, its M rows one expert: scales transposed ([kb, Mp]).
    const int64_t Mp = round_up(M, 4);
    Pieces sz;
    sz.take<uint8_t>(M * K);
    sz.take<float>(kb * Mp);
    Pieces pc(static_cast<char*>(scratch(sz.bytes())));
    auto* xq = pc.take<uint8_t>(M * K);  // [M, K] e4m3
    auto* xs = pc.take<float>(kb * Mp);  // [kb, Mp]
    k::act_quant_fp8(x.raw(), x.stride(0), DT::BF16, M, K, v.bk, ue8m0, xq, K, xs, 1, Mp, stream_);
    k::fp8_linear_wgmma(xq, xs, Mp, M, v, out.raw(), out.stride(0), odt, stream_);
    TD_CUDA_LAUNCH_CHECK();
    return;
  }
  const bool lt = heuristics::quant_lt_path(M, deterministic_) && odt == DT::BF16;
  if (lt && quant::lt_block_layout(v)) {
    // Block-scaled cuBLASLt: M padded to a multiple of 4, activation scales at kb * Mp + m; the
    // padding rows are computed from whatever the scratch holds and never copied out.
    const int64_t Mp = round_up(M, 4);
    const bool direct = Mp == M && aligned16(out) && out.stride(0) % 8 == 0;
    Pieces sz;
    sz.take<uint8_t>(Mp * K);
    sz.take<float>(kb * Mp);
    sz.take<uint16_t>(direct ? 0 : Mp * N);
    Pieces pc(static_cast<char*>(scratch(sz.bytes())));
    auto* xq = pc.take<uint8_t>(Mp * K);  // [Mp, K] e4m3
    auto* xs = pc.take<float>(kb * Mp);   // [kb, Mp]
    auto* d = pc.take<uint16_t>(Mp * N);  // [Mp, N] bf16 (unless out takes it directly)
    k::act_quant_fp8(x.raw(), x.stride(0), DT::BF16, M, K, v.bk, ue8m0, xq, K, xs, 1, Mp, stream_);
    TD_CUDA_LAUNCH_CHECK();
    if (lt8().gemm(LtFp8::Scales::kBlock128, xq, xs, v.w, v.s, direct ? out.raw() : d,
                   direct ? out.stride(0) : N, false, Mp, N, K, stream_)) {
      if (!direct)
        TD_CUDA_CHECK(cudaMemcpy2DAsync(out.raw(), out.stride(0) * 2, d, N * 2, N * 2, M,
                                        cudaMemcpyDeviceToDevice, stream_));
      return;
    }
  } else if (lt && quant::per_channel(v)) {
    // Per-channel: a per-tensor FP8 GEMM with unit scales into f32, then out = acc * s_m * w_n.
    Pieces sz;
    sz.take<uint8_t>(M * K);
    sz.take<float>(M);
    sz.take<float>(M * N);
    Pieces pc(static_cast<char*>(scratch(sz.bytes())));
    auto* xq = pc.take<uint8_t>(M * K);  // [M, K] e4m3
    auto* xs = pc.take<float>(M);        // [M]
    auto* acc = pc.take<float>(M * N);   // [M, N]
    k::act_quant_fp8(x.raw(), x.stride(0), DT::BF16, M, K, K, ue8m0, xq, K, xs, 1, M, stream_);
    TD_CUDA_LAUNCH_CHECK();
    LtFp8& l = lt8();
    if (l.gemm(LtFp8::Scales::kTensor, xq, l.unit_scale(), v.w, l.unit_scale(), acc, N, true, M, N,
               K, stream_)) {
      k::scale_rows_cols(acc, M, N, xs, v.s, v.s_rs, out.raw(), out.stride(0), odt, stream_);
      TD_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  // The weight stream (any M; the path of decode sizes and of deterministic mode).
  k::QGemvParams p;
  p.M = M;
  p.splits = k::quant_gemv_splits(N, K, num_sms_);
  p.ring = quant_ring_;
  if (p.splits > 1 && heuristics::skinny_last_block_reduce(
                          last_block_reduce_, k::quant_gemv_tiles(M, N), kSplitCounters))
    p.counters = split_counters_[in_side_ ? 1 : 0];
  Pieces sz;
  sz.take<uint8_t>(M * K);
  sz.take<float>(M * kb);
  sz.take<float>(p.splits > 1 ? p.splits * M * N : 0);
  Pieces pc(static_cast<char*>(scratch(sz.bytes())));
  auto* xq = pc.take<uint8_t>(M * K);                               // [M, K] e4m3
  auto* xs = pc.take<float>(M * kb);                                // [M, kb]
  p.partial = pc.take<float>(p.splits > 1 ? p.splits * M * N : 0);  // [splits, M, N]
  k::act_quant_fp8(x.raw(), x.stride(0), DT::BF16, M, K, v.bk, ue8m0, xq, K, xs, kb, 1, stream_,
                   /*early=*/true);
  TD_CUDA_LAUNCH_CHECK();
  p.x = xq, p.x_rs = K, p.xscale = xs, p.xs_rs = kb;
  p.out = out.raw(), p.o_rs = out.stride(0), p.out_dt = odt;
  k::fp8_gemv(p, v, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::mxfp4_linear(const Tensor& x, const Weight& w, Tensor& out) {
  const DT odt = kdt(out, "linear", "out");
  const int64_t M = x.size(0), K = w.in_features(), N = w.out_features();
  if (w.act == ActQuant::kFp8Group)
    fail("cuda linear: MXFP4 weights take unquantized or MXFP4 activations, not FP8 groups");
  const k::Mx4W v = quant::mx4_view(w);
  const bool qdq = w.act == ActQuant::kMxfp4;
  const bool lt = heuristics::quant_lt_path(M, deterministic_);
  k::QGemvParams p;
  p.M = M;
  p.splits = lt ? 1 : k::quant_gemv_splits(N, K, num_sms_);
  p.ring = quant_ring_;
  if (p.splits > 1 && heuristics::skinny_last_block_reduce(
                          last_block_reduce_, k::quant_gemv_tiles(M, N), kSplitCounters))
    p.counters = split_counters_[in_side_ ? 1 : 0];
  Pieces sz;
  sz.take<uint16_t>(qdq ? M * K : 0);
  sz.take<uint16_t>(lt ? N * K : 0);
  sz.take<float>(p.splits > 1 ? p.splits * M * N : 0);
  Pieces pc(static_cast<char*>(scratch(sz.bytes())));
  auto* xa = pc.take<uint16_t>(qdq ? M * K : 0);  // [M, K] bf16, quantize-dequantized
  auto* wd = pc.take<uint16_t>(lt ? N * K : 0);   // [N, K] bf16, the dequantized weight
  p.partial = pc.take<float>(p.splits > 1 ? p.splits * M * N : 0);  // [splits, M, N]
  const void* xin = x.raw();
  int64_t xrs = x.stride(0);
  if (qdq) {  // the weight stream's input in its pair order, the GEMM's in the natural one
    k::act_qdq_mxfp4(x.raw(), x.stride(0), DT::BF16, M, K, xa, K, stream_, /*early=*/!lt,
                     /*paired=*/!lt);
    TD_CUDA_LAUNCH_CHECK();
    xin = xa, xrs = K;
  }
  if (lt) {
    k::mxfp4_dequant_bf16(v, 0, wd, stream_);
    TD_CUDA_LAUNCH_CHECK();
    if (lt_->gemm(xin, xrs, wd, K, out.raw(), out.stride(0), odt == DT::F32, M, N, K, stream_))
      return;
    Tensor wt = Tensor::wrap(wd, {N, K}, DType::BF16, Device::cuda());
    skinny(xin, xrs, 0, wt, 0, out, out.stride(0), 0, M, N, K, 1);
    return;
  }
  p.x = xin, p.x_rs = xrs, p.x_paired = qdq;
  p.out = out.raw(), p.o_rs = out.stride(0), p.out_dt = odt;
  k::mxfp4_gemv(p, v, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

}  // namespace tandem::cuda
