// The host-side sampling rule, written once: temperature, top-k, top-p and the inverse-CDF pick
// of Backend::sample (backend.h), over one row of logits. The CPU backend's sample op runs it row
// by row; the runtime's sampler (runtime/sampler.h) builds the processed distribution that
// speculative rejection sampling needs from the same kept set, and draws single tokens through
// the same pick. The CUDA kernel reproduces these numerics (fp32 weights, double masses).
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::ops {

// Lowest index of the largest logit.
int32_t argmax_row(const float* logits, int64_t vocab);

// Whether a row is sampled greedily: temperature <= 0 or top_k == 1.
inline bool greedy_row(float temperature, int32_t top_k) {
  return temperature <= 0.0f || top_k == 1;
}

// The kept set of one non-greedy row. weight[v] = exp((l_v - max) / temperature) in fp32 divided
// by the (double) sum over the vocabulary; order lists the vocabulary by weight, descending, the
// lower index first on ties (a stable sort), and its first `keep` entries are the kept set: at
// most top_k (top_k <= 0: all), then the smallest prefix whose mass reaches top_p times the
// top-k mass. kept[v] marks them; mass is their weights' sum, in double.
struct SampleKeptSet {
  std::vector<float> weight;
  std::vector<int32_t> order;
  std::vector<char> kept;
  int64_t keep = 0;
  double mass = 0;
};

// Fills kept (reusing its buffers) for a non-greedy row.
void sample_kept_set(const float* logits, int64_t vocab, float temperature, int32_t top_k,
                     float top_p, SampleKeptSet& kept);

// The first kept token, in vocabulary order, whose cumulative kept weight exceeds u * mass (the
// last kept token if rounding leaves u * mass beyond the total). u in [0, 1).
int32_t sample_pick(const SampleKeptSet& kept, double u);

// Backend::sample for one row: the argmax when greedy_row(), else sample_pick over the kept set.
int32_t sample_row(const float* logits, int64_t vocab, float temperature, int32_t top_k,
                   float top_p, double u, SampleKeptSet& scratch);

}  // namespace tandem::ops
