// RoPE frequencies for the 64-dim rotary slice: plain theta^(-2i/d), or DeepSeek YaRN, whose
// frequencies blend interpolation and extrapolation and whose cos/sin carry an attention factor.
#pragma once

#include <vector>

#include "model/config.h"

namespace tandem {

struct RopeTables {
  std::vector<float> inv_freq;  // [rope_dim / 2]
  float attention_factor = 1.0f;
};

RopeTables compute_rope_tables(const ModelConfig& c);

}  // namespace tandem
