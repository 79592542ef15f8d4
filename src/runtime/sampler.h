// Token sampling on the host: temperature, top-k, top-p, per-request seeded RNG. The processed
// distribution is exposed too, because speculative rejection sampling needs it. The rule is
// ops/sample_rule.h's, the one the CPU backend's sample op (ops::sample) runs: for the same
// logits, parameters and uniform number both choose the same token.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "ops/sample_rule.h"

namespace tandem {

struct SamplingParams {
  float temperature = 0.0f;  // 0 (or top_k == 1) means greedy
  int32_t top_k = -1;        // -1: off
  float top_p = 1.0f;
  uint64_t seed = 0;
  bool greedy() const { return ops::greedy_row(temperature, top_k); }
};

// probs[v] after temperature, softmax, top-k and top-p renormalisation (zero outside); one-hot
// at the argmax (lowest index on ties) when p.greedy().
void sampling_distribution(const float* logits, int64_t vocab, const SamplingParams& p,
                           std::vector<float>& probs);
// Draws from logits under p with one rng.uniform() (ops::sample_row); greedy when p.greedy()
// (lowest index on ties, no draw).
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, Rng& rng);

}  // namespace tandem
