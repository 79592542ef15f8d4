#include "ops/weight.h"

#include <cstring>
#include <vector>

#include "core/error.h"

namespace tandem {

Weight Weight::expert(int64_t e) const {
  if (w.ndim() != 3) return *this;
  Weight one = *this;
  one.w = w.select(0, e);
  if (scale.defined()) one.scale = scale.select(0, e);
  return one;
}

Tensor pad_scale_rows(const Tensor& scale, int64_t align) {
  TD_CHECK(scale.device().is_cpu(), "pad_scale_rows needs a host scale, got {}", scale.str());
  const int64_t kb = scale.size(-1), kbp = (kb + align - 1) / align * align;
  if (kbp == kb) return scale.contiguous().clone();
  std::vector<int64_t> padded_shape = scale.shape().vec();
  padded_shape.back() = kbp;
  Tensor padded = Tensor::zeros(Shape(padded_shape), scale.dtype());
  const Tensor src = scale.contiguous();
  const int64_t rows = src.numel() / kb, es = dtype_size(src.dtype());
  const auto* sp = static_cast<const char*>(src.raw());
  auto* dp = static_cast<char*>(padded.raw());
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dp + r * kbp * es, sp + r * kb * es, kb * es);
  return padded;
}

void check_weight_scale(const Weight& wt) {
  if (!wt.quantized()) return;
  const int64_t n = wt.out_features(), k = wt.in_features();
  const int nd = wt.w.ndim();
  TD_CHECK(
      wt.scale.defined() && wt.scale.ndim() == nd && (nd == 2 || wt.scale.size(0) == wt.w.size(0)),
      "scale {} does not match weight {}", wt.scale.defined() ? wt.scale.str() : "(none)",
      wt.w.str());
  if (wt.format == WeightFormat::kFp8Block) {
    TD_CHECK(wt.scale.dtype() == DType::F32, "fp8 weight_scale_inv must be f32, got {}",
             wt.scale.str());
    const int64_t sn = wt.n_blocks(), sk = wt.k_blocks();
    TD_CHECK(wt.scale.size(-2) == sn && wt.scale.size(-1) == sk,
             "fp8 scale for [{}, {}] weight with {}x{} blocks must be [{}, {}], got {}", n, k,
             wt.block_n, wt.block_k, sn, sk, wt.scale.str());
  } else {
    const int64_t g = wt.block_k;
    TD_CHECK(wt.scale.dtype() == DType::E8M0 || wt.scale.dtype() == DType::U8,
             "mxfp4 scale must be e8m0/u8, got {}", wt.scale.str());
    TD_CHECK(wt.scale.size(-2) == n && wt.scale.size(-1) == (k + g - 1) / g,
             "mxfp4 scale for [{}, {}] must be [{}, {}], got {}", n, k, n, (k + g - 1) / g,
             wt.scale.str());
  }
}

Tensor dequantize_to_f32(const Weight& wt) {
  TD_CHECK(wt.w.device().is_cpu(), "dequantize_to_f32 needs a host weight, got {}", wt.w.str());
  TD_CHECK(wt.w.ndim() == 2, "dequantize_to_f32 takes one [N, K] weight, got {}", wt.w.str());
  if (wt.format == WeightFormat::kDense) return wt.w.to_dtype(DType::F32);
  check_weight_scale(wt);
  const int64_t n = wt.out_features(), k = wt.in_features();
  Tensor vals = wt.w.to_f32();  // [N, K] codes decoded (fp8 values or fp4 magnitudes)
  Tensor out = Tensor::empty({n, k}, DType::F32);
  float* o = out.data<float>();
  const float* v = vals.data<float>();
  if (wt.format == WeightFormat::kFp8Block) {
    const int64_t sk = wt.k_blocks();
    Tensor s = wt.scale.contiguous();
    const float* sp = s.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        o[i * k + j] = v[i * k + j] * sp[(i / wt.block_n) * sk + j / wt.block_k];
  } else {
    const int64_t g = wt.block_k;
    Tensor s = wt.scale.contiguous();
    const auto* sp = static_cast<const uint8_t*>(s.raw());
    const int64_t sk = s.size(1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) o[i * k + j] = v[i * k + j] * e8m0_to_f32(sp[i * sk + j / g]);
  }
  return out;
}

}  // namespace tandem
