// Speculative-decoding counters read from a Prometheus /metrics page, so that the accept
// length of one benchmark run is a difference of two scrapes rather than a since-start average.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace tandem::bench {

struct SpecCounters {
  // Verify rounds, counted per request per round (Tandem's spec_verify_steps, vLLM's
  // spec_decode_num_drafts).
  double verify_steps = 0;
  // Accepted draft tokens, bonus tokens excluded (Tandem's spec_accepted_tokens, vLLM's
  // spec_decode_num_accepted_tokens).
  double accepted_tokens = 0;
  // Accepted drafts at each draft position (Tandem's spec_accepted_tokens_per_pos, vLLM's
  // spec_decode_num_accepted_tokens_per_pos, by their `position` label, 0 first); empty when
  // the server does not publish them.
  std::vector<double> accepted_per_position = {};
};

// Finds the two counters in Prometheus text format by name: a metric whose name (namespace
// prefix and _total suffix aside) contains "spec" and "verify" (or ends in "num_drafts") counts
// verify rounds; one containing "spec" and "accepted" counts accepted drafts. Series of one
// family (labels per engine or rank) are summed; `_created` timestamps and histogram parts are
// skipped. A family of accepted drafts split by a `position` label (name with "per_pos") fills
// accepted_per_position. All counters come from one namespace (`tandem:` first, when a server
// publishes them under several). nullopt unless the two totals are present.
std::optional<SpecCounters> parse_spec_counters(std::string_view prometheus_text);

// Tokens committed per verify round, bonus included, between two scrapes; nullopt when no round
// ran in between.
std::optional<double> accept_length_delta(const SpecCounters& before, const SpecCounters& after);

// The share of verify rounds between two scrapes whose draft at position i was accepted; empty
// when no round ran in between or the server has no per-position counters.
std::vector<double> acceptance_per_position_delta(const SpecCounters& before,
                                                  const SpecCounters& after);

}  // namespace tandem::bench
