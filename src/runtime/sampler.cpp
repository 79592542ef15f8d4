#include "runtime/sampler.h"

#include "ops/sample_rule.h"

namespace tandem {

// The rule itself (temperature, top-k, top-p, tie-breaking, the pick) is ops/sample_rule.h's,
// shared with the CPU backend's sample op.

void sampling_distribution(const float* logits, int64_t V, const SamplingParams& p,
                           std::vector<float>& probs) {
  probs.assign(static_cast<size_t>(V), 0.0f);
  if (p.greedy()) {
    probs[static_cast<size_t>(ops::argmax_row(logits, V))] = 1.0f;
    return;
  }
  ops::SampleKeptSet k;
  ops::sample_kept_set(logits, V, p.temperature, p.top_k, p.top_p, k);
  for (int64_t i = 0; i < k.keep; ++i) {
    const int32_t v = k.order[i];
    probs[v] = static_cast<float>(k.weight[v] / k.mass);
  }
}

int32_t sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng) {
  if (p.greedy()) return ops::argmax_row(logits, V);
  ops::SampleKeptSet k;
  return ops::sample_row(logits, V, p.temperature, p.top_k, p.top_p, rng.uniform(), k);
}

}  // namespace tandem
