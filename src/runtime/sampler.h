// Token sampling on the host: temperature, top-k, top-p, per-request seeded RNG. The processed
// distribution is exposed too, because speculative rejection sampling needs it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace tandem {

struct SamplingParams {
  float temperature = 0.0f;  // 0 (or top_k == 1) means greedy
  int32_t top_k = -1;        // -1: off
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0f || top_k == 1; }
};

// probs[v] after temperature, softmax, top-k and top-p renormalisation (zero outside).
void sampling_distribution(const float* logits, int64_t vocab, const SamplingParams& p,
                           std::vector<float>& probs);
// Draws from logits under p; greedy when p.greedy() (lowest index on ties).
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, Rng& rng);
// Inverse-CDF draw from a normalised distribution.
int32_t sample_from(const std::vector<float>& probs, Rng& rng);

}  // namespace tandem
