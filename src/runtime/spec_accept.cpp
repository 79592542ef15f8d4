#include "runtime/spec_accept.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "runtime/sampler.h"

namespace tandem {

Acceptance accept_greedy(const std::vector<int32_t>& drafts, const std::vector<int32_t>& target) {
  TD_CHECK(target.size() == drafts.size() + 1, "accept_greedy: {} drafts need {} target tokens",
           drafts.size(), drafts.size() + 1);
  Acceptance a;
  while (a.accepted < static_cast<int64_t>(drafts.size()) &&
         drafts[a.accepted] == target[a.accepted]) {
    a.tokens.push_back(drafts[a.accepted]);
    ++a.accepted;
  }
  a.tokens.push_back(
      target[a.accepted]);  // the bonus: the target's own choice after the accepted run
  return a;
}

Acceptance accept_sampled(const std::vector<int32_t>& drafts, const float* logits, int64_t V,
                          const SamplingParams& sampling, Rng& rng) {
  Acceptance a;
  for (size_t j = 0; j <= drafts.size(); ++j) {
    const int32_t x = sample_token(logits + static_cast<int64_t>(j) * V, V, sampling, rng);
    a.tokens.push_back(x);
    if (j == drafts.size() || x != drafts[j]) return a;  // x is the bonus token
    ++a.accepted;
  }
  return a;
}

Acceptance accept_simulated(const std::vector<int32_t>& drafts,
                            const std::vector<int32_t>& target_next, double accept_rate, Rng& rng) {
  Acceptance a;
  while (a.accepted < static_cast<int64_t>(drafts.size()) && rng.uniform() < accept_rate)
    a.tokens.push_back(drafts[static_cast<size_t>(a.accepted++)]);
  a.tokens.push_back(target_next[static_cast<size_t>(a.accepted)]);
  return a;
}

double simulated_accept_length(double a, int64_t steps) {
  double m = 1, reach = 1;
  for (int64_t i = 0; i < steps; ++i) m += (reach *= a);
  return m;
}

double simulated_accept_rate(double mean_accept_length, int64_t steps) {
  auto mean = [&](double a) { return simulated_accept_length(a, steps); };
  if (mean_accept_length <= 1) return 0.0;
  if (mean_accept_length >= mean(1.0)) return 1.0;
  double lo = 0, hi = 1;  // mean() increases with a: bisect
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (mean(mid) < mean_accept_length ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace tandem
