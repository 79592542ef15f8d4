// Sampling with temperature, top-k and top-p from one uniform number per row (see
// Backend::sample for the exact rule the CUDA kernel reproduces).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"

namespace tandem::cpu {

void CpuBackend::sample(const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
                        const Tensor& top_p, const Tensor& u, Tensor& out) {
  const int64_t T = logits.size(0), V = logits.size(1);
  const float* l = f32_ptr(logits, "sample");
  const float* temp = f32_ptr(temperature, "sample");
  const float* tp = f32_ptr(top_p, "sample");
  const float* uu = f32_ptr(u, "sample");
  const int32_t* tk = top_k.data<int32_t>();
  int32_t* o = out.data<int32_t>();
  std::vector<float> p(static_cast<size_t>(V));
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = l + t * logits.stride(0);
    if (temp[t] <= 0.0f || tk[t] == 1) {
      int64_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (row[v] > row[best]) best = v;
      o[t] = static_cast<int32_t>(best);
      continue;
    }
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, row[v]);
    // Masses are summed in double: over 150K-token vocabularies fp32 running sums drift enough
    // to move u * mass across a token boundary.
    double sum = 0;
    for (int64_t v = 0; v < V; ++v) sum += p[v] = std::exp((row[v] - mx) / temp[t]);
    for (int64_t v = 0; v < V; ++v) p[v] = static_cast<float>(p[v] / sum);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[a] > p[b]; });
    int64_t keep = tk[t] > 0 ? std::min<int64_t>(tk[t], V) : V;
    double kmass = 0;
    for (int64_t i = 0; i < keep; ++i) kmass += p[order[i]];
    if (tp[t] < 1.0f) {
      double acc = 0;
      for (int64_t i = 0; i < keep; ++i) {
        acc += p[order[i]];
        if (acc >= tp[t] * kmass) {
          keep = i + 1;
          break;
        }
      }
    }
    // The kept set, then an inverse CDF over it in vocabulary order.
    std::vector<char> kept(static_cast<size_t>(V), 0);
    double mass = 0;
    for (int64_t i = 0; i < keep; ++i) kept[order[i]] = 1, mass += p[order[i]];
    const double target = static_cast<double>(uu[t]) * mass;
    double acc = 0;
    int32_t pick = order[0];
    for (int64_t v = 0; v < V; ++v) {
      if (!kept[v]) continue;
      acc += p[v];
      pick = static_cast<int32_t>(v);
      if (acc > target) break;
    }
    o[t] = pick;
  }
}

}  // namespace tandem::cpu
