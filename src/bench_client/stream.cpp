#include "bench_client/stream.h"

#include <nlohmann/json.hpp>

namespace tandem::bench {

using json = nlohmann::json;

namespace {

std::optional<int64_t> int_field(const json& obj, const char* key) {
  if (!obj.is_object()) return std::nullopt;
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return std::nullopt;
  return it->get<int64_t>();
}

std::string string_field(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

const json& first_choice(const json& j) {
  static const json kNull;
  if (!j.is_object()) return kNull;
  auto it = j.find("choices");
  if (it == j.end() || !it->is_array() || it->empty()) return kNull;
  return (*it)[0];
}

// The completion-token count of an OpenAI `usage` object, when the event has one.
std::optional<int64_t> usage_tokens(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find("usage");
  if (it == j.end()) return std::nullopt;
  return int_field(*it, "completion_tokens");
}

// The text of a chat delta or message. Reasoning text counts: those are generated tokens too,
// and with a reasoning parser on (GLM-5's default) all of a thinking model's early tokens arrive
// there. bench_serving reads only `content`, and would see neither TTFT nor ITL until the answer.
std::string message_text(const json& choice, const char* key) {
  if (!choice.is_object() || !choice.contains(key)) return {};
  const json& m = choice[key];
  return string_field(m, "reasoning_content") + string_field(m, "reasoning") +
         string_field(m, "content");
}

std::string error_message(const json& err) {
  if (err.is_string()) return err.get<std::string>();
  if (err.is_object() && err.contains("message") && err["message"].is_string())
    return err["message"].get<std::string>();
  return err.dump();
}

}  // namespace

StreamAccumulator::StreamAccumulator(Backend backend, int64_t requested_output_len)
    : backend_(backend) {
  out_.output_len = requested_output_len;
}

void StreamAccumulator::fail(std::string message) {
  if (failed_) return;
  failed_ = true;
  out_.error = std::move(message);
}

void StreamAccumulator::on_event(std::string_view data, double t) {
  // Latency runs to the last event of any kind, [DONE] included, as bench_serving measures it.
  out_.latency = t;
  if (failed_ || data == "[DONE]") return;
  const json j = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    fail("malformed event: " + std::string(data.substr(0, 200)));
    return;
  }
  if (j.contains("error")) {
    fail(error_message(j["error"]));
    return;
  }
  switch (backend_) {
    case Backend::kSglang: {
      // `text` is the whole text so far; completion_tokens the running count.
      std::string text = string_field(j, "text");
      if (text.empty()) return;
      out_.generated_text = std::move(text);
      const json& meta = j.contains("meta_info") ? j["meta_info"] : json();
      const auto tokens = int_field(meta, "completion_tokens");
      if (tokens) out_.output_len = *tokens;
      if (auto v = int_field(meta, "spec_verify_ct")) out_.spec_verify_ct = *v;
      on_content(t, tokens);
      return;
    }
    case Backend::kOpenAI:
    case Backend::kOpenAIChat: {
      // usage arrives on the last chunk (include_usage) or on every chunk (continuous usage).
      const auto tokens = usage_tokens(j);
      if (tokens) out_.output_len = *tokens;
      const json& choice = first_choice(j);
      const std::string text = backend_ == Backend::kOpenAI ? string_field(choice, "text")
                                                            : message_text(choice, "delta");
      if (text.empty()) return;
      out_.generated_text += text;
      on_content(t, tokens);
      return;
    }
  }
}

void StreamAccumulator::on_content(double t, std::optional<int64_t> tokens) {
  if (!seen_content_) {
    seen_content_ = true;
    out_.ttft = t;
    last_content_t_ = t;
    last_tokens_ = tokens.value_or(-1);
    return;
  }
  const double gap = t - last_content_t_;
  if (tokens && last_tokens_ >= 0) {
    // The gap is shared evenly by the tokens this chunk added, so ITL stays per token when a
    // speculative step delivers several tokens at once.
    const int64_t k = *tokens - last_tokens_;
    // A chunk that adds no token (text held back, then released) merges its gap into the next
    // one, as bench_serving's sglang backend does.
    if (k <= 0) return;
    out_.itl.insert(out_.itl.end(), static_cast<size_t>(k), gap / static_cast<double>(k));
  } else {
    out_.itl.push_back(gap);  // token count unknown: one sample per chunk
  }
  last_content_t_ = t;
  last_tokens_ = tokens.value_or(-1);
}

void StreamAccumulator::on_body(std::string_view body, double t) {
  out_.latency = t;
  out_.ttft = t;
  seen_content_ = true;
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    fail("malformed response: " + std::string(body.substr(0, 200)));
    return;
  }
  if (j.contains("error")) {
    fail(error_message(j["error"]));
    return;
  }
  switch (backend_) {
    case Backend::kSglang: {
      out_.generated_text = string_field(j, "text");
      const json& meta = j.contains("meta_info") ? j["meta_info"] : json();
      if (auto v = int_field(meta, "completion_tokens")) out_.output_len = *v;
      if (auto v = int_field(meta, "spec_verify_ct")) out_.spec_verify_ct = *v;
      return;
    }
    case Backend::kOpenAI:
    case Backend::kOpenAIChat: {
      if (auto v = usage_tokens(j)) out_.output_len = *v;
      const json& choice = first_choice(j);
      out_.generated_text = backend_ == Backend::kOpenAI ? string_field(choice, "text")
                                                         : message_text(choice, "message");
      return;
    }
  }
}

RequestOutput StreamAccumulator::finish() const {
  RequestOutput out = out_;
  out.success = !failed_;
  if (!seen_content_) out.ttft = out.latency;
  return out;
}

}  // namespace tandem::bench
