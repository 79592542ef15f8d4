#include "server/sglang_protocol.h"

#include <fmt/format.h>

namespace tandem::server {

GenerateRequest parse_generate_request(const Json& body) {
  const Fields f(body);
  GenerateRequest r;
  const Json* text = f.get("text");
  const Json* ids = f.get("input_ids");
  if ((text != nullptr) == (ids != nullptr))
    throw bad_request("Exactly one of 'text' and 'input_ids' is required",
                      text ? "input_ids" : "text");
  if (text) {
    if (text->is_string()) {
      r.texts.push_back(text->get<std::string>());
    } else if (text->is_array() && !text->empty()) {
      r.batch = true;
      for (const Json& t : *text) {
        if (!t.is_string()) f.fail_type("text", "a string or a list of strings");
        r.texts.push_back(t.get<std::string>());
      }
    } else {
      f.fail_type("text", "a string or a non-empty list of strings");
    }
  } else {
    auto read = [&](const Json& arr) {
      std::vector<int32_t> out;
      for (const Json& t : arr) {
        if (!is_integral(t))
          f.fail_type("input_ids", "a list of token ids or a list of such lists");
        if (t.get<double>() < 0 || t.get<double>() > INT32_MAX)
          throw bad_request(
              fmt::format("Token id {} in 'input_ids' is outside the vocabulary", quote_json(t)),
              "input_ids");
        out.push_back(static_cast<int32_t>(t.get<double>()));
      }
      return out;
    };
    if (!ids->is_array() || ids->empty())
      f.fail_type("input_ids", "a non-empty list of token ids or a list of such lists");
    if ((*ids)[0].is_array()) {
      r.batch = true;
      for (const Json& p : *ids) {
        if (!p.is_array()) f.fail_type("input_ids", "a list of token ids or a list of such lists");
        r.input_ids.push_back(read(p));
      }
    } else {
      r.input_ids.push_back(read(*ids));
    }
  }
  for (const char* k : {"image_data", "audio_data", "video_data"})
    if (f.has(k)) throw bad_request(fmt::format("'{}': only text input is supported", k), k);
  if (auto v = f.boolean("return_logprob"); v && *v)
    throw bad_request("'return_logprob' is not supported by this server", "return_logprob");
  if (auto v = f.boolean("stream")) r.stream = *v;
  if (const Json* rid = f.get("rid"); rid && rid->is_string()) r.rid = rid->get<std::string>();

  GenerationParams& p = r.params;
  p.max_new_tokens = 128;  // SGLang's default
  p.max_tokens_param = "sampling_params.max_new_tokens";
  p.separate_reasoning = false;
  if (const Json* sp = f.object("sampling_params")) {
    const Fields s(*sp, "sampling_params.");
    read_sampling_fields(s, p);
    if (auto v = s.integer("max_new_tokens")) {
      if (*v < 1)
        throw bad_request(
            fmt::format("'sampling_params.max_new_tokens' must be at least 1, got {}", *v),
            "sampling_params.max_new_tokens");
      p.max_new_tokens = *v;
    }
  }
  if (auto v = f.boolean("return_hidden_states")) p.return_hidden_states = *v;
  if (p.n > 1) r.batch = true;
  return r;
}

Json native_finish_reason(const ChoiceResult& c) {
  if (!c.finished) return nullptr;
  switch (c.finish_reason) {
    case FinishReason::kLength:
      return Json{{"type", "length"}, {"length", c.completion_tokens}};
    case FinishReason::kAbort:
      return Json{{"type", "abort"}, {"message", "aborted"}};
    case FinishReason::kError:
      return Json{{"type", "abort"}, {"message", c.error.empty() ? "engine error" : c.error}};
    default:
      return Json{{"type", "stop"}, {"matched", c.matched_stop()}};
  }
}

Json meta_info_json(const ChoiceResult& c, const std::string& id, const SpecInfo& spec,
                    bool hidden_states) {
  Json m = {{"id", id},
            {"finish_reason", native_finish_reason(c)},
            {"prompt_tokens", c.prompt_tokens},
            {"completion_tokens", c.completion_tokens},
            {"cached_tokens", c.cached_tokens},
            {"weight_version", "default"},
            {"e2e_latency", c.e2e_latency}};
  if (spec.enabled) {
    // SGLang's per-request definitions: tokens per verify round, and accepted drafts over
    // proposed drafts.
    const int64_t v = c.spec_verify_steps;
    m["spec_verify_ct"] = v;
    m["spec_accept_length"] = v ? static_cast<double>(c.spec_accepted_drafts + v) / v : 0.0;
    // Drafts proposed are counted per round: with adaptive depth rounds differ in depth.
    m["spec_accept_rate"] = c.spec_draft_tokens ? static_cast<double>(c.spec_accepted_drafts) /
                                                      static_cast<double>(c.spec_draft_tokens)
                                                : 0.0;
    m["spec_accept_token_num"] = c.spec_accepted_drafts;
    m["spec_draft_token_num"] = c.spec_draft_tokens;
  }
  if (hidden_states) m["hidden_states"] = c.hidden_states;
  return m;
}

Json generate_result_json(const ChoiceResult& c, const std::string& id, const SpecInfo& spec,
                          bool hidden_states) {
  return Json{{"text", c.text},
              {"output_ids", c.output_ids},
              {"meta_info", meta_info_json(c, id, spec, hidden_states)}};
}

std::string CumulativeGenerateEvent::event(const ChoiceResult& c, const std::string& id,
                                           const SpecInfo& spec, std::optional<size_t> index) {
  auto escaped = [](std::string_view s) {
    std::string q = dump_json(Json(std::string(s)));  // "..." with the same escaping as dump_json
    return q.substr(1, q.size() - 2);
  };
  // The text only grows (the detokenizer emits whole characters, and trimming happens before
  // emission); anything else starts over.
  if (c.text.size() >= text_.size() && c.text.compare(0, text_.size(), text_) == 0) {
    text_json_ += escaped(std::string_view(c.text).substr(text_.size()));
    text_.append(c.text, text_.size());
  } else {
    text_ = c.text;
    text_json_ = escaped(c.text);
  }
  if (c.output_ids.size() < ids_) ids_ = 0, ids_json_.clear();
  for (; ids_ < c.output_ids.size(); ++ids_) {
    if (ids_ > 0) ids_json_ += ',';
    ids_json_ += std::to_string(c.output_ids[ids_]);
  }
  std::string out;
  out.reserve(text_json_.size() + ids_json_.size() + 320);
  out += "{\"text\":\"";
  out += text_json_;
  out += "\",\"output_ids\":[";
  out += ids_json_;
  out += "],\"meta_info\":";
  out += dump_json(meta_info_json(c, id, spec, false));
  if (index) out += fmt::format(",\"index\":{}", *index);
  out += '}';
  return out;
}

}  // namespace tandem::server
