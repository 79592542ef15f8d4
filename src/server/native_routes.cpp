// SGLang-native routes (/generate, /get_server_info, /get_model_info, /flush_cache), the
// operational ones (/health, /health_generate, /metrics, /version) and /tokenize, /detokenize.
#include <fmt/format.h>

#include <algorithm>

#include "server/generation_body.h"
#include "server/routes.h"
#include "server/sglang_protocol.h"
#include "server/sse.h"

namespace tandem::server {

namespace {

void require_ready(const ServerState& st) {
  if (!st.ready()) throw ApiError(503, st.not_ready_reason());
}

SpecInfo spec_info(const ServerState& st) {
  SpecInfo s;
  if (st.ready()) {
    const EngineOptions& o = st.engine().options();
    s.enabled = o.spec.enabled();
    s.num_steps = o.spec.num_steps;
  }
  return s;
}

HttpResponse generate(ServerState& st, const HttpRequest& req) {
  const GenerateRequest gr = parse_generate_request(parse_json_object(req.body));
  if (gr.params.return_hidden_states && !st.args().enable_return_hidden_states)
    throw bad_request(
        "return_hidden_states needs the server to be started with --enable-return-hidden-states",
        "return_hidden_states");
  require_ready(st);
  std::vector<PromptInput> inputs;
  for (const std::string& t : gr.texts)
    inputs.push_back({st.tokenizer().encode(t, /*add_special_tokens=*/true)});
  for (const auto& ids : gr.input_ids) inputs.push_back({ids});
  Generation::Options opts;
  opts.prompt_noun = "input";
  auto gen = std::make_shared<Generation>(st, std::move(inputs), gr.params, std::move(opts));
  const std::string base = gr.rid.empty() ? st.new_id("") : gr.rid;
  const bool batch = gr.batch;
  auto id_of = [base, batch](size_t i) { return batch ? fmt::format("{}_{}", base, i) : base; };
  const SpecInfo spec = spec_info(st);
  const bool hidden = gr.params.return_hidden_states;

  HttpResponse res;
  if (!gr.stream) {
    res.stream = std::make_shared<GenerationBody>(
        gen, nullptr, nullptr, [gen, id_of, spec, hidden, batch](std::string& out) {
          if (const ChoiceResult* failed = gen->failed_choice()) {
            out = dump_json(error_json(500, "Generation failed: " + failed->error));
            return;
          }
          Json all = Json::array();
          for (const ChoiceResult& c : gen->choices())
            all.push_back(generate_result_json(c, id_of(c.index), spec, hidden));
          out = dump_json(batch ? all : all[0]);
        });
    return res;
  }
  // Each event carries the cumulative text and ids, as SGLang streams them (serialized
  // incrementally; the last event of a request that asked for hidden states is built whole).
  auto cumulative = std::make_shared<std::vector<CumulativeGenerateEvent>>(gen->choices().size());
  auto on_deltas = [gen, id_of, spec, hidden, batch, cumulative](
                       const std::vector<ChoiceDelta>& deltas, std::string& out) {
    for (const ChoiceDelta& d : deltas) {
      const ChoiceResult& c = gen->choices()[d.index];
      if (c.finish_reason == FinishReason::kError) continue;
      if (d.new_tokens == 0 && d.text.empty() && !d.finished) continue;
      if (hidden && d.finished) {
        Json ev = generate_result_json(c, id_of(c.index), spec, true);
        if (batch) ev["index"] = c.index;
        out += sse_event(ev);
        continue;
      }
      out += "data: ";
      out += (*cumulative)[d.index].event(c, id_of(c.index), spec,
                                          batch ? std::optional<size_t>(c.index) : std::nullopt);
      out += "\n\n";
    }
  };
  auto on_done = [gen](std::string& out) {
    if (const ChoiceResult* failed = gen->failed_choice()) {
      out += sse_error(500, "Generation failed: " + failed->error);
      return;
    }
    out += sse_done();
  };
  res.content_type = kEventStream;
  res.stream = std::make_shared<GenerationBody>(gen, nullptr, on_deltas, on_done);
  return res;
}

Json internal_state(ServerState& st) {
  const EngineMetrics m = st.engine().metrics();
  const EngineOptions& o = st.engine().options();
  Json s = {{"last_gen_throughput", m.last_gen_throughput},
            {"num_running_reqs", m.num_running},
            {"num_queue_reqs", m.num_waiting},
            {"kv_pages_total", m.kv_pages_total},
            {"kv_pages_used", m.kv_pages_used},
            {"kv_pages_cached", m.kv_pages_cached},
            {"page_size", o.page_size},
            {"max_total_num_tokens", m.kv_pages_total * o.page_size},
            {"token_usage",
             m.kv_pages_total ? static_cast<double>(m.kv_pages_used) / m.kv_pages_total : 0.0},
            {"context_length", st.engine().context_length()},
            {"requests_total", m.requests_total},
            {"requests_finished", m.requests_finished},
            {"preemptions_total", m.preemptions_total},
            {"prompt_tokens_total", m.prompt_tokens_total},
            {"generation_tokens_total", m.generation_tokens_total},
            {"cached_tokens_total", m.cached_tokens_total}};
  if (o.spec.enabled()) {
    // sglang.bench_serving prints "Accept length" from this field when it is present.
    s["avg_spec_accept_length"] = m.avg_spec_accept_length();
    s["spec_verify_steps"] = m.spec_verify_steps;
    s["spec_draft_tokens"] = m.spec_draft_tokens;
    s["spec_accepted_tokens"] = m.spec_accepted_tokens;
    s["spec_accepted_per_position"] = m.spec_accepted_per_position;
    // Decode steps by the depth they ran (index = drafts per round, 0 = plain decoding).
    s["spec_adaptive"] = o.spec.adaptive;
    s["spec_depth_steps"] = m.spec_depth_steps;
    s["spec_draft_prefill_tokens"] = m.spec_draft_prefill_tokens;
    s["spec_draft_catch_up_tokens"] = m.spec_draft_catch_up_tokens;
  }
  return s;
}

HttpResponse server_info(ServerState& st, const HttpRequest&) {
  Json j = st.args().to_json();
  j["status"] = st.ready() ? "ready" : st.stopping() ? "stopping" : "loading";
  j["internal_states"] = st.ready() ? Json::array({internal_state(st)}) : Json::array();
  if (st.ready()) j["page_size"] = st.engine().options().page_size;  // --page-size 0 is "auto"
  if (st.ready()) {
    j["max_total_num_tokens"] = j["internal_states"][0]["max_total_num_tokens"];
    j["context_length"] = st.engine().context_length();
  }
  j["version"] = kTandemVersion;
  return HttpResponse::json(j);
}

HttpResponse model_info(ServerState& st, const HttpRequest&) {
  const ServerArgs& a = st.args();
  Json j = {{"model_path", a.model_path},
            {"tokenizer_path", a.tokenizer_path.empty() ? a.model_path : a.tokenizer_path},
            {"served_model_name", st.model_name()},
            {"is_generation", true},
            {"preferred_sampling_params", nullptr},
            {"weight_version", "default"},
            {"has_image_understanding", false},
            {"has_audio_understanding", false}};
  if (st.ready()) {
    const ModelConfig& c = st.engine().model_config();
    j["architectures"] = Json::array({c.architecture});
    j["max_context_length"] = st.engine().context_length();
    j["vocab_size"] = c.vocab_size;
    j["has_mtp"] = c.has_mtp();
  }
  return HttpResponse::json(j);
}

HttpResponse flush_cache(ServerState& st, const HttpRequest&) {
  require_ready(st);
  // SGLang answers in plain text, 400 while requests are in flight.
  if (st.engine().flush_cache()) return HttpResponse::text("Cache flushed.\n");
  return HttpResponse::text("Cache not flushed: requests are running or waiting.\n", 400);
}

HttpResponse health(ServerState& st, const HttpRequest&) {
  if (!st.ready()) return HttpResponse::error(503, st.not_ready_reason());
  return HttpResponse::text("");
}

// Runs a one-token generation end to end, as SGLang's /health_generate does.
HttpResponse health_generate(ServerState& st, const HttpRequest&) {
  if (!st.ready()) return HttpResponse::error(503, st.not_ready_reason());
  GenerationParams p;
  p.max_new_tokens = 1;
  p.temperature = 0;
  p.ignore_eos = true;
  Generation gen(st, {PromptInput{{0}}}, p, Generation::Options{});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<ChoiceDelta> sink;
  while (!gen.done() && std::chrono::steady_clock::now() < deadline)
    gen.poll(sink, std::chrono::milliseconds(100));
  if (!gen.done() || gen.failed_choice())
    return HttpResponse::error(503, "The engine did not complete a one-token generation");
  return HttpResponse::text("");
}

HttpResponse metrics(ServerState& st, const HttpRequest&) {
  const EngineMetrics m = st.ready() ? st.engine().metrics() : EngineMetrics{};
  HttpResponse r = HttpResponse::text(
      render_prometheus(m, st.metrics(),
                        MetricsContext{st.model_name(), st.ready() ? st.engine().options().page_size
                                                                   : st.args().page_size}));
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return r;
}

// vLLM's and SGLang's /tokenize: {"prompt", "add_special_tokens"} -> {"tokens", "count",
// "max_model_len"}.
HttpResponse tokenize(ServerState& st, const HttpRequest& req) {
  const Json body = parse_json_object(req.body);
  const Fields f(body);
  require_ready(st);
  const auto prompt = f.string("prompt");
  if (!prompt) throw bad_request("'prompt' (a string) is required", "prompt");
  const std::vector<int32_t> ids =
      st.tokenizer().encode(*prompt, f.boolean("add_special_tokens").value_or(true));
  return HttpResponse::json(Json{
      {"tokens", ids}, {"count", ids.size()}, {"max_model_len", st.engine().context_length()}});
}

// /detokenize: {"tokens", "skip_special_tokens"} -> {"prompt" (vLLM), "text" (SGLang)}. The
// whole-sequence decode, independent of the incremental detokenizer the streams use.
HttpResponse detokenize(ServerState& st, const HttpRequest& req) {
  const Json body = parse_json_object(req.body);
  const Fields f(body);
  require_ready(st);
  const Json* tokens = f.get("tokens");
  if (!tokens) throw bad_request("'tokens' (a list of token ids) is required", "tokens");
  if (!tokens->is_array()) f.fail_type("tokens", "a list of token ids");
  // Ids the model can produce decode (to nothing when the tokenizer has no token for them);
  // anything else is named, not silently dropped.
  const int64_t vocab =
      std::max<int64_t>(st.tokenizer().vocab_size(), st.engine().model_config().vocab_size);
  std::vector<int32_t> ids;
  ids.reserve(tokens->size());
  for (const Json& t : *tokens) {
    if (!is_integral(t)) f.fail_type("tokens", "a list of token ids");
    if (t.is_number_unsigned() ? t.get<uint64_t>() >= static_cast<uint64_t>(vocab)
                               : (t.get<double>() < 0 || t.get<double>() >= vocab))
      throw bad_request(
          fmt::format("Token id {} is outside the vocabulary [0, {})", quote_json(t), vocab),
          "tokens");
    ids.push_back(static_cast<int32_t>(t.get<double>()));
  }
  const std::string text =
      st.tokenizer().decode(ids, f.boolean("skip_special_tokens").value_or(true));
  return HttpResponse::json(Json{{"prompt", text}, {"text", text}});
}

HttpResponse version(ServerState&, const HttpRequest&) {
  return HttpResponse::json(Json{{"version", kTandemVersion}});
}

}  // namespace

void add_native_routes(Router& r, ServerState& st) {
  auto bind = [&st](HttpResponse (*fn)(ServerState&, const HttpRequest&)) {
    return [&st, fn](const HttpRequest& req) { return fn(st, req); };
  };
  r.add("POST", "/generate", bind(generate));
  r.add("GET", "/get_server_info", bind(server_info));
  r.add("GET", "/server_info", bind(server_info));
  r.add("GET", "/get_model_info", bind(model_info));
  r.add("GET", "/model_info", bind(model_info));
  r.add("POST", "/flush_cache", bind(flush_cache));
  r.add("GET", "/flush_cache", bind(flush_cache));
  r.add("GET", "/health", bind(health));
  r.add("GET", "/health_generate", bind(health_generate));
  r.add("GET", "/metrics", bind(metrics));
  r.add("GET", "/version", bind(version));
  r.add("POST", "/tokenize", bind(tokenize));
  r.add("POST", "/detokenize", bind(detokenize));
}

}  // namespace tandem::server
