#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace tandem {

void sampling_distribution(const float* logits, int64_t V, const SamplingParams& p,
                           std::vector<float>& probs) {
  probs.assign(static_cast<size_t>(V), 0.0f);
  if (p.greedy()) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (logits[v] > logits[best]) best = v;
    probs[static_cast<size_t>(best)] = 1.0f;
    return;
  }
  const double inv_t = 1.0 / p.temperature;
  double mx = -INFINITY;
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(logits[v]) * inv_t);
  std::vector<double> e(static_cast<size_t>(V));
  double sum = 0;
  for (int64_t v = 0; v < V; ++v)
    sum += e[v] = std::exp(static_cast<double>(logits[v]) * inv_t - mx);
  // Candidates by probability, descending (index ascending on ties, so results are stable).
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return e[a] > e[b]; });
  int64_t keep = V;
  if (p.top_k > 0) keep = std::min<int64_t>(keep, p.top_k);
  if (p.top_p < 1.0f) {
    // Smallest prefix whose mass reaches top_p (of the top-k renormalised distribution).
    double kept_mass = 0;
    for (int64_t i = 0; i < keep; ++i) kept_mass += e[order[i]];
    double acc = 0;
    for (int64_t i = 0; i < keep; ++i) {
      acc += e[order[i]];
      if (acc >= p.top_p * kept_mass) {
        keep = i + 1;
        break;
      }
    }
  }
  double mass = 0;
  for (int64_t i = 0; i < keep; ++i) mass += e[order[i]];
  for (int64_t i = 0; i < keep; ++i) probs[order[i]] = static_cast<float>(e[order[i]] / mass);
  (void)sum;
}

int32_t sample_from(const std::vector<float>& probs, Rng& rng) {
  const double u = rng.uniform();
  double acc = 0;
  int32_t last = 0;
  for (size_t v = 0; v < probs.size(); ++v) {
    if (probs[v] <= 0) continue;
    acc += probs[v];
    last = static_cast<int32_t>(v);
    if (u < acc) return last;
  }
  return last;  // rounding left u past the total: the last candidate
}

int32_t sample_token(const float* logits, int64_t V, const SamplingParams& p, Rng& rng) {
  std::vector<float> probs;
  sampling_distribution(logits, V, p, probs);
  if (p.greedy())
    return static_cast<int32_t>(std::max_element(probs.begin(), probs.end()) - probs.begin());
  return sample_from(probs, rng);
}

}  // namespace tandem
