#include "bench_client/request.h"

namespace tandem::bench {

HttpRequestSpec build_sglang_request(const std::string& prompt, int64_t output_len,
                                     const RequestOptions& o) {
  nlohmann::json body = {
      {"text", prompt},
      {"sampling_params",
       {{"temperature", o.temperature},
        {"max_new_tokens", output_len},
        {"ignore_eos", o.ignore_eos}}},
      {"stream", o.stream},
  };
  body.update(o.extra_body);
  return {"/generate", std::move(body)};
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
