#include "backends/cpu/cpu_quant.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_math.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tandem::cpu {

namespace {

// The reference's act_quant scale for one group: max(amax, 1e-4) / 448, rounded up to a power
// of two under scale_fmt ue8m0.
float fp8_group_scale(float amax, bool ue8m0) {
  float s = std::max(amax, 1e-4f) / 448.0f;
  if (ue8m0) s = std::exp2(std::ceil(std::log2(s)));
  return s;
}

// OCP MX: the shared exponent is floor(log2(amax)) minus e2m1's largest exponent (2).
float mxfp4_group_scale(float amax) {
  if (!(amax > 0)) return 1.0f;
  int e;
  std::frexp(amax, &e);  // amax = m * 2^e, m in [0.5, 1): floor(log2(amax)) = e - 1
  return std::ldexp(1.0f, e - 1 - 2);
}

float scale_at(const Tensor& scale, int64_t r, int64_t c) {
  const int64_t rs = scale.stride(0), cs = scale.stride(1);
  if (scale.dtype() == DType::F32) return scale.data<float>()[r * rs + c * cs];
  return e8m0_to_f32(static_cast<const uint8_t*>(scale.raw())[r * rs + c * cs]);
}

}  // namespace

void quantize_input(const float* x, int64_t K, const Weight& w, QuantInput& out) {
  const int64_t g = w.block_k, kb = (K + g - 1) / g;
  out.v.resize(static_cast<size_t>(K));
  out.s.assign(static_cast<size_t>(kb), 1.0f);
  if (w.act == ActQuant::kNone) {
    std::copy(x, x + K, out.v.begin());
    return;
  }
  for (int64_t b = 0; b < kb; ++b) {
    const int64_t k0 = b * g, k1 = std::min(K, k0 + g);
    float amax = 0;
    for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
    if (w.act == ActQuant::kFp8Group) {
      const float s = fp8_group_scale(amax, w.ue8m0);
      for (int64_t k = k0; k < k1; ++k) out.v[k] = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x[k] / s));
      out.s[b] = s;
    } else {
      const float s = mxfp4_group_scale(amax);
      for (int64_t k = k0; k < k1; ++k) out.v[k] = fp4_e2m1_to_f32(f32_to_fp4_e2m1(x[k] / s));
      out.s[b] = s;
    }
  }
}

void decode_weight_row(const Weight& w, int64_t n, float* row) {
  const int64_t K = w.in_features();
  const auto* p = static_cast<const uint8_t*>(w.w.raw()) + n * w.w.stride(0);
  if (w.format == WeightFormat::kFp8Block) {
    for (int64_t k = 0; k < K; ++k) row[k] = fp8_e4m3_to_f32(p[k]);
  } else {
    TD_CHECK(w.format == WeightFormat::kMxfp4, "decode_weight_row: {} is not quantized", w.w.str());
    for (int64_t k = 0; k < K; k += 2) {
      row[k] = fp4_e2m1_to_f32(p[k / 2] & 0xf);
      row[k + 1] = fp4_e2m1_to_f32(p[k / 2] >> 4);
    }
  }
}

float quant_dot(const Weight& w, int64_t n, const float* row, const QuantInput& in) {
  const int64_t K = w.in_features(), g = w.block_k;
  const int64_t kb = static_cast<int64_t>(in.s.size());
  float acc = 0;
  for (int64_t b = 0; b < kb; ++b) {
    const int64_t k0 = b * g, len = std::min(K, k0 + g) - k0;
    acc += scale_at(w.scale, w.scale_row(n), b) * in.s[b] * dot(row + k0, in.v.data() + k0, len);
  }
  return acc;
}

}  // namespace tandem::cpu
