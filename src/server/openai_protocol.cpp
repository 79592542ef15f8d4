#include "server/openai_protocol.h"

#include <fmt/format.h>

#include <regex>

namespace tandem::server {

namespace {

StreamOptions read_stream_options(const Fields& f) {
  StreamOptions s;
  if (auto v = f.boolean("stream")) s.stream = *v;
  if (const Json* so = f.object("stream_options")) {
    const Fields o(*so, "stream_options.");
    if (auto v = o.boolean("include_usage")) s.include_usage = *v;
    if (auto v = o.boolean("continuous_usage_stats")) s.continuous_usage = *v;
  }
  return s;
}

std::optional<int64_t> read_max_tokens(const Fields& f, const char* key) {
  auto v = f.integer(key);
  if (v && *v < 1) throw bad_request(fmt::format("'{}' must be at least 1, got {}", key, *v), key);
  return v;
}

void validate_messages(const Json& messages) {
  if (!messages.is_array() || messages.empty())
    throw bad_request("'messages' must be a non-empty list of message objects", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) throw bad_request(fmt::format("'{}' must be an object", where), where);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      throw bad_request(fmt::format("'{}.role' must be a string", where), where + ".role");
    auto content = m.find("content");
    if (content == m.end() || content->is_null() || content->is_string()) continue;
    if (!content->is_array())
      throw bad_request(fmt::format("'{}.content' must be a string or a list of parts", where),
                        where + ".content");
    for (const Json& part : *content) {
      if (part.is_string()) continue;
      const auto type = part.is_object() ? part.find("type") : part.end();
      if (!part.is_object() || type == part.end() || !type->is_string())
        throw bad_request(fmt::format("'{}.content' parts must be objects with a 'type'", where),
                          where + ".content");
      if (*type != "text")
        throw bad_request(fmt::format("'{}.content': only text parts are supported, got {}", where,
                                      quote_json(*type)),
                          where + ".content");
      auto text = part.find("text");
      if (text == part.end() || !text->is_string())
        throw bad_request(fmt::format("'{}.content' text parts need a string 'text'", where),
                          where + ".content");
    }
  }
}

// Whether an assistant message has a tool call whose arguments are a string.
bool has_string_arguments(const Json& messages) {
  for (const Json& m : messages) {
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (const Json& call : *calls) {
      auto fn = call.is_object() ? call.find("function") : call.end();
      if (fn != call.end() && fn->is_object() && fn->contains("arguments") &&
          (*fn)["arguments"].is_string())
        return true;
    }
  }
  return false;
}

// Assistant messages' tool_calls[].function.arguments given as JSON strings become objects.
void parse_tool_call_arguments(Json& messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    Json& m = messages[i];
    auto calls = m.find("tool_calls");
    if (m["role"] != "assistant" || calls == m.end() || !calls->is_array()) continue;
    for (size_t j = 0; j < calls->size(); ++j) {
      Json& call = (*calls)[j];
      auto fn = call.is_object() ? call.find("function") : call.end();
      if (fn == call.end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      if (args == fn->end() || !args->is_string()) continue;
      const std::string& text = args->get_ref<const std::string&>();
      std::optional<Json> parsed = text.find_first_not_of(" \t\r\n") == std::string::npos
                                       ? Json::object()
                                       : parse_json_bounded(text);
      if (!parsed || !parsed->is_object()) {
        const std::string where =
            fmt::format("messages[{}].tool_calls[{}].function.arguments", i, j);
        throw bad_request(fmt::format("'{}' must be a JSON object (as a string), got {}", where,
                                      quote_json(*args)),
                          where);
      }
      *args = std::move(*parsed);
    }
  }
}

}  // namespace

