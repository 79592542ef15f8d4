#include "ops/weight.h"

#include "core/error.h"

namespace tandem {

Tensor dequantize_to_f32(const Weight& wt) {
  TD_CHECK(wt.w.device().is_cpu(), "dequantize_to_f32 needs a host weight, got {}", wt.w.str());
  if (wt.format == WeightFormat::kDense) return wt.w.to_dtype(DType::F32);
  const int64_t n = wt.out_features(), k = wt.in_features();
  Tensor vals = wt.w.to_f32();  // [N, K] codes decoded (fp8 values or fp4 magnitudes)
  Tensor out = Tensor::empty({n, k}, DType::F32);
  float* o = out.data<float>();
  const float* v = vals.data<float>();
  if (wt.format == WeightFormat::kFp8Block) {
    TD_CHECK(wt.scale.dtype() == DType::F32, "fp8 weight_scale_inv must be f32, got {}",
             wt.scale.str());
    const int64_t sn = (n + wt.block_n - 1) / wt.block_n, sk = (k + wt.block_k - 1) / wt.block_k;
    TD_CHECK(wt.scale.ndim() == 2 && wt.scale.size(0) == sn && wt.scale.size(1) == sk,
             "fp8 scale for [{}, {}] weight with {}x{} blocks must be [{}, {}], got {}", n, k,
             wt.block_n, wt.block_k, sn, sk, wt.scale.str());
    Tensor s = wt.scale.contiguous();
    const float* sp = s.data<float>();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        o[i * k + j] = v[i * k + j] * sp[(i / wt.block_n) * sk + j / wt.block_k];
  } else {
    const int64_t g = wt.block_k;
    TD_CHECK(wt.scale.dtype() == DType::E8M0 || wt.scale.dtype() == DType::U8,
             "mxfp4 scale must be e8m0/u8, got {}", wt.scale.str());
    TD_CHECK(wt.scale.ndim() == 2 && wt.scale.size(0) == n && wt.scale.size(1) == (k + g - 1) / g,
             "mxfp4 scale for [{}, {}] must be [{}, {}], got {}", n, k, n, (k + g - 1) / g,
             wt.scale.str());
    Tensor s = wt.scale.contiguous();
    const auto* sp = static_cast<const uint8_t*>(s.raw());
    const int64_t sk = s.size(1);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) o[i * k + j] = v[i * k + j] * e8m0_to_f32(sp[i * sk + j / g]);
  }
  return out;
}

}  // namespace tandem
