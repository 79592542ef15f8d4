#include "bench_client/types.h"

#include "core/error.h"

namespace tandem::bench {

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::kSglang:
      return "sglang";
    case Backend::kOpenAI:
      return "openai";
    case Backend::kOpenAIChat:
      return "openai-chat";
  }
  return "?";
}

Backend parse_backend(std::string_view name) {
  // bench_serving's names for the same three protocols are accepted too.
  if (name == "sglang" || name == "sglang-native") return Backend::kSglang;
  if (name == "openai" || name == "sglang-oai" || name == "vllm") return Backend::kOpenAI;
  if (name == "openai-chat" || name == "sglang-oai-chat" || name == "vllm-chat")
    return Backend::kOpenAIChat;
  throw InvalidArgument(fmt::format("unknown backend '{}' (sglang, openai, openai-chat)", name));
}

}  // namespace tandem::bench