ChatRequest parse_chat_request(const Json& body) {
  const Fields f(body);
  ChatRequest r;
  const Json* messages = f.get("messages");
  if (!messages) throw bad_request("'messages' is required", "messages");
  validate_messages(*messages);
  r.messages = *messages;
  r.tools = parse_tool_request(f);
  if (const Json* kw = f.object("chat_template_kwargs")) r.template_kwargs = *kw;
  // SGLang forwards reasoning_effort to templates that read it.
  if (auto effort = f.string("reasoning_effort");
      effort && !r.template_kwargs.contains("reasoning_effort"))
    r.template_kwargs["reasoning_effort"] = *effort;
  if (auto v = f.boolean("add_generation_prompt")) r.add_generation_prompt = *v;
  read_sampling_fields(f, r.params);
  // max_completion_tokens is the newer spelling and wins, as in OpenAI's API.
  auto max_tokens = read_max_tokens(f, "max_tokens");
  auto max_completion = read_max_tokens(f, "max_completion_tokens");
  r.params.max_new_tokens = max_completion ? max_completion : max_tokens;
  r.params.max_tokens_param = max_completion ? "max_completion_tokens" : "max_tokens";
  if (auto v = f.boolean("return_hidden_states")) r.params.return_hidden_states = *v;
  r.stream = read_stream_options(f);
  return r;
}

CompletionRequest parse_completion_request(const Json& body) {
  const Fields f(body);
  CompletionRequest r;
  const Json* prompt = f.get("prompt");
  if (!prompt) throw bad_request("'prompt' is required", "prompt");
  auto bad_prompt = [] {
    return bad_request(
        "'prompt' must be a string, a list of strings, a list of token ids, or a list of lists "
        "of token ids",
        "prompt");
  };
  auto read_ids = [&](const Json& arr) {
    CompletionPrompt p;
    for (const Json& t : arr) {
      if (!is_integral(t)) throw bad_prompt();
      if (t.get<double>() < 0 || t.get<double>() > INT32_MAX)
        throw bad_request(
            fmt::format("Token id {} in 'prompt' is outside the vocabulary", quote_json(t)),
            "prompt");
      p.ids.push_back(static_cast<int32_t>(t.get<double>()));
    }
    return p;
  };
  if (prompt->is_string()) {
    r.prompts.push_back({prompt->get<std::string>(), {}});
  } else if (prompt->is_array() && !prompt->empty()) {
    const Json& first = (*prompt)[0];
    if (first.is_string()) {
      for (const Json& p : *prompt) {
        if (!p.is_string()) throw bad_prompt();
        r.prompts.push_back({p.get<std::string>(), {}});
      }
    } else if (first.is_number()) {
      r.prompts.push_back(read_ids(*prompt));
    } else if (first.is_array()) {
      for (const Json& p : *prompt) {
        if (!p.is_array()) throw bad_prompt();
        r.prompts.push_back(read_ids(p));
      }
    } else {
      throw bad_prompt();
    }
  } else {
    throw bad_prompt();
  }
  if (auto v = f.boolean("echo")) r.echo = *v;
  if (f.has("suffix")) throw bad_request("'suffix' is not supported by this server", "suffix");
  read_sampling_fields(f, r.params);
  // OpenAI's (and SGLang's) default for completions.
  r.params.max_new_tokens = read_max_tokens(f, "max_tokens").value_or(16);
  if (auto v = f.boolean("return_hidden_states")) r.params.return_hidden_states = *v;
  r.params.separate_reasoning = false;
  r.stream = read_stream_options(f);
  return r;
}

bool template_reads_argument_mappings(const std::string& source) {
  // tc.arguments.items(), arguments | items, arguments is mapping, ['arguments']|tojson, and
  // GLM's alias: {% set _args = tc.arguments %}{% for k, v in _args.items() %}.
  static const std::regex reads(
      R"(arguments(['"]?\])?\s*(\|\s*(tojson|items|dictsort)\b|\.items\s*\(|\s+is\s+mapping)|_args\.items\s*\()");
  return std::regex_search(source, reads);
}

bool template_handles_content_parts(const std::string& source) {
  static const std::regex iterates(R"(for\s+\w+\s+in\s+[\w.\[\]'"]*content)");
  return source.find("content is string") != std::string::npos ||
         source.find("content is iterable") != std::string::npos ||
         source.find("content is sequence") != std::string::npos ||
         std::regex_search(source, iterates);
}

