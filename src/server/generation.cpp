#include "server/generation.h"

#include <fmt/format.h>

#include <cmath>
#include <random>

#include "core/error.h"

namespace tandem::server {

using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t, Clock::time_point now) {
  return std::chrono::duration<double>(now - t).count();
}

[[noreturn]] void unsupported(const Fields& f, const char* key, const char* what) {
  throw bad_request(fmt::format("'{}' is not supported by this server ({})", f.param(key), what),
                    f.param(key));
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t choice_seed(std::optional<int64_t> seed, size_t index) {
  uint64_t s;
  if (seed) {
    s = splitmix64(static_cast<uint64_t>(*seed) + 0x632BE59BD9B4E019ull * index);
  } else {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    s = rng();
  }
  return s == 0 ? 1 : s;
}

void read_sampling_fields(const Fields& f, GenerationParams& p) {
  if (auto v = f.number("temperature")) {
    if (!std::isfinite(*v) || *v < 0)
      throw bad_request(fmt::format("'{}' must be at least 0, got {}", f.param("temperature"), *v),
                        f.param("temperature"));
    p.temperature = static_cast<float>(*v);
  }
  if (auto v = f.number("top_p")) {
    if (!(*v > 0 && *v <= 1))
      throw bad_request(fmt::format("'{}' must be in (0, 1], got {}", f.param("top_p"), *v),
                        f.param("top_p"));
    p.top_p = static_cast<float>(*v);
  }
  if (auto v = f.integer("top_k")) {
    if (*v < -1 || *v > INT32_MAX)
      throw bad_request(
          fmt::format("'{}' must be -1 (off) or a positive integer, got {}", f.param("top_k"), *v),
          f.param("top_k"));
    p.top_k = *v <= 0 ? -1 : static_cast<int32_t>(*v);  // vLLM spells "off" as 0 too
  }
  if (auto v = f.integer("seed")) p.seed = *v;
  if (auto v = f.integer("sampling_seed")) p.seed = *v;  // SGLang's native spelling
  if (auto v = f.integer("n")) {
    if (*v < 1 || *v > 128)
      throw bad_request(fmt::format("'{}' must be in [1, 128], got {}", f.param("n"), *v),
                        f.param("n"));
    p.n = *v;
  }
  if (auto v = f.integer("best_of"); v && *v != p.n && *v != 1)
    unsupported(f, "best_of", "only best_of == n");
  p.stop = f.string_or_list("stop");
  p.stop_token_ids = f.int_list("stop_token_ids");
  if (auto v = f.boolean("ignore_eos")) p.ignore_eos = *v;
  if (auto v = f.boolean("skip_special_tokens")) p.skip_special_tokens = *v;
  if (auto v = f.boolean("no_stop_trim")) p.no_stop_trim = *v;
  if (auto v = f.boolean("separate_reasoning")) p.separate_reasoning = *v;

  // Sampling features the engine lacks: their neutral values are accepted (clients often send
  // them explicitly), anything else would silently change the meaning of the request.
  if (auto v = f.number("min_p")) {
    if (*v < 0 || *v > 1)
      throw bad_request(fmt::format("'{}' must be in [0, 1], got {}", f.param("min_p"), *v),
                        f.param("min_p"));
    if (*v != 0) unsupported(f, "min_p", "only 0");
  }
  for (const char* k : {"frequency_penalty", "presence_penalty"})
    if (auto v = f.number(k)) {
      if (*v < -2 || *v > 2)
        throw bad_request(fmt::format("'{}' must be in [-2, 2], got {}", f.param(k), *v),
                          f.param(k));
      if (*v != 0) unsupported(f, k, "only 0");
    }
  if (auto v = f.number("repetition_penalty")) {
    if (*v <= 0)
      throw bad_request(
          fmt::format("'{}' must be positive, got {}", f.param("repetition_penalty"), *v),
          f.param("repetition_penalty"));
    if (*v != 1) unsupported(f, "repetition_penalty", "only 1");
  }
  for (const char* k : {"min_tokens", "min_new_tokens"})
    if (auto v = f.integer(k); v && *v != 0) unsupported(f, k, "only 0");
  if (const Json* v = f.get("logit_bias"); v && !(v->is_object() && v->empty()))
    unsupported(f, "logit_bias", "no logit biases");
  if (const Json* v = f.get("logprobs");
      v && !(v->is_boolean() && !v->get<bool>()) && !(v->is_number() && v->get<double>() == 0))
    unsupported(f, "logprobs", "log probabilities are not returned yet");
  if (auto v = f.integer("top_logprobs"); v && *v != 0)
    unsupported(f, "top_logprobs", "log probabilities are not returned yet");
  read_constraint_fields(f, p);
}

void read_constraint_fields(const Fields& f, GenerationParams& p) {
  using Kind = ConstraintSpec::Kind;
  auto set = [&](Kind kind, std::string source, const std::string& param, bool strict = false) {
    if (!p.constraint.empty())
      throw bad_request(fmt::format("'{}' and '{}' both constrain the output; give one",
                                    p.constraint.param, param),
                        param);
    p.constraint = ConstraintSpec{kind, std::move(source), strict, param};
  };
  if (f.has("structural_tag")) unsupported(f, "structural_tag", "use json_schema, regex or ebnf");
  if (auto v = f.string("regex")) set(Kind::kRegex, *v, f.param("regex"));
  if (auto v = f.string("ebnf")) set(Kind::kEbnf, *v, f.param("ebnf"));
  // SGLang takes the schema as a JSON string; an object is accepted too.
  if (const Json* v = f.get("json_schema")) {
    if (v->is_string())
      set(Kind::kJsonSchema, v->get<std::string>(), f.param("json_schema"));
    else if (v->is_object())
      set(Kind::kJsonSchema, v->dump(), f.param("json_schema"));
    else
      f.fail_type("json_schema", "a JSON Schema (an object, or its JSON text)");
  }
  if (const Json* rf = f.object("response_format")) {
    const Fields r(*rf, f.param("response_format") + ".");
    const std::string type = r.string("type").value_or("text");
    const std::string param = f.param("response_format");
    if (type == "json_object") {
      set(Kind::kJsonObject, "", param);
    } else if (type == "json_schema") {
      const Json* js = r.object("json_schema");
      if (!js) throw bad_request(fmt::format("'{}.json_schema' is required", param), param);
      const Fields s(*js, param + ".json_schema.");
      const Json* schema = s.get("schema");
      if (!schema || !schema->is_object())
        throw bad_request(
            fmt::format("'{}.json_schema.schema' must be a JSON Schema object", param),
            param + ".json_schema.schema");
      set(Kind::kJsonSchema, schema->dump(), param + ".json_schema.schema",
          s.boolean("strict").value_or(false));
    } else if (type != "text") {
      unsupported(f, "response_format", "type must be 'text', 'json_object' or 'json_schema'");
    }
  }
}

Json ChoiceResult::matched_stop() const {
  if (matched_string) return *matched_string;
  if (matched_token) return *matched_token;
  return nullptr;
}

struct Generation::Slot {
  std::shared_ptr<RequestStream> stream;
  IncrementalDetokenizer detok;
  StopStringMatcher stop;
  std::optional<ReasoningParser> reasoning;
  std::unique_ptr<ToolCallParser> tools;
  Clock::time_point submitted;
  Clock::time_point last_token;
  bool got_token = false;
};

Generation::Generation(ServerState& st, std::vector<PromptInput> prompts, const GenerationParams& p,
                       Options o)
    : st_(st), params_(p), num_prompts_(prompts.size()) {
  if (!st.ready()) throw ApiError(503, st.not_ready_reason());
  Engine& engine = st.engine();
  const int64_t ctx = engine.context_length();
  const int64_t vocab = engine.model_config().vocab_size;
  std::optional<CompiledConstraint> grammar;
  if (!p.constraint.empty()) {
    // A chat prompt that opened a think block: the reasoning comes first, then the answer the
    // constraint describes.
    ConstraintSpec spec = p.constraint;
    spec.after_reasoning = o.reasoning && o.reasoning->in_reasoning;
    grammar = st.grammar_for(spec);
  }
  std::vector<Request> requests;
  for (size_t pi = 0; pi < prompts.size(); ++pi) {
    const int64_t P = static_cast<int64_t>(prompts[pi].ids.size());
    if (P == 0) throw bad_request(fmt::format("The {} is empty (0 tokens)", o.prompt_noun));
    for (int32_t t : prompts[pi].ids)
      if (t < 0 || t >= vocab)
        throw bad_request(fmt::format("Token id {} in the {} is outside the vocabulary [0, {})", t,
                                      o.prompt_noun, vocab));
    int64_t max_new;
    if (p.max_new_tokens) {
      max_new = *p.max_new_tokens;
      // The engine's own rule, checked here so the 400 names the parameter.
      if (const std::string e = request_length_error(P, max_new, ctx); !e.empty())
        throw bad_request(fmt::format("{}. Please reduce the length of the {} or of the "
                                      "completion ('{}').",
                                      e, o.prompt_noun, p.max_tokens_param),
                          p.max_tokens_param);
    } else {
      if (P >= ctx)
        throw bad_request(
            fmt::format("This model's maximum context length is {} tokens, and the {} already "
                        "take {} of them, which leaves no room for the completion. Please reduce "
                        "the length of the {}.",
                        ctx, o.prompt_noun, P, o.prompt_noun),
            o.prompt_noun);
      max_new = ctx - P;
    }
    for (int64_t j = 0; j < p.n; ++j) {
      Request r;
      r.prompt = prompts[pi].ids;
      r.max_new_tokens = max_new;
      r.sampling.temperature = p.temperature;
      r.sampling.top_p = p.top_p;
      r.sampling.top_k = p.top_k;
      r.sampling.seed = choice_seed(p.seed, static_cast<size_t>(j));
      if (!p.ignore_eos) r.stop_token_ids = st.eos_token_ids();
      r.stop_token_ids.insert(r.stop_token_ids.end(), p.stop_token_ids.begin(),
                              p.stop_token_ids.end());
      r.return_hidden_states = p.return_hidden_states;
      if (grammar) r.constraint = std::make_shared<GrammarConstraint>(*grammar);
      requests.push_back(std::move(r));

      ChoiceResult res;
      res.index = results_.size();
      res.prompt_index = pi;
      res.prompt_tokens = P;
      results_.push_back(std::move(res));
      auto slot = std::make_unique<Slot>(
          Slot{nullptr,
               IncrementalDetokenizer(st.tokenizer(), p.skip_special_tokens, o.keep_special),
               StopStringMatcher(p.stop, p.no_stop_trim),
               o.reasoning ? std::optional<ReasoningParser>(ReasoningParser(*o.reasoning))
                           : std::nullopt,
               o.tool_parser ? o.tool_parser() : nullptr,
               {},
               {},
               false});
      slots_.push_back(std::move(slot));
    }
  }
  // Submit only once everything is validated, and take back what was submitted if the engine
  // refuses a later choice.
  for (size_t i = 0; i < requests.size(); ++i) {
    try {
      slots_[i]->submitted = Clock::now();
      slots_[i]->stream = engine.submit(std::move(requests[i]));
      st_.track(slots_[i]->stream->id());
      ++live_;
    } catch (const InvalidArgument& e) {
      abort();
      throw bad_request(e.what());
    } catch (const Overloaded& e) {
      abort();
      throw ApiError(503, fmt::format("{}; retry shortly", e.what()));
    } catch (...) {
      abort();
      throw;
    }
  }
}

bool Generation::set_notify(const std::function<void()>& fn) {
  bool all = true;
  for (const auto& s : slots_)
    if (s->stream) all = s->stream->set_notify(fn) && all;
  return all;
}

Generation::~Generation() {
  abort();
}

void Generation::abort() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (results_[i].finished || !slots_[i]->stream) continue;
    st_.engine().abort(slots_[i]->stream->id());
    finish(i, FinishReason::kAbort, nullptr);
  }
}

