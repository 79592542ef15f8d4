// The OpenAI-compatible API: parsing /v1/chat/completions and /v1/completions requests into
// GenerationParams (with SGLang's extra fields: top_k, stop_token_ids, ignore_eos, no_stop_trim,
// chat_template_kwargs, return_hidden_states, ...), and the response and chunk objects.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "chat_template/chat_template.h"
#include "server/generation.h"
#include "server/json_fields.h"
#include "server/tool_request.h"

namespace tandem::server {

struct StreamOptions {
  bool stream = false;
  bool include_usage = false;     // a final chunk with choices: [] and usage
  bool continuous_usage = false;  // usage on every chunk (vLLM's continuous_usage_stats)
};

struct ChatRequest {
  Json messages;  // validated list of message objects
  ToolRequest tools;
  Json template_kwargs = Json::object();
  bool add_generation_prompt = true;
  GenerationParams params;
  StreamOptions stream;
};

struct CompletionPrompt {
  std::optional<std::string> text;  // a text prompt (else ids were given)
  std::vector<int32_t> ids;
};

struct CompletionRequest {
  std::vector<CompletionPrompt> prompts;
  bool echo = false;
  GenerationParams params;
  StreamOptions stream;
};

// Throw ApiError(400) naming the field for malformed or out-of-range values.
ChatRequest parse_chat_request(const Json& body);
CompletionRequest parse_completion_request(const Json& body);

// The template context transformers' apply_chat_template builds: chat_template_kwargs, messages
// (text-part lists flattened when the template only handles strings; tool-call arguments given
// as JSON strings parsed into objects when the template reads them as mappings), tools (as
// ToolRequest::template_tools, None when none), add_generation_prompt, bos/eos tokens. Throws
// ApiError(400) for tool-call arguments that must be parsed but are not a JSON object.
Json chat_template_context(const ChatRequest& req, const ChatTemplate& tpl,
                           const std::string& bos_token, const std::string& eos_token);

// Whether a template reads message content as a list of parts itself (GLM's do); otherwise
// text parts are joined into one string first, as vLLM does for "string"-format templates.
bool template_handles_content_parts(const std::string& source);

// Whether a template reads tool-call arguments as a mapping (iterates them, tests `is mapping`
// or JSON-encodes them: GLM's, DeepSeek-V3.2's). OpenAI clients send arguments as a JSON string;
// SGLang and vLLM parse it into an object for such templates. Templates that concatenate the
// string (DeepSeek-V3.1's) get it as sent.
bool template_reads_argument_mappings(const std::string& source);

// Response objects.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;
  std::string model;
};
Json usage_json(const Generation& g);
// A chat choice's message: role, content (null when empty with tool calls), reasoning_content
// (with a reasoning parser), tool_calls [{id, type: "function", function: {name, arguments}}]
// or null.
Json chat_message_json(const ChoiceResult& c, bool with_reasoning);
Json chat_completion_json(const ResponseMeta& m, const Generation& g, bool with_reasoning);
Json chat_chunk_json(const ResponseMeta& m, Json choices);
// The SSE chunks of one poll's delta of a chat choice: its reasoning_content/content; per tool
// call it advanced, the call's start (index, id, type, function.name, arguments "") when it
// began, then one chunk of its argument fragments; the finish chunk (finish_reason,
// matched_stop) at the end.
std::vector<Json> chat_delta_chunks(const ResponseMeta& m, const ChoiceDelta& d,
                                    const ChoiceResult& c, bool hidden_states);
// A streamed delta's tool_calls items: per call, the first with index, id, type and
// function.name (arguments possibly ""), later ones with index and function.arguments only.
Json tool_call_delta_json(const std::vector<ToolCallDelta>& calls);
Json completion_json(const ResponseMeta& m, const Generation& g,
                     const std::vector<std::string>& echo_text);
Json completion_chunk_json(const ResponseMeta& m, Json choices);
// "stop" | "length" | "abort" (errors are reported as errors, not finish reasons).
const char* openai_finish_reason(FinishReason r);
// A chat choice's: "tool_calls" when it stopped after making calls.
const char* openai_finish_reason(const ChoiceResult& c);
// matched_stop of a chat choice: null with "tool_calls", as SGLang reports it.
Json chat_matched_stop(const ChoiceResult& c);

}  // namespace tandem::server
