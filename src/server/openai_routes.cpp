// Handlers of the OpenAI-compatible routes: parse, tokenize (rendering the chat template for
// chat), start a Generation, and answer with one JSON object or an SSE stream.
#include <fmt/format.h>

#include "core/error.h"
#include "server/generation_body.h"
#include "server/openai_protocol.h"
#include "server/routes.h"
#include "server/sse.h"

namespace tandem::server {

namespace {

void require_ready(const ServerState& st) {
  if (!st.ready()) throw ApiError(503, st.not_ready_reason());
}

void check_hidden_states(const ServerState& st, const GenerationParams& p) {
  if (p.return_hidden_states && !st.args().enable_return_hidden_states)
    throw bad_request(
        "return_hidden_states needs the server to be started with --enable-return-hidden-states",
        "return_hidden_states");
}

ResponseMeta meta(ServerState& st, const char* prefix) {
  return {st.new_id(prefix),
          std::chrono::duration_cast<std::chrono::seconds>(
              std::chrono::system_clock::now().time_since_epoch())
              .count(),
          st.model_name()};
}

// The error of a choice the engine failed, as the body of a non-streamed response. Headers
// are already sent when generation runs, so the status stays 200; the body says what failed.
Json engine_error_json(const ChoiceResult& c) {
  return error_json(
      500, "Generation failed: " + (c.error.empty() ? std::string("engine error") : c.error));
}

Json model_card(const ServerState& st) {
  Json card = {{"id", st.model_name()},        {"object", "model"},
               {"created", st.created()},      {"owned_by", "tandem"},
               {"root", st.args().model_path}, {"parent", nullptr}};
  if (st.ready()) card["max_model_len"] = st.engine().context_length();
  return card;
}

// The end of a stream: an error event if a choice failed, else the optional usage chunk
// (empty choices) and [DONE]. chunk builds the route's chunk object from a choices array.
template <typename ChunkFn>
auto stream_tail(std::shared_ptr<Generation> gen, ResponseMeta m, StreamOptions so, ChunkFn chunk) {
  return [gen, m, so, chunk](std::string& out) {
    if (const ChoiceResult* failed = gen->failed_choice()) {
      out += sse_error(500, "Generation failed: " + failed->error);
      return;
    }
    if (so.include_usage) {
      Json c = chunk(m, Json::array());
      c["usage"] = usage_json(*gen);
      out += sse_event(c);
    }
    out += sse_done();
  };
}

HttpResponse models(ServerState& st, const HttpRequest&) {
  return HttpResponse::json(Json{{"object", "list"}, {"data", Json::array({model_card(st)})}});
}

HttpResponse model_by_id(ServerState& st, const HttpRequest& req) {
  const std::string id = req.path.substr(std::string("/v1/models/").size());
  if (id != st.model_name())
    throw ApiError(404, fmt::format("The model '{}' does not exist", id), "model");
  return HttpResponse::json(model_card(st));
}

// How a chat request's output is parsed: reasoning (by the server's --reasoning-parser and the
// request's template kwargs), tool calls (by --tool-call-parser, when the request has tools and
// tool_choice is not "none"), and the marker tokens the detokenizer must keep for them.
Generation::Options chat_output_options(const ServerState& st, const ChatRequest& cr,
                                        const std::string& prompt) {
  Generation::Options o;
  o.prompt_noun = "messages";
  if (auto f = st.reasoning_format(); f && cr.params.separate_reasoning) {
    o.reasoning =
        reasoning_options(*f, cr.template_kwargs, ReasoningParser::prompt_opens_reasoning(prompt));
    if (o.reasoning) o.keep_special = st.reasoning_token_ids();
  }
  if (!st.tool_call_parser().empty() && cr.tools.parse_calls()) {
    auto tools = std::make_shared<const ToolSet>(cr.tools.tools);
    const std::string name = st.tool_call_parser();
    const ToolCallParser::Options po{cr.tools.parallel_tool_calls};
    o.tool_parser = [tools, name, po] { return make_tool_call_parser(name, tools, po); };
    o.keep_special.insert(st.tool_call_token_ids().begin(), st.tool_call_token_ids().end());
  }
  return o;
}

// tool_choice "required" or a named function: the output is made of calls in the
// --tool-call-parser's format, by constrained decoding (tool_call_grammar.h), not by hoping.
void force_tool_call(const ServerState& st, ChatRequest& cr) {
  using Mode = ToolChoice::Mode;
  const ToolChoice& choice = cr.tools.choice;
  if (choice.mode != Mode::kRequired && choice.mode != Mode::kFunction) return;
  if (st.tool_call_parser().empty())
    throw bad_request(
        "tool_choice \"required\" and named functions need a server started with "
        "--tool-call-parser (the format the calls are written in)",
        "tool_choice");
  if (!cr.params.constraint.empty())
    throw bad_request(fmt::format("tool_choice forces a tool call; it cannot be combined with '{}'",
                                  cr.params.constraint.param),
                      "tool_choice");
  const Json source = {{"parser", st.tool_call_parser()},
                       {"tools", cr.tools.tools},
                       {"function", choice.mode == Mode::kFunction ? choice.function : ""},
                       {"parallel", cr.tools.parallel_tool_calls}};
  cr.params.constraint =
      ConstraintSpec{ConstraintSpec::Kind::kToolCalls, source.dump(), false, "tool_choice"};
}

HttpResponse chat_completions(ServerState& st, const HttpRequest& req) {
  ChatRequest cr = parse_chat_request(parse_json_object(req.body));
  check_hidden_states(st, cr.params);
  force_tool_call(st, cr);
  require_ready(st);
  const ChatTemplate* tpl = st.chat_template();
  if (!tpl)
    throw bad_request(
        "This model has no chat template (chat_template.jinja or tokenizer_config.json); use "
        "/v1/completions");
  const std::string prompt =
      tpl->render(chat_template_context(cr, *tpl, st.bos_token(), st.eos_token()));
  PromptInput in;
  in.ids = st.tokenizer().encode(prompt, /*add_special_tokens=*/false);
  Generation::Options opts = chat_output_options(st, cr, prompt);
  const bool reasoning = opts.reasoning.has_value();
  auto gen = std::make_shared<Generation>(st, std::vector<PromptInput>{std::move(in)}, cr.params,
                                          std::move(opts));
  const ResponseMeta m = meta(st, "chatcmpl-");

  HttpResponse res;
  if (!cr.stream.stream) {
    res.stream = std::make_shared<GenerationBody>(
        gen, nullptr, nullptr, [gen, m, reasoning](std::string& out) {
          const ChoiceResult* failed = gen->failed_choice();
          out = dump_json(failed ? engine_error_json(*failed)
                                 : chat_completion_json(m, *gen, reasoning));
        });
    return res;
  }
  const StreamOptions so = cr.stream;
  auto with_usage = [gen, so](Json chunk) {
    if (so.continuous_usage) chunk["usage"] = usage_json(*gen);
    return chunk;
  };
  auto on_start = [gen, m, with_usage](std::string& out) {
    // The role comes first, before any token, for every choice.
    Json choices = Json::array();
    for (const ChoiceResult& c : gen->choices())
      choices.push_back({{"index", c.index},
                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr}});
    out += sse_event(with_usage(chat_chunk_json(m, std::move(choices))));
  };
  auto on_deltas = [gen, m, with_usage](const std::vector<ChoiceDelta>& deltas, std::string& out) {
    for (const ChoiceDelta& d : deltas)
      for (Json& chunk :
           chat_delta_chunks(m, d, gen->choices()[d.index], gen->params().return_hidden_states))
        out += sse_event(with_usage(std::move(chunk)));
  };
  auto on_done = stream_tail(gen, m, so, chat_chunk_json);
  res.content_type = kEventStream;
  res.stream = std::make_shared<GenerationBody>(gen, on_start, on_deltas, on_done);
  return res;
}

HttpResponse completions(ServerState& st, const HttpRequest& req) {
  const CompletionRequest cr = parse_completion_request(parse_json_object(req.body));
  check_hidden_states(st, cr.params);
  require_ready(st);
  const Tokenizer& tok = st.tokenizer();
  std::vector<PromptInput> inputs;
  std::vector<std::string> echo;
  for (const CompletionPrompt& p : cr.prompts) {
    PromptInput in;
    // Hugging Face tokenizers add special tokens by default; SGLang and vLLM encode
    // completion prompts that way.
    in.ids = p.text ? tok.encode(*p.text, /*add_special_tokens=*/true) : p.ids;
    if (cr.echo)
      echo.push_back(p.text ? *p.text : tok.decode(p.ids, cr.params.skip_special_tokens));
    inputs.push_back(std::move(in));
  }
  auto gen = std::make_shared<Generation>(st, std::move(inputs), cr.params,
                                          Generation::Options{});  // errors name the "prompt"
  const ResponseMeta m = meta(st, "cmpl-");

  HttpResponse res;
  if (!cr.stream.stream) {
    res.stream =
        std::make_shared<GenerationBody>(gen, nullptr, nullptr, [gen, m, echo](std::string& out) {
          const ChoiceResult* failed = gen->failed_choice();
          out = dump_json(failed ? engine_error_json(*failed) : completion_json(m, *gen, echo));
        });
    return res;
  }
  const StreamOptions so = cr.stream;
  auto with_usage = [gen, so](Json chunk) {
    if (so.continuous_usage) chunk["usage"] = usage_json(*gen);
    return chunk;
  };
  auto on_start = [gen, m, echo, with_usage](std::string& out) {
    if (echo.empty()) return;
    Json choices = Json::array();
    for (const ChoiceResult& c : gen->choices())
      choices.push_back({{"index", c.index},
                         {"text", echo[c.prompt_index]},
                         {"logprobs", nullptr},
                         {"finish_reason", nullptr}});
    out += sse_event(with_usage(completion_chunk_json(m, std::move(choices))));
  };
  auto on_deltas = [gen, m, with_usage](const std::vector<ChoiceDelta>& deltas, std::string& out) {
    for (const ChoiceDelta& d : deltas) {
      const ChoiceResult& c = gen->choices()[d.index];
      if (!d.text.empty())
        out += sse_event(
            with_usage(completion_chunk_json(m, Json::array({{{"index", d.index},
                                                              {"text", d.text},
                                                              {"logprobs", nullptr},
                                                              {"finish_reason", nullptr}}}))));
      if (d.finished && c.finish_reason != FinishReason::kError) {
        Json choice = {{"index", d.index},
                       {"text", ""},
                       {"logprobs", nullptr},
                       {"finish_reason", openai_finish_reason(c.finish_reason)},
                       {"matched_stop", c.matched_stop()}};
        if (gen->params().return_hidden_states) choice["hidden_states"] = c.hidden_states;
        out += sse_event(with_usage(completion_chunk_json(m, Json::array({std::move(choice)}))));
      }
    }
  };
  auto on_done = stream_tail(gen, m, so, completion_chunk_json);
  res.content_type = kEventStream;
  res.stream = std::make_shared<GenerationBody>(gen, on_start, on_deltas, on_done);
  return res;
}

}  // namespace

void add_openai_routes(Router& r, ServerState& st) {
  auto bind = [&st](HttpResponse (*fn)(ServerState&, const HttpRequest&)) {
    return [&st, fn](const HttpRequest& req) { return fn(st, req); };
  };
  r.add("GET", "/v1/models", bind(models));
  r.add("GET", "/v1/models/*", bind(model_by_id));
  r.add("POST", "/v1/chat/completions", bind(chat_completions));
  r.add("POST", "/v1/completions", bind(completions));
}

}  // namespace tandem::server
