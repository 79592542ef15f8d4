// SGLang's native API: POST /generate ({"text" | "input_ids", "sampling_params", "stream",
// "return_hidden_states", "rid"}) and its meta_info, which sglang.bench_serving reads.
#pragma once

#include <optional>
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

// The streamed /generate event of one choice, as SGLang sends it: the whole text and ids so far
// in every event. Building those as JSON values again for each token cost allocations and number
// formatting in proportion to the output so far, per token (quadratic per request; 9 us per token
// at 512 tokens); this keeps the serialized text and ids and extends them by what was added, so
// an event costs a copy. The bytes equal dump_json(generate_result_json(...)) with "index"
// appended in batch streams (hidden states are never sent with it: the caller falls back).
class CumulativeGenerateEvent {
 public:
  std::string event(const ChoiceResult& c, const std::string& id, const SpecInfo& spec,
                    std::optional<size_t> index);

 private:
  std::string text_;       // the raw text serialized so far
  std::string text_json_;  // its JSON string body (escaped, no quotes)
  size_t ids_ = 0;         // ids serialized so far
  std::string ids_json_;   // "1,2,3"
};

}  // namespace tandem::server
