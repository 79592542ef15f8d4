// One API request's generation: it submits one engine request per choice (n per prompt), reads
// their output streams without ever blocking longer than asked, and turns tokens into text
// through the detokenizer, the stop-string matcher and (for chat) the reasoning parser and the
// tool-call parser. The
// OpenAI and SGLang routes format what it produces; streaming and non-streaming responses run
// the same pipeline, so they carry the same text.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "runtime/engine.h"
#include "server/detokenizer.h"
#include "server/grammar_constraint.h"
#include "server/json_fields.h"
#include "server/reasoning_parser.h"
#include "server/server_state.h"
#include "server/stop_strings.h"
#include "server/tool_call_parser.h"

namespace tandem::server {

// Protocol-independent settings of a request, after parsing and range checks.
struct GenerationParams {
  std::optional<int64_t> max_new_tokens;        // nullopt: up to the context length
  std::string max_tokens_param = "max_tokens";  // how the client spelled it, for errors
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = -1;
  std::optional<int64_t> seed;
  int64_t n = 1;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool skip_special_tokens = true;
  bool no_stop_trim = false;
  bool return_hidden_states = false;
  bool separate_reasoning = true;  // chat only, when the server has a reasoning parser
  // Structured output: response_format, or SGLang's json_schema / regex / ebnf, or a forced tool
  // call (one at most).
  ConstraintSpec constraint;
};

// Reads the sampling fields the OpenAI and native APIs share, with their range checks
// (temperature >= 0, top_p in (0, 1], top_k -1/0 or >= 1, n >= 1, ...). Fields that ask for
// features this server lacks (logprobs, penalties, grammars) with a non-default value are a 400
// rather than being silently ignored.
void read_sampling_fields(const Fields& f, GenerationParams& p);
// The structured-output fields of read_sampling_fields: response_format (json_object,
// json_schema), SGLang's json_schema / regex / ebnf; at most one of them.
void read_constraint_fields(const Fields& f, GenerationParams& p);

struct PromptInput {
  std::vector<int32_t> ids;
};

// A complete tool call of a choice.
struct ToolCall {
  std::string id, name;
  std::string arguments;  // JSON text
};

struct ChoiceResult {
  size_t index = 0;
  size_t prompt_index = 0;
  std::string text;       // content (after stop trimming, reasoning and tool-call separation)
  std::string reasoning;  // reasoning_content
  std::vector<ToolCall> tool_calls;
  std::vector<int32_t> output_ids;
  std::vector<std::vector<float>> hidden_states;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t spec_verify_steps = 0;
  int64_t spec_accepted_drafts = 0;
  int64_t spec_draft_tokens = 0;
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<int32_t> matched_token;
  std::optional<std::string> matched_string;
  std::string error;
  double e2e_latency = 0;  // seconds

  Json matched_stop() const;  // the token id, the string, or null
};

// What one poll added to a choice.
struct ChoiceDelta {
  size_t index = 0;
  std::string text, reasoning;
  std::vector<ToolCallDelta> tool_calls;
  int64_t new_tokens = 0;
  bool finished = false;
};

class Generation {
 public:
  struct Options {
    std::string prompt_noun = "prompt";  // "messages" for chat, in context-length errors
    // Chat: how reasoning is split from the answer, when it is for this request.
    std::optional<ReasoningParser::Options> reasoning;
    // Chat with tools and a --tool-call-parser: makes each choice's parser.
    std::function<std::unique_ptr<ToolCallParser>()> tool_parser;
    // Special tokens the detokenizer keeps although special tokens are skipped: the markers
    // the parsers above read.
    std::unordered_set<int32_t> keep_special;
  };
  // Checks lengths against the context and submits every choice. Throws ApiError (400 for
  // requests the engine refuses, 503 when the model is not loaded).
  Generation(ServerState& st, std::vector<PromptInput> prompts, const GenerationParams& p,
             Options o);
  ~Generation();  // aborts what is still running
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Waits up to `wait` for engine output; appends one delta per choice that changed. Returns
  // whether anything changed.
  bool poll(std::vector<ChoiceDelta>& out, std::chrono::milliseconds wait);
  bool done() const { return live_ == 0; }
  // Calls fn when any choice's engine stream has output (RequestStream::set_notify); false if a
  // stream cannot notify. An empty fn stops the calls.
  bool set_notify(const std::function<void()>& fn);
  // The client went away: abort everything still running.
  void abort();

  const std::vector<ChoiceResult>& choices() const { return results_; }
  const GenerationParams& params() const { return params_; }
  size_t num_prompts() const { return num_prompts_; }
  // A finished choice that failed inside the engine, if any.
  const ChoiceResult* failed_choice() const;

 private:
  struct Slot;
  bool drain(size_t i, std::chrono::milliseconds wait, ChoiceDelta& d);
  void consume(size_t i, RequestOutput& o, ChoiceDelta& d);
  void emit(size_t i, const std::string& text, ChoiceDelta& d);
  void emit_content(size_t i, const std::string& text, ChoiceDelta& d);
  void add_tool_calls(size_t i, ToolParseResult r, ChoiceDelta& d);
  void finish(size_t i, FinishReason why, ChoiceDelta* d);

  ServerState& st_;
  GenerationParams params_;
  size_t num_prompts_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<ChoiceResult> results_;
  size_t live_ = 0;
  size_t next_wait_ = 0;  // round-robin start for blocking waits
};

// The engine seed of choice `index` for a request seed (none: a random one). The engine treats
// seed 0 as "derive from the request id", so results are never 0.
uint64_t choice_seed(std::optional<int64_t> seed, size_t index);

}  // namespace tandem::server
