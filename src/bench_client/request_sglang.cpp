#include "bench_client/request.h"

#include "core/error.h"

namespace tandem::bench {

namespace {

// `prompt`: a string (text) or a list of token ids (input_ids).
HttpRequestSpec sglang_request(nlohmann::json prompt, int64_t output_len, const RequestOptions& o) {
  const char* key = prompt.is_array() ? "input_ids" : "text";
  nlohmann::json body = {
      {key, std::move(prompt)},
      {"sampling_params",
       {{"temperature", o.temperature},
        {"max_new_tokens", output_len},
        {"ignore_eos", o.ignore_eos}}},
      {"stream", o.stream},
  };
  body.update(o.extra_body);
  return {"/generate", std::move(body)};
}

}  // namespace

HttpRequestSpec build_sglang_request(const std::string& prompt, int64_t output_len,
                                     const RequestOptions& o) {
  return sglang_request(prompt, output_len, o);
}

HttpRequestSpec build_request(Backend b, const DatasetRow& row, int64_t output_len,
                              const RequestOptions& o) {
  if (row.prompt_ids.empty()) return build_request(b, row.prompt, output_len, o);
  switch (b) {
    case Backend::kSglang:
      return sglang_request(row.prompt_ids, output_len, o);
    case Backend::kOpenAI:
      return build_openai_completions_request(row.prompt_ids, output_len, o);
    case Backend::kOpenAIChat:
      break;
  }
  throw InvalidArgument("token-id prompts (--tokenize-prompt) need --backend sglang or openai");
}

HttpRequestSpec build_request(Backend b, const std::string& prompt, int64_t output_len,
                              const RequestOptions& o) {
  switch (b) {
    case Backend::kSglang:
      return build_sglang_request(prompt, output_len, o);
    case Backend::kOpenAI:
      return build_openai_completions_request(prompt, output_len, o);
    case Backend::kOpenAIChat:
      return build_openai_chat_request(prompt, output_len, o);
  }
  return {};
}

}  // namespace tandem::bench
