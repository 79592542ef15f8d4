// What the benchmark asks the server besides generations: its model, its tokenizer, its
// speculative-decoding counters, its info page, and a prefix-cache flush.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bench_client/http.h"
#include "bench_client/prometheus.h"

namespace tandem::bench {

// The first id of GET /v1/models; nullopt when the route is missing or empty.
std::optional<std::string> fetch_model_id(const Endpoint& ep);
// GET /get_model_info's tokenizer_path (else model_path); nullopt when not served.
std::optional<std::string> fetch_tokenizer_path(const Endpoint& ep);
// Speculative counters from GET /metrics; nullopt when the page or the counters are missing.
std::optional<SpecCounters> fetch_spec_counters(const Endpoint& ep);
// GET /get_server_info as JSON; null when not served.
nlohmann::json fetch_server_info(const Endpoint& ep);
// SGLang's internal_states[0].avg_spec_accept_length (a PD deployment's decode entry first).
// Cumulative since the server started; nullopt when absent or 0.
std::optional<double> server_info_accept_length(const nlohmann::json& info);
// POST /flush_cache (GET for older SGLang); the error when it failed.
std::optional<std::string> flush_cache(const Endpoint& ep);

}  // namespace tandem::bench
