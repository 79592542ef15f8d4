// Host helpers shared by the quantized-weight ops (cuda_quant.cpp, cuda_quant_moe.cpp): the
// kernels' views of a Weight, its checks, and one op's scratch cut into aligned pieces.
// Host-only (g++).
#pragma once

#include <algorithm>

#include "backends/cuda/cuda_validate.h"
#include "backends/cuda/quant_kernels.h"
#include "core/error.h"
#include "ops/weight.h"

namespace tandem::cuda::quant {

using namespace check;

// One op's scratch cut into 256-byte aligned pieces: sized first (base null), then carved.
class Pieces {
 public:
  explicit Pieces(char* base = nullptr) : base_(base) {}
  template <typename T>
  T* take(int64_t count) {
    off_ = (off_ + 255) / 256 * 256;
    T* p = base_ ? reinterpret_cast<T*>(base_ + off_) : nullptr;
    off_ += static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(T);
    return p;
  }
  size_t bytes() const { return off_ + 256; }

 private:
  char* base_;
  size_t off_ = 0;
};

// The kernels' view of expert (or only) weight w: [E, N, K] e4m3 or [E, N, K/2] fp4x2 with
// [E, nb, >= kb] scales (rows through the stride).
inline k::Fp8W fp8_view(const Weight& w) {
  const bool experts = w.w.ndim() == 3;
  k::Fp8W v;
  v.w = static_cast<const uint8_t*>(w.w.raw());
  v.s = w.scale.data<float>();
  v.s_rs = w.scale.stride(-2);
  v.N = w.w.size(-2);
  v.K = w.w.size(-1);
  v.bn = std::min(w.block_n, v.N);
  v.bk = std::min(w.block_k, v.K);
  v.w_es = experts ? w.w.stride(0) : 0;
  v.s_es = experts ? w.scale.stride(0) : 0;
  return v;
}
inline k::Mx4W mx4_view(const Weight& w) {
  const bool experts = w.w.ndim() == 3;
  k::Mx4W v;
  v.w = static_cast<const uint8_t*>(w.w.raw());
  v.s = static_cast<const uint8_t*>(w.scale.raw());
  v.s_rs = w.scale.stride(-2);
  v.N = w.w.size(-2);
  v.K = w.w.size(-1) * 2;
  v.w_es = experts ? w.w.stride(0) : 0;
  v.s_es = experts ? w.scale.stride(0) : 0;
  return v;
}

inline void check_quant_weight(const Weight& w, const char* op, const char* what) {
  need_cuda(w.w, op, what);
  need_contiguous(w.w, op, what);
  need_unit_last(w.scale, op, what);
  if (w.format == WeightFormat::kFp8Block) {
    need_dtype(w.w, DType::F8_E4M3, op, what);
    need_dtype(w.scale, DType::F32, op, what);
    const k::Fp8W v = fp8_view(w);
    if (!k::fp8_decode_applies(v) || !k::act_quant_fp8_applies(v.K, v.bk))
      fail(
          "cuda {}: FP8 {} needs K a multiple of 16 up to 32768 and block_k a multiple of 128 "
          "(or >= K), got {}",
          op, what, w.w.str());
  } else {
    // Quark checkpoints and the dummy weights store the e8m0 scales as plain bytes (U8).
    if (w.w.dtype() != DType::FP4X2 && w.w.dtype() != DType::U8)
      fail("cuda {}: MXFP4 {} must be fp4x2 (or bytes), got {}", op, what, w.w.str());
    if (w.scale.dtype() != DType::E8M0 && w.scale.dtype() != DType::U8)
      fail("cuda {}: MXFP4 {} scales must be e8m0 (or bytes), got {}", op, what, w.scale.str());
    if (w.block_k != 32 || !k::mxfp4_decode_applies(mx4_view(w)))
      fail("cuda {}: MXFP4 {} needs groups of 32 and K a multiple of 32, got {} (groups of {})", op,
           what, w.w.str(), w.block_k);
  }
}

// cuBLASLt's block-scaled layout: 128 x 128 blocks, K-block count padded to a multiple of 4.
inline bool lt_block_layout(const k::Fp8W& v) {
  const int64_t kb = (v.K + 127) / 128;
  return v.bn == 128 && v.bk == 128 && v.s_rs == (kb + 3) / 4 * 4 && v.K % 16 == 0;
}
inline bool per_channel(const k::Fp8W& v) {
  return v.bn == 1 && v.bk >= v.K && v.K % 16 == 0;
}

}  // namespace tandem::cuda::quant
