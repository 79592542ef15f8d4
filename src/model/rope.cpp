#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace tandem {

namespace {
constexpr double kPi = 3.14159265358979323846;

double yarn_mscale(double scale, double mscale) {
  return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// Rotary dim at which a frequency completes `rotations` turns over the original context.
double correction_dim(double rotations, int dim, double base, double max_pos) {
  return dim * std::log(max_pos / (rotations * 2 * kPi)) / (2 * std::log(base));
}
}  // namespace

RopeTables compute_rope_tables(const ModelConfig& c) {
  const int dim = static_cast<int>(c.qk_rope_head_dim);
  const int half = dim / 2;
  const float base = static_cast<float>(c.rope.theta);
  RopeTables r;
  r.inv_freq.resize(half);
  // fp32 throughout, as transformers builds inv_freq.
  std::vector<float> pos_freq(half);
  for (int i = 0; i < half; ++i)
    pos_freq[i] = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
  if (c.rope.type != "yarn") {
    for (int i = 0; i < half; ++i) r.inv_freq[i] = 1.0f / pos_freq[i];
    return r;
  }
  const double factor = c.rope.factor;
  const double orig = static_cast<double>(c.rope.original_max_position_embeddings);
  double low = correction_dim(c.rope.beta_fast, dim, c.rope.theta, orig);
  double high = correction_dim(c.rope.beta_slow, dim, c.rope.theta, orig);
  if (c.rope.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  for (int i = 0; i < half; ++i) {
    const float ramp = std::clamp(static_cast<float>((i - low) / (high - low)), 0.0f, 1.0f);
    const float extrap = 1.0f - ramp;  // weight of the unscaled (extrapolated) frequency
    const float f_ex = 1.0f / pos_freq[i];
    const float f_in = 1.0f / (static_cast<float>(factor) * pos_freq[i]);
    r.inv_freq[i] = f_in * (1.0f - extrap) + f_ex * extrap;
  }
  if (c.rope.mscale != 0.0 && c.rope.mscale_all_dim != 0.0)
    r.attention_factor = static_cast<float>(yarn_mscale(factor, c.rope.mscale) /
                                            yarn_mscale(factor, c.rope.mscale_all_dim));
  else
    r.attention_factor = static_cast<float>(yarn_mscale(factor, 1.0));
  return r;
}

}  // namespace tandem