Json chat_template_context(const ChatRequest& req, const ChatTemplate& tpl,
                           const std::string& bos_token, const std::string& eos_token) {
  Json ctx = Json::object();
  for (auto& [k, v] : req.template_kwargs.items()) ctx[k] = v;
  Json messages = req.messages;
  if (!template_handles_content_parts(tpl.source())) {
    for (Json& m : messages) {
      auto c = m.find("content");
      if (c == m.end() || !c->is_array()) continue;
      std::string text;
      for (const Json& part : *c) {
        if (!text.empty()) text += "\n";
        text += part.is_string() ? part.get<std::string>() : part["text"].get<std::string>();
      }
      *c = text;
    }
  }
  if (has_string_arguments(messages) && template_reads_argument_mappings(tpl.source()))
    parse_tool_call_arguments(messages);
  ctx["messages"] = std::move(messages);
  ctx["tools"] = req.tools.template_tools();
  if (!ctx.contains("documents")) ctx["documents"] = nullptr;
  if (!ctx.contains("add_generation_prompt"))
    ctx["add_generation_prompt"] = req.add_generation_prompt;
  if (!ctx.contains("bos_token")) ctx["bos_token"] = bos_token;
  if (!ctx.contains("eos_token")) ctx["eos_token"] = eos_token;
  return ctx;
}

const char* openai_finish_reason(const ChoiceResult& c) {
  if (!c.tool_calls.empty() && c.finish_reason == FinishReason::kStop) return "tool_calls";
  return openai_finish_reason(c.finish_reason);
}

Json chat_matched_stop(const ChoiceResult& c) {
  if (!c.tool_calls.empty() && c.finish_reason == FinishReason::kStop) return nullptr;
  return c.matched_stop();
}

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
    case FinishReason::kError:
      return "abort";
    default:
      return "stop";
  }
}

