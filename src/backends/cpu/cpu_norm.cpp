// RMSNorm and LayerNorm, computed in fp32 per row.
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const int64_t T = x.size(0), D = x.size(1), xs = x.stride(0), os = out.stride(0);
  const float* xp = f32_ptr(x, "rms_norm");
  const float* wp = f32_ptr(w, "rms_norm");
  float* o = f32_mut(out, "rms_norm");
  parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const float* r = xp + t * xs;
      const float inv = 1.0f / std::sqrt(dot(r, r, D) / static_cast<float>(D) + eps);
      for (int64_t i = 0; i < D; ++i) o[t * os + i] = wp[i] * (r[i] * inv);
    }
  });
}

void CpuBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                            Tensor& out) {
  const int64_t T = x.size(0), D = x.size(1), xs = x.stride(0), os = out.stride(0);
  const float* xp = f32_ptr(x, "layer_norm");
  const float* wp = f32_ptr(w, "layer_norm");
  const float* bp = f32_ptr(b, "layer_norm");
  float* o = f32_mut(out, "layer_norm");
  parallel_for(T, [&](int64_t beg, int64_t end) {
    for (int64_t t = beg; t < end; ++t) {
      const float* r = xp + t * xs;
      float mean = 0;
      for (int64_t i = 0; i < D; ++i) mean += r[i];
      mean /= static_cast<float>(D);
      float var = 0;
      for (int64_t i = 0; i < D; ++i) var += (r[i] - mean) * (r[i] - mean);
      const float inv = 1.0f / std::sqrt(var / static_cast<float>(D) + eps);
      for (int64_t i = 0; i < D; ++i) o[t * os + i] = (r[i] - mean) * inv * wp[i] + bp[i];
    }
  });
}

}  // namespace tandem::cpu
