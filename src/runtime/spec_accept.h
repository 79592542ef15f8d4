// Acceptance rules of speculative decoding with chain drafts (topk = 1). The drafts are point
// masses (argmax of the MTP head), so exact rejection sampling reduces to: accept draft d with
// probability p(d) under the target's processed distribution; on rejection, sample the bonus
// token from p with d removed and renormalised; if every draft is accepted, the bonus comes from
// the distribution after the last one. Greedy is the limit: accept while d equals the argmax.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"

namespace tandem {

struct Acceptance {
  std::vector<int32_t> tokens;  // accepted drafts then the bonus token: accepted + 1 tokens
  int64_t accepted = 0;         // drafts accepted
};

// drafts: [S]; target_argmax: [S + 1] (position i predicts the token after verify token i).
Acceptance accept_greedy(const std::vector<int32_t>& drafts,
                         const std::vector<int32_t>& target_argmax);

// probs: [S + 1][V], each the target's distribution after temperature, top-k and top-p.
Acceptance accept_sampled(const std::vector<int32_t>& drafts,
                          const std::vector<std::vector<float>>& probs, Rng& rng);

// Benchmarking: accept each draft in turn with probability accept_rate, stopping at the first
// rejection (a draft model of constant conditional acceptance); the bonus is target_next[k] as in
// greedy.
Acceptance accept_simulated(const std::vector<int32_t>& drafts,
                            const std::vector<int32_t>& target_next, double accept_rate, Rng& rng);
// The conditional acceptance a for which rounds of `steps` drafts commit mean_accept_length
// tokens on average: 1 + a + a^2 + ... + a^steps = mean_accept_length (clamped to [0, 1]).
double simulated_accept_rate(double mean_accept_length, int64_t steps);

}  // namespace tandem
