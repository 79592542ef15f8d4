// SGLang's native API: POST /generate ({"text" | "input_ids", "sampling_params", "stream",
// "return_hidden_states", "rid"}) and its meta_info, which sglang.bench_serving reads.
#pragma once

#include <string>
#include <vector>

#include "server/generation.h"
#include "server/json_fields.h"

namespace tandem::server {

struct GenerateRequest {
  std::vector<std::string> texts;               // text prompts, or
  std::vector<std::vector<int32_t>> input_ids;  // token-id prompts
  bool batch = false;                           // a list was given: the response is a list too
  GenerationParams params;
  bool stream = false;
  std::string rid;  // client-chosen request id (optional)
};

GenerateRequest parse_generate_request(const Json& body);

struct SpecInfo {
  bool enabled = false;
  int64_t num_steps = 0;
};

// {"type": "stop", "matched": id | "string"} | {"type": "length", "length": n} |
// {"type": "abort", "message": ...}; null while running.
Json native_finish_reason(const ChoiceResult& c);
Json meta_info_json(const ChoiceResult& c, const std::string& id, const SpecInfo& spec,
                    bool hidden_states);
// One result object: {"text", "output_ids", "meta_info"} (+ "index" in batch streams).
Json generate_result_json(const ChoiceResult& c, const std::string& id, const SpecInfo& spec,
                          bool hidden_states);

}  // namespace tandem::server
