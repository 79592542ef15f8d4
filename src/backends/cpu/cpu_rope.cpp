// Rotary position embedding, in place. Pair j rotates by angle pos * inv_freq[j]:
// interleaved (GPT-J, rope_interleave) pairs (x[2j], x[2j+1]); NeoX pairs (x[j], x[j + d/2]).
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"

namespace tandem::cpu {

void CpuBackend::rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                      const RopeParams& p) {
  const int64_t T = x.size(0), H = x.size(1), d = x.size(2), half = d / 2;
  const int32_t* pos = positions.data<int32_t>();
  const float* f = f32_ptr(inv_freq, "rope");
  float* xp = f32_mut(x, "rope");
  std::vector<float> cs(half), sn(half);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < half; ++j) {
      // fp32 angle, as transformers computes inv_freq @ position_ids in fp32.
      const float ang = static_cast<float>(pos[t]) * f[j];
      cs[j] = std::cos(ang) * p.attention_factor;
      sn[j] = std::sin(ang) * p.attention_factor;
    }
    for (int64_t h = 0; h < H; ++h) {
      float* r = xp + t * x.stride(0) + h * x.stride(1);
      for (int64_t j = 0; j < half; ++j) {
        const int64_t i0 = p.interleaved ? 2 * j : j;
        const int64_t i1 = p.interleaved ? 2 * j + 1 : j + half;
        const float a = r[i0], b = r[i1];
        r[i0] = a * cs[j] - b * sn[j];
        r[i1] = b * cs[j] + a * sn[j];
      }
    }
  }
}

}  // namespace tandem::cpu
