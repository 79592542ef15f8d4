#include "ops/sample_rule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace tandem::ops {

int32_t argmax_row(const float* l, int64_t V) {
  int64_t best = 0;
  for (int64_t v = 1; v < V; ++v)
    if (l[v] > l[best]) best = v;
  return static_cast<int32_t>(best);
}

void sample_kept_set(const float* l, int64_t V, float temperature, int32_t top_k, float top_p,
                     SampleKeptSet& k) {
  std::vector<float>& p = k.weight;
  std::vector<int32_t>& order = k.order;
  p.resize(static_cast<size_t>(V));
  order.resize(static_cast<size_t>(V));
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t v = 0; v < V; ++v) mx = std::max(mx, l[v]);
  // Masses are summed in double: over 150K-token vocabularies fp32 running sums drift enough
  // to move u * mass across a token boundary.
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += p[v] = std::exp((l[v] - mx) / temperature);
  for (int64_t v = 0; v < V; ++v) p[v] = static_cast<float>(p[v] / sum);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
  int64_t keep = top_k > 0 ? std::min<int64_t>(top_k, V) : V;
  double kmass = 0;
  for (int64_t i = 0; i < keep; ++i) kmass += p[order[i]];
  if (top_p < 1.0f) {
    double acc = 0;
    for (int64_t i = 0; i < keep; ++i) {
      acc += p[order[i]];
      if (acc >= top_p * kmass) {
        keep = i + 1;
        break;
      }
    }
  }
  k.kept.assign(static_cast<size_t>(V), 0);
  double mass = 0;
  for (int64_t i = 0; i < keep; ++i) k.kept[order[i]] = 1, mass += p[order[i]];
  k.keep = keep;
  k.mass = mass;
}

int32_t sample_pick(const SampleKeptSet& k, double u) {
  // An inverse CDF over the kept tokens in vocabulary order.
  const double target = u * k.mass;
  double acc = 0;
  int32_t pick = k.order[0];
  for (size_t v = 0; v < k.kept.size(); ++v) {
    // Zero-weight tokens (masked to -inf by constrained decoding, or underflowed) can never be
    // the first to exceed the target; skipping them also keeps rounding's fallback (the last
    // candidate) on a token that has probability.
    if (!k.kept[v] || k.weight[v] <= 0) continue;
    acc += k.weight[v];
    pick = static_cast<int32_t>(v);
    if (acc > target) break;
  }
  return pick;
}

int32_t sample_row(const float* l, int64_t V, float temperature, int32_t top_k, float top_p,
                   double u, SampleKeptSet& scratch) {
  if (greedy_row(temperature, top_k)) return argmax_row(l, V);
  sample_kept_set(l, V, temperature, top_k, top_p, scratch);
  return sample_pick(scratch, u);
}

}  // namespace tandem::ops
