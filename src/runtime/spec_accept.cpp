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
                            const std::vector<int32_t>& target_next, double mean_accept_length,
                            Rng& rng) {
  const double want = std::clamp(mean_accept_length - 1.0, 0.0, static_cast<double>(drafts.size()));
  const int64_t base = static_cast<int64_t>(std::floor(want));
  int64_t k = base + (rng.uniform() < want - static_cast<double>(base) ? 1 : 0);
  k = std::min<int64_t>(k, static_cast<int64_t>(drafts.size()));
  Acceptance a;
  a.tokens.assign(drafts.begin(), drafts.begin() + k);
  a.accepted = k;
  a.tokens.push_back(target_next[static_cast<size_t>(k)]);
  return a;
}

}  // namespace tandem