const ChoiceResult* Generation::failed_choice() const {
  for (const ChoiceResult& r : results_)
    if (r.finish_reason == FinishReason::kError) return &r;
  return nullptr;
}

bool Generation::poll(std::vector<ChoiceDelta>& out, std::chrono::milliseconds wait) {
  if (live_ == 0) return false;
  bool changed = false;
  // Take whatever is ready on every stream first.
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (results_[i].finished) continue;
    ChoiceDelta d;
    d.index = i;
    if (drain(i, std::chrono::milliseconds(0), d)) {
      changed = true;
      out.push_back(std::move(d));
    }
  }
  if (changed) return true;
  // Nothing yet: block on one stream. With several live streams, wait in short slices and
  // rotate, since RequestStream offers no wait-for-any.
  const auto slice = live_ == 1 ? wait : std::min(wait, std::chrono::milliseconds(5));
  for (size_t k = 0; k < slots_.size(); ++k) {
    const size_t i = (next_wait_ + k) % slots_.size();
    if (results_[i].finished) continue;
    next_wait_ = i + 1;
    ChoiceDelta d;
    d.index = i;
    if (drain(i, slice, d)) {
      out.push_back(std::move(d));
      return true;
    }
    break;
  }
  return false;
}

bool Generation::drain(size_t i, std::chrono::milliseconds wait, ChoiceDelta& d) {
  bool got = false;
  RequestOutput o;
  while (!results_[i].finished &&
         slots_[i]->stream->next(o, got ? std::chrono::milliseconds(0) : wait)) {
    consume(i, o, d);
    got = true;
  }
  return got;
}

