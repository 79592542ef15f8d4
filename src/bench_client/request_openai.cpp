#include "bench_client/request.h"

namespace tandem::bench {

namespace {

// Usage on every chunk (vLLM's and SGLang's continuous_usage_stats) lets ITL be split per token
// instead of per chunk; servers that do not know the option send usage once at the end.
nlohmann::json stream_options() {
  return {{"include_usage", true}, {"continuous_usage_stats", true}};
}

}  // namespace

HttpRequestSpec build_openai_completions_request(nlohmann::json prompt, int64_t output_len,
                                                 const RequestOptions& o) {
  nlohmann::json body = {
      {"model", o.model},
      {"prompt", std::move(prompt)},
      {"temperature", o.temperature},
      {"best_of", 1},
      {"max_tokens", output_len},
      {"stream", o.stream},
      {"ignore_eos", o.ignore_eos},
  };
  if (o.stream) body["stream_options"] = stream_options();
  body.update(o.extra_body);
  return {"/v1/completions", std::move(body)};
}

HttpRequestSpec build_openai_chat_request(const std::string& prompt, int64_t output_len,
                                          const RequestOptions& o) {
  nlohmann::json body = {
      {"model", o.model},
      {"messages", nlohmann::json::array({{{"role", "user"}, {"content", prompt}}})},
      {"temperature", o.temperature},
      // max_completion_tokens is the current name; max_tokens is what older servers read.
      {"max_completion_tokens", output_len},
      {"max_tokens", output_len},
      {"stream", o.stream},
      {"ignore_eos", o.ignore_eos},
  };
  if (o.stream) body["stream_options"] = stream_options();
  body.update(o.extra_body);
  return {"/v1/chat/completions", std::move(body)};
}

}  // namespace tandem::bench
