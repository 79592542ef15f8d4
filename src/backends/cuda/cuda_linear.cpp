// CudaBackend: linear and head_matmul (skinny kernel, cuBLASLt, the deterministic tensor-core
// GEMM).
#include <algorithm>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_validate.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_gemm.h"
#include "core/error.h"
#include "core/log.h"

namespace tandem::cuda {

using namespace check;
using k::DT;

namespace {
// out[b][m, n] = sum_k x[b][m, k] w[b][n, k] with the given row (rs) and batch (bs) strides.
k::SkinnyParams gemm_params(const void* x, int64_t x_rs, int64_t x_bs, const void* w, int64_t w_bs,
                            void* out, int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K,
                            int64_t batch) {
  k::SkinnyParams p;
  p.x = x, p.x_rs = x_rs, p.x_bs = x_bs;
  p.w = w, p.w_bs = w_bs;
  p.out = out, p.o_rs = o_rs, p.o_bs = o_bs;
  p.M = M, p.N = N, p.K = K, p.batch = batch;
  return p;
}

// The K-split partial sums of p: [splits][batch][M][N] f32.
size_t split_bytes(const k::SkinnyParams& p) {
  return static_cast<size_t>(p.splits * p.batch * p.M * p.N) * sizeof(float);
}
}  // namespace

void CudaBackend::skinny(const void* x, int64_t x_rs, int64_t x_bs, const Tensor& w, int64_t w_bs,
                         Tensor& out, int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K,
                         int64_t batch) {
  const DT wdt = kdt(w, "linear", "weight");
  const DT odt = kdt(out, "linear", "out");
  k::SkinnyParams p =
      gemm_params(x, x_rs, x_bs, w.raw(), w_bs, out.raw(), o_rs, o_bs, M, N, K, batch);
  p.splits = k::skinny_splits(p, wdt, num_sms_);
  if (p.splits > 1) {
    p.partial = static_cast<float*>(scratch(split_bytes(p)));
    // The tile's last block reduces (no second launch) where the counters suffice.
    if (heuristics::skinny_last_block_reduce(last_block_reduce_, k::skinny_tiles(p, wdt),
                                             kSplitCounters))
      p.counters = split_counters_[in_side_ ? 1 : 0];
  }
  k::skinny_gemm(p, wdt, odt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

bool CudaBackend::tc(const void* x, int64_t x_rs, int64_t x_bs, const Tensor& w, int64_t w_bs,
                     Tensor& out, int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K,
                     int64_t batch) {
  k::SkinnyParams p =
      gemm_params(x, x_rs, x_bs, w.raw(), w_bs, out.raw(), o_rs, o_bs, M, N, K, batch);
  if (w.dtype() != DType::BF16 || !k::tc_gemm_applies(p)) return false;
  p.splits = k::tc_gemm_splits(p, num_sms_);
  if (p.splits > 1) p.partial = static_cast<float*>(scratch(split_bytes(p)));
  k::tc_gemm(p, kdt(out, "linear", "out"), stream_);
  TD_CUDA_LAUNCH_CHECK();
  return true;
}

void CudaBackend::invariant_fallback(const char* op, int64_t N, int64_t K) {
  // A call cuBLASLt's invariant mode refuses (no anchor for the shape, operands under 16-byte
  // alignment) takes the tensor-core kernel (bf16) or the skinny kernel (f32): still
  // batch-invariant, slower, and other bits than cuBLASLt's, so the refusal must not depend on
  // M. It does not: an M the anchor does not accept runs in row chunks (LtGemm::run), and row
  // strides and bases keep their alignment whatever the row count.
  if (warned_fallback_.insert({N, K}).second)
    log_warn(
        "deterministic {} {}x{}: no batch-invariant cuBLASLt algorithm; using the slower "
        "invariant kernel",
        op, N, K);
}

void CudaBackend::linear(const Tensor& x, const Weight& w, Tensor& out) {
  if (w.format != WeightFormat::kDense) {
    // FP8 block and MXFP4 weights stay quantized (cuda_quant.cpp).
    quant_linear(x, w, out);
    return;
  }
  need_dtype(x, DType::BF16, "linear", "x");
  need_contiguous(w.w, "linear", "weight");
  need_cuda(w.w, "linear", "weight");
  need_unit_last(out, "linear", "out");
  const int64_t M = x.size(0), K = x.size(1), N = w.out_features();
  if (M == 0) return;
  // Deterministic mode with the fallbacks forced (tests): no cuBLASLt.
  const bool lt_ok = !deterministic_ || invariant_cublaslt_;
  if (w.w.dtype() == DType::BF16) {
    if (deterministic_ && heuristics::det_linear_tc(N, K, det_tc_max_weights_) &&
        tc(x.raw(), x.stride(0), 0, w.w, 0, out, out.stride(0), 0, M, N, K, 1))
      return;
    if (lt_ok && heuristics::linear_lt_path(M, deterministic_) &&
        lt_->gemm(x.raw(), x.stride(0), w.w.raw(), K, out.raw(), out.stride(0),
                  out.dtype() == DType::F32, M, N, K, stream_))
      return;
    if (deterministic_) {
      if (lt_ok) invariant_fallback("linear", N, K);
      if (tc(x.raw(), x.stride(0), 0, w.w, 0, out, out.stride(0), 0, M, N, K, 1)) return;
    }
  } else if (lt_ok && w.w.dtype() == DType::F32 && out.dtype() == DType::F32 &&
             heuristics::linear_f32_split_path(M, N, deterministic_)) {
    // fp32 weights (router, indexer head weights) at prefill sizes: w = hi + mid + lo exactly in
    // bf16, one bf16 GEMM x . [hi; mid; lo]^T into f32 (each product exact), thirds summed in fp32.
    // The split is redone per call (10 us for a GLM-5.2 layer's router and indexer weights
    // together, ncu) rather than kept: kept, the pieces would take ~0.8 GB over 78 layers.
    const size_t w3_bytes = static_cast<size_t>(3 * N * K * 2 + 255) / 256 * 256;
    auto* w3 = static_cast<char*>(scratch(w3_bytes + static_cast<size_t>(M * 3 * N) * 4));
    auto* p3 = reinterpret_cast<float*>(w3 + w3_bytes);  // [M, 3N]; w3: [3N, K] bf16
    k::split_f32_bf16x3(w.w.data<float>(), N, K, w3, stream_);
    TD_CUDA_LAUNCH_CHECK();
    if (lt_->gemm(x.raw(), x.stride(0), w3, K, p3, 3 * N, true, M, 3 * N, K, stream_)) {
      k::sum_thirds_f32(p3, M, N, out.data<float>(), out.stride(0), stream_);
      TD_CUDA_LAUNCH_CHECK();
      return;
    }
  }
  skinny(x.raw(), x.stride(0), 0, w.w, 0, out, out.stride(0), 0, M, N, K, 1);
}

void CudaBackend::head_matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  need_dtype(x, DType::BF16, "head_matmul", "x");
  need_dtype(w, DType::BF16, "head_matmul", "w");
  need_dtype(out, DType::BF16, "head_matmul", "out");
  need_contiguous(w, "head_matmul", "w");
  need_unit_last(out, "head_matmul", "out");
  const int64_t T = x.size(0), H = x.size(1), K = x.size(2), N = w.size(1);
  const int64_t o_rs = out.stride(0), o_bs = out.stride(1);  // token and head strides
  if (T == 0) return;
  // One strided-batched cuBLASLt GEMM (a batch per head); the skinny kernel (its fallback) has
  // its warps mostly idle on these short rows (K = 128 or 512).
  const bool lt_ok = !deterministic_ || invariant_cublaslt_;
  if (deterministic_ && heuristics::det_linear_tc(N, K, det_tc_max_weights_) &&
      tc(x.raw(), x.stride(0), x.stride(1), w, N * K, out, o_rs, o_bs, T, N, K, H))
    return;
  if (lt_ok && lt_->gemm(x.raw(), x.stride(0), w.raw(), K, out.raw(), o_rs, false, T, N, K, stream_,
                         H, x.stride(1), N * K, o_bs))
    return;
  if (deterministic_) {
    if (lt_ok) invariant_fallback("head_matmul", N, K);
    if (tc(x.raw(), x.stride(0), x.stride(1), w, N * K, out, o_rs, o_bs, T, N, K, H)) return;
  }
  skinny(x.raw(), x.stride(0), x.stride(1), w, N * K, out, o_rs, o_bs, T, N, K, H);
}

}  // namespace tandem::cuda
