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

Acceptance accept_sampled(const std::vector<int32_t>& drafts,
                          const std::vector<std::vector<float>>& probs, Rng& rng) {
  TD_CHECK(probs.size() == drafts.size() + 1, "accept_sampled: {} drafts need {} distributions",
           drafts.size(), drafts.size() + 1);
  Acceptance a;
  for (size_t j = 0; j < drafts.size(); ++j) {
    const std::vector<float>& p = probs[j];
    const float pd = p[static_cast<size_t>(drafts[j])];
    if (rng.uniform() < pd) {
      a.tokens.push_back(drafts[j]);
      ++a.accepted;
      continue;
    }
    // Rejected: the residual max(p - q, 0) with q the point mass on the draft is p without d.
    std::vector<float> residual = p;
    residual[static_cast<size_t>(drafts[j])] = 0.0f;
    double mass = 0;
    for (float v : residual) mass += v;
    if (mass <= 0) {  // p was the point mass itself (then pd == 1 and we cannot get here)
      a.tokens.push_back(drafts[j]);
      return a;
    }
    for (float& v : residual) v = static_cast<float>(v / mass);
    a.tokens.push_back(sample_from(residual, rng));
    return a;
  }
  a.tokens.push_back(sample_from(probs.back(), rng));
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

double simulated_accept_rate(double mean_accept_length, int64_t steps) {
  auto mean = [&](double a) {
    double m = 1, p = 1;
    for (int64_t i = 0; i < steps; ++i) m += (p *= a);
    return m;
  };
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
