// The data that flows through a serving benchmark: the prompts to send and what came back.
// Times are seconds (double) on std::chrono::steady_clock, relative to the benchmark start.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::bench {

// sglang: POST /generate; openai: POST /v1/completions; openai-chat: POST /v1/chat/completions.
enum class Backend { kSglang, kOpenAI, kOpenAIChat };
const char* backend_name(Backend b);
Backend parse_backend(std::string_view name);  // throws InvalidArgument for unknown names

struct DatasetRow {
  std::string prompt;
  int64_t prompt_len = 0;  // tokens, as sampled (not re-tokenized; SGLang reports the same)
  int64_t output_len = 0;  // max tokens requested
  // --tokenize-prompt: the prompt's prompt_len token ids, sent instead of its text so the server
  // prefills exactly prompt_len tokens (decoded text re-tokenizes to a different length).
  std::vector<int32_t> prompt_ids;
};

struct RequestOutput {
  bool success = false;
  std::string error;
  std::string generated_text;
  int64_t prompt_len = 0;
  // The server's completion token count (meta_info / usage); the requested length when the
  // server does not report one.
  int64_t output_len = 0;
  double start_time = 0;    // when the request was sent
  double latency = 0;       // send to the last event received
  double ttft = 0;          // send to the first event carrying non-empty text
  std::vector<double> itl;  // one sample per token where chunk token counts are known
  // /generate's meta_info.spec_verify_ct (verify rounds of this request); -1: not reported.
  int64_t spec_verify_ct = -1;
};

}  // namespace tandem::bench
