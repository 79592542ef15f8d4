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
// `prompt`: a string, a list of strings, a list of token ids or a list of such lists.
HttpRequestSpec build_openai_completions_request(nlohmann::json prompt, int64_t output_len,
                                                 const RequestOptions& o);
HttpRequestSpec build_openai_chat_request(const std::string& prompt, int64_t output_len,
                                          const RequestOptions& o);
HttpRequestSpec build_request(Backend b, const std::string& prompt, int64_t output_len,
                              const RequestOptions& o);
// The request for a dataset row: its token ids when it has them (--tokenize-prompt; /generate's
// input_ids, /v1/completions' prompt as a list of ids), else its text. Chat requests take text
// only: InvalidArgument for a row with ids.
HttpRequestSpec build_request(Backend b, const DatasetRow& row, int64_t output_len,
                              const RequestOptions& o);

}  // namespace tandem::bench