void Generation::consume(size_t i, RequestOutput& o, ChoiceDelta& d) {
  ChoiceResult& r = results_[i];
  Slot& s = *slots_[i];
  const auto now = Clock::now();
  r.prompt_tokens = o.prompt_tokens > 0 ? o.prompt_tokens : r.prompt_tokens;
  r.cached_tokens = o.cached_tokens;
  r.spec_verify_steps = o.spec_verify_steps;
  r.spec_accepted_drafts = o.spec_accepted_drafts;
  r.spec_draft_tokens = o.spec_draft_tokens;
  const size_t n = o.new_tokens.size();
  if (n > 0) {
    ServerMetrics& m = st_.metrics();
    if (!s.got_token)
      m.ttft.observe(seconds_since(s.submitted, now));
    else
      m.itl.observe(seconds_since(s.last_token, now) / static_cast<double>(n), n);
    s.got_token = true;
    s.last_token = now;
  }
  for (size_t k = 0; k < n; ++k) {
    const int32_t tok = o.new_tokens[k];
    r.output_ids.push_back(tok);
    r.completion_tokens = static_cast<int64_t>(r.output_ids.size());
    d.new_tokens += 1;
    if (k < o.hidden_states.size()) r.hidden_states.push_back(std::move(o.hidden_states[k]));
    // The stop token that ended generation is not part of the text (SGLang trims it too).
    const bool stop_token = o.finished && o.finish_reason == FinishReason::kStop && k + 1 == n &&
                            tok == o.matched_stop_token;
    if (!stop_token || params_.no_stop_trim) emit(i, s.detok.push(tok), d);
    if (r.matched_string) {
      // A stop string ended it here; the engine may already be past it.
      if (!o.finished) st_.engine().abort(s.stream->id());
      finish(i, FinishReason::kStop, &d);
      return;
    }
  }
  if (!o.finished) return;
  emit(i, s.detok.flush(), d);
  if (!r.matched_string) emit(i, s.stop.flush(), d);
  if (r.matched_string) {
    finish(i, FinishReason::kStop, &d);
  } else {
    if (o.finish_reason == FinishReason::kStop && o.matched_stop_token >= 0)
      r.matched_token = o.matched_stop_token;
    r.error = o.error;
    finish(i, o.finish_reason == FinishReason::kNone ? FinishReason::kStop : o.finish_reason, &d);
  }
}

