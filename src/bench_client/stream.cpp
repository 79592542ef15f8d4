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

// The fields of an SGLang /generate stream event that the benchmark uses, read without building
// the document: each event repeats the whole text and ids so far, and a DOM of hundreds of ids
// per token was most of the client's time per token (and of its share of the machine it shares
// with the server it measures). Anything unusual (an error, a payload that is not an object)
// leaves `plain` false and the caller parses the event whole.
class SglangEventReader : public nlohmann::json_sax<json> {
 public:
  bool plain = true;  // an object without "error"
  std::optional<std::string> text;
  std::optional<int64_t> completion_tokens, spec_verify_ct;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(static_cast<int64_t>(std::min<number_unsigned_t>(v, INT64_MAX)));
  }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t& s) override {
    if (depth_ == 1 && key_ == "text") text = std::move(s);
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (depth_ == 0) top_object_ = true;
    if (depth_ == 1) in_meta_ = key_ == "meta_info";
    ++depth_;
    return true;
  }
  bool key(string_t& k) override {
    if (depth_ == 1 && k == "error") plain = false;
    if (depth_ <= 2) key_ = std::move(k);
    return true;
  }
  bool end_object() override {
    if (--depth_ == 1) in_meta_ = false;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) plain = false;
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    plain = false;
    return false;
  }
  bool done() const { return plain && top_object_ && depth_ == 0; }

 private:
  bool integer(int64_t v) {
    if (depth_ == 2 && in_meta_ && key_ == "completion_tokens") completion_tokens = v;
    if (depth_ == 2 && in_meta_ && key_ == "spec_verify_ct") spec_verify_ct = v;
    return true;
  }
  int depth_ = 0;
  bool top_object_ = false, in_meta_ = false;
  std::string key_;
};

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
  if (backend_ == Backend::kSglang) {
    SglangEventReader r;
    if (json::sax_parse(data, &r) && r.done()) {
      // `text` is the whole text so far; completion_tokens the running count.
      if (!r.text || r.text->empty()) return;
      out_.generated_text = std::move(*r.text);
      if (r.completion_tokens) out_.output_len = *r.completion_tokens;
      if (r.spec_verify_ct) out_.spec_verify_ct = *r.spec_verify_ct;
      on_content(t, r.completion_tokens);
      return;
    }
  }
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
