// Acceptance rules of speculative decoding with chain drafts (topk = 1). The drafts are point
// masses (argmax of the MTP head), and for point masses exact rejection sampling (accept d with
// probability p(d), else sample from p without d, renormalised) is the same as sampling the
// position's token from p and accepting the draft iff they are equal. accept_sampled does the
// latter with one uniform per committed token, drawn from the request's stream in token order
// by the same rule as plain decoding: a seeded request commits the same tokens whatever the
// speculation depth of each round (the adaptive policy's choices included), and the same as
// without speculation where the logits agree. Greedy is the limit: accept while d equals the
// argmax.
#pragma once

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "runtime/sampler.h"

namespace tandem {

struct Acceptance {
  std::vector<int32_t> tokens;  // accepted drafts then the bonus token: accepted + 1 tokens
  int64_t accepted = 0;         // drafts accepted
};

// drafts: [S]; target_argmax: [S + 1] (position i predicts the token after verify token i).
Acceptance accept_greedy(const std::vector<int32_t>& drafts,
                         const std::vector<int32_t>& target_argmax);

// logits: [S + 1, V] on the host (row i: the target after verify token i); each committed token
// takes one rng.uniform() and is picked as ModelRunner::sample picks it (ops/sample_rule.h).
Acceptance accept_sampled(const std::vector<int32_t>& drafts, const float* logits, int64_t V,
                          const SamplingParams& sampling, Rng& rng);

// Benchmarking: accept each draft in turn with probability accept_rate, stopping at the first
// rejection (a draft model of constant conditional acceptance); the bonus is target_next[k] as in
// greedy.
Acceptance accept_simulated(const std::vector<int32_t>& drafts,
                            const std::vector<int32_t>& target_next, double accept_rate, Rng& rng);
// The mean accept length of rounds of `steps` drafts each accepted with conditional probability
// a: 1 + a + a^2 + ... + a^steps.
double simulated_accept_length(double a, int64_t steps);
// Its inverse in a: the rate for which rounds of `steps` drafts commit mean_accept_length tokens
// on average (clamped to [0, 1]).
double simulated_accept_rate(double mean_accept_length, int64_t steps);

}  // namespace tandem
