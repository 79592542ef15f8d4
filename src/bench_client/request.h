// The HTTP request bench_serving sends for one prompt, per backend: SGLang's native /generate,
// OpenAI /v1/completions and /v1/chat/completions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench_client/types.h"

namespace tandem::bench {

struct RequestOptions {
  std::string model;         // OpenAI `model`; /generate does not take one
  double temperature = 0.0;  // greedy by default: the best case for speculative acceptance
  bool ignore_eos = true;    // so the output length is the one asked for
  bool stream = true;
  // Merged last into the top level of every request body (--extra-request-body).
  nlohmann::json extra_body = nlohmann::json::object();
};

struct HttpRequestSpec {
  std::string path;  // relative to the base URL, e.g. "/generate"
  nlohmann::json body;
};

HttpRequestSpec build_sglang_request(const std::string& prompt, int64_t output_len,
                                     const RequestOptions& o);
HttpRequestSpec build_openai_completions_request(const std::string& prompt, int64_t output_len,
                                                 const RequestOptions& o);
HttpRequestSpec build_openai_chat_request(const std::string& prompt, int64_t output_len,
                                          const RequestOptions& o);
HttpRequestSpec build_request(Backend b, const std::string& prompt, int64_t output_len,
                              const RequestOptions& o);

}  // namespace tandem::bench