void Generation::emit(size_t i, const std::string& text, ChoiceDelta& d) {
  if (text.empty()) return;
  ChoiceResult& r = results_[i];
  Slot& s = *slots_[i];
  StopStringMatcher::Result res = s.stop.push(text);
  if (res.stopped) r.matched_string = res.matched;
  if (res.text.empty()) return;
  if (s.reasoning) {
    ReasoningParser::Delta rd = s.reasoning->push(res.text);
    r.reasoning += rd.reasoning;
    d.reasoning += rd.reasoning;
    emit_content(i, rd.content, d);
  } else {
    emit_content(i, res.text, d);
  }
}

// Content after reasoning separation: through the tool-call parser when there is one.
void Generation::emit_content(size_t i, const std::string& text, ChoiceDelta& d) {
  if (text.empty()) return;
  Slot& s = *slots_[i];
  if (s.tools) {
    add_tool_calls(i, s.tools->push(text), d);
    return;
  }
  results_[i].text += text;
  d.text += text;
}

void Generation::add_tool_calls(size_t i, ToolParseResult r, ChoiceDelta& d) {
  ChoiceResult& c = results_[i];
  c.text += r.content;
  for (const ToolCallDelta& t : r.calls) {
    if (t.index >= c.tool_calls.size()) c.tool_calls.push_back({t.id, t.name, ""});
    c.tool_calls[t.index].arguments += t.arguments;
  }
  d.text += r.content;
  d.tool_calls.insert(d.tool_calls.end(), r.calls.begin(), r.calls.end());
}

void Generation::finish(size_t i, FinishReason why, ChoiceDelta* d) {
  ChoiceResult& r = results_[i];
  Slot& s = *slots_[i];
  if (r.finished) return;
  if (s.stream) st_.untrack(s.stream->id());
  // Whatever the parsers held back (a partial marker) is output after all.
  ChoiceDelta scratch;
  ChoiceDelta& out = d ? *d : scratch;
  if (s.reasoning) {
    ReasoningParser::Delta rd = s.reasoning->flush();
    r.reasoning += rd.reasoning;
    out.reasoning += rd.reasoning;
    emit_content(i, rd.content, out);
  }
  if (s.tools) add_tool_calls(i, s.tools->flush(), out);
  if (d) d->finished = true;
  r.finished = true;
  r.finish_reason = why;
  r.e2e_latency = seconds_since(s.submitted, Clock::now());
  st_.metrics().e2e.observe(r.e2e_latency);
  st_.metrics().record_finish(why);
  --live_;
}

}  // namespace tandem::server
