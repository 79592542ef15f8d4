#include "server/server_state.h"

#include <fmt/format.h>

#include <chrono>
#include <random>

#include "core/error.h"
#include "core/log.h"
#include "server/tool_call_parser.h"

namespace tandem::server {

ServerState::ServerState(ServerArgs args)
    : args_(std::move(args)),
      model_name_(args_.model_name()),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {
  std::random_device rd;
  id_salt_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

ServerState::~ServerState() = default;

void ServerState::track(uint64_t engine_id) {
  std::lock_guard<std::mutex> g(tracked_mu_);
  tracked_.insert(engine_id);
}

void ServerState::untrack(uint64_t engine_id) {
  std::lock_guard<std::mutex> g(tracked_mu_);
  tracked_.erase(engine_id);
}

size_t ServerState::abort_all() {
  if (!model_.engine) return 0;
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> g(tracked_mu_);
    ids.assign(tracked_.begin(), tracked_.end());
  }
  // Outside the lock: the engine's abort delivers the final message, which the route's reader
  // (another thread) turns into an untrack().
  for (uint64_t id : ids) model_.engine->abort(id);
  return ids.size();
}

void ServerState::set_model(LoadedModel m) {
  model_ = std::move(m);
  for (int64_t e : model_.engine->model_config().eos_token_ids)
    eos_ids_.push_back(static_cast<int32_t>(e));
  // Markers that are special tokens would be skipped by the detokenizer; the parsers need them.
  auto ids_of = [&](const std::vector<std::string>& markers, std::unordered_set<int32_t>& ids) {
    for (const std::string& m : markers)
      if (auto id = model_.tokenizer->token_to_id(m)) ids.insert(*id);
  };
  reasoning_format_ = parse_reasoning_format(args_.reasoning_parser);
  if (reasoning_format_) ids_of({"<think>", "</think>"}, reasoning_ids_);
  if (!args_.tool_call_parser.empty()) ids_of(tool_call_markers(args_.tool_call_parser), tool_ids_);
  grammars_ = std::make_unique<GrammarCache>(*model_.tokenizer);
  ready_.store(true, std::memory_order_release);
}

CompiledConstraint ServerState::grammar_for(const ConstraintSpec& spec) {
  ConstraintSpec s = spec;
  if (args_.constrained_json_disable_any_whitespace) s.max_whitespace = 0;
  return grammars_->get(s);
}

std::string ServerState::new_id(const char* prefix) {
  // splitmix64 of a salted counter: unique per process, unpredictable across restarts.
  uint64_t z = id_salt_ + 0x9E3779B97F4A7C15ull * (++id_counter_);
  auto mix = [](uint64_t x) {
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  return fmt::format("{}{:016x}{:016x}", prefix, mix(z), mix(z ^ id_salt_));
}

}  // namespace tandem::server