Json usage_json(const Generation& g) {
  int64_t prompt = 0, completion = 0, cached = 0;
  std::vector<bool> counted(g.num_prompts(), false);
  for (const ChoiceResult& c : g.choices()) {
    completion += c.completion_tokens;
    // A prompt is counted once however many choices it has (n > 1).
    if (!counted[c.prompt_index]) {
      counted[c.prompt_index] = true;
      prompt += c.prompt_tokens;
      cached += c.cached_tokens;
    }
  }
  return Json{{"prompt_tokens", prompt},
              {"completion_tokens", completion},
              {"total_tokens", prompt + completion},
              {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

Json chat_message_json(const ChoiceResult& c, bool with_reasoning) {
  // With tool calls, empty content is null, as OpenAI returns it.
  Json msg = {{"role", "assistant"},
              {"content", c.text.empty() && !c.tool_calls.empty() ? Json() : Json(c.text)}};
  if (with_reasoning) msg["reasoning_content"] = c.reasoning.empty() ? Json() : Json(c.reasoning);
  Json calls = Json::array();
  for (const ToolCall& t : c.tool_calls)
    calls.push_back({{"id", t.id},
                     {"type", "function"},
                     {"function", {{"name", t.name}, {"arguments", t.arguments}}}});
  msg["tool_calls"] = calls.empty() ? Json() : std::move(calls);
  return msg;
}

Json chat_completion_json(const ResponseMeta& m, const Generation& g, bool with_reasoning) {
  Json choices = Json::array();
  for (const ChoiceResult& c : g.choices()) {
    Json choice = {{"index", c.index},
                   {"message", chat_message_json(c, with_reasoning)},
                   {"logprobs", nullptr},
                   {"finish_reason", openai_finish_reason(c)},
                   {"matched_stop", chat_matched_stop(c)}};
    if (g.params().return_hidden_states) choice["hidden_states"] = c.hidden_states;
    choices.push_back(std::move(choice));
  }
  return Json{{"id", m.id},       {"object", "chat.completion"},   {"created", m.created},
              {"model", m.model}, {"choices", std::move(choices)}, {"usage", usage_json(g)}};
}

std::vector<Json> chat_delta_chunks(const ResponseMeta& m, const ChoiceDelta& d,
                                    const ChoiceResult& c, bool hidden_states) {
  std::vector<Json> chunks;
  auto chunk = [&](Json delta, Json finish) {
    Json choice = {{"index", d.index},
                   {"delta", std::move(delta)},
                   {"logprobs", nullptr},
                   {"finish_reason", std::move(finish)}};
    return choice;
  };
  if (!d.text.empty() || !d.reasoning.empty()) {
    Json delta = Json::object();
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.text.empty()) delta["content"] = d.text;
    chunks.push_back(chat_chunk_json(m, Json::array({chunk(std::move(delta), nullptr)})));
  }
  // Per call touched, in order: its start (id, type, name, arguments "") as OpenAI sends it,
  // then its argument fragments merged into one chunk.
  auto tool_chunk = [&](ToolCallDelta t) {
    chunks.push_back(chat_chunk_json(
        m, Json::array({chunk({{"tool_calls", tool_call_delta_json({std::move(t)})}}, nullptr)})));
  };
  for (size_t k = 0; k < d.tool_calls.size();) {
    const ToolCallDelta& first = d.tool_calls[k];
    ToolCallDelta fragments{first.index, "", "", ""};
    if (!first.id.empty()) tool_chunk({first.index, first.id, first.name, ""});
    while (k < d.tool_calls.size() && d.tool_calls[k].index == first.index)
      fragments.arguments += d.tool_calls[k++].arguments;
    if (!fragments.arguments.empty()) tool_chunk(std::move(fragments));
  }
  if (d.finished && c.finish_reason != FinishReason::kError) {
    Json choice = chunk(Json::object(), openai_finish_reason(c));
    choice["matched_stop"] = chat_matched_stop(c);
    if (hidden_states) choice["hidden_states"] = c.hidden_states;
    chunks.push_back(chat_chunk_json(m, Json::array({std::move(choice)})));
  }
  return chunks;
}

Json chat_chunk_json(const ResponseMeta& m, Json choices) {
  return Json{{"id", m.id},
              {"object", "chat.completion.chunk"},
              {"created", m.created},
              {"model", m.model},
              {"choices", std::move(choices)}};
}

Json tool_call_delta_json(const std::vector<ToolCallDelta>& calls) {
  Json items = Json::array();
  for (const ToolCallDelta& t : calls) {
    Json item = {{"index", t.index}};
    if (!t.id.empty()) {
      item["id"] = t.id;
      item["type"] = "function";
      item["function"] = {{"name", t.name}, {"arguments", t.arguments}};
    } else {
      item["function"] = {{"arguments", t.arguments}};
    }
    items.push_back(std::move(item));
  }
  return items;
}

Json completion_json(const ResponseMeta& m, const Generation& g,
                     const std::vector<std::string>& echo_text) {
  Json choices = Json::array();
  for (const ChoiceResult& c : g.choices()) {
    std::string text = echo_text.empty() ? c.text : echo_text[c.prompt_index] + c.text;
    Json choice = {{"index", c.index},
                   {"text", std::move(text)},
                   {"logprobs", nullptr},
                   {"finish_reason", openai_finish_reason(c.finish_reason)},
                   {"matched_stop", c.matched_stop()}};
    if (g.params().return_hidden_states) choice["hidden_states"] = c.hidden_states;
    choices.push_back(std::move(choice));
  }
  return Json{{"id", m.id},       {"object", "text_completion"},   {"created", m.created},
              {"model", m.model}, {"choices", std::move(choices)}, {"usage", usage_json(g)}};
}

Json completion_chunk_json(const ResponseMeta& m, Json choices) {
  return Json{{"id", m.id},
              {"object", "text_completion"},
              {"created", m.created},
              {"model", m.model},
              {"choices", std::move(choices)}};
}

}  // namespace tandem::server
