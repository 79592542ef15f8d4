// What every route shares: the launch arguments, and once the model is loaded the engine, the
// tokenizer and the chat template. Routes that need the model answer 503 until then, so the
// server can listen (and /health can say "not yet") while a large checkpoint loads.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "chat_template/chat_template.h"
#include "distributed/process_group.h"
#include "ops/collectives.h"
#include "runtime/engine.h"
#include "server/grammar_constraint.h"
#include "server/metrics.h"
#include "server/reasoning_parser.h"
#include "server/server_args.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct LoadedModel {
  // Under tensor parallelism: the ranks and the model's collectives, which the engine uses until
  // it is destroyed (members are destroyed in reverse order: the engine first).
  std::unique_ptr<ProcessGroup> group;
  std::unique_ptr<Collectives> comm;
  std::unique_ptr<Engine> engine;
  std::optional<Tokenizer> tokenizer;  // always set (Tokenizer has no empty state)
  std::optional<ChatTemplate> chat_template;
  std::string bos_token, eos_token;  // for the template's context
};

class ServerState {
 public:
  explicit ServerState(ServerArgs args);
  ~ServerState();

  const ServerArgs& args() const { return args_; }
  const std::string& model_name() const { return model_name_; }
  int64_t created() const { return created_; }  // unix seconds at start-up
  ServerMetrics& metrics() { return metrics_; }

  // Publishes the loaded model; from then on ready() is true.
  void set_model(LoadedModel m);
  bool ready() const { return ready_.load(std::memory_order_acquire) && !stopping_.load(); }
  void set_stopping() { stopping_ = true; }
  bool stopping() const { return stopping_.load(); }
  // Why ready() is false, for the 503 a route answers.
  const char* not_ready_reason() const {
    return stopping() ? "The server is shutting down"
                      : "The model is not loaded yet; retry shortly";
  }

  // Valid only when ready().
  Engine& engine() { return *model_.engine; }
  const Engine& engine() const { return *model_.engine; }
  const Tokenizer& tokenizer() const { return *model_.tokenizer; }
  const ChatTemplate* chat_template() const {
    return model_.chat_template ? &*model_.chat_template : nullptr;
  }
  const std::string& bos_token() const { return model_.bos_token; }
  const std::string& eos_token() const { return model_.eos_token; }
  const std::vector<int32_t>& eos_token_ids() const { return eos_ids_; }
  // --reasoning-parser (nullopt: none) and the ids of its markers that are tokens.
  std::optional<ReasoningFormat> reasoning_format() const { return reasoning_format_; }
  const std::unordered_set<int32_t>& reasoning_token_ids() const { return reasoning_ids_; }
  // --tool-call-parser ("": none) and the ids of its markers that are tokens.
  const std::string& tool_call_parser() const { return args_.tool_call_parser; }
  const std::unordered_set<int32_t>& tool_call_token_ids() const { return tool_ids_; }

  // The compiled grammar of a structured-output request (cached). Throws ApiError 400 when it
  // cannot be compiled, or when the server cannot constrain decoding in its configuration.
  CompiledConstraint grammar_for(const ConstraintSpec& spec);

  // "chatcmpl-" + 32 hex digits, unique within the process and across restarts.
  std::string new_id(const char* prefix);

  // Engine requests submitted by routes and not yet finished, so that a shutdown past its grace
  // period can abort them all (each stream then ends as an abort, with its final chunk).
  void track(uint64_t engine_id);
  void untrack(uint64_t engine_id);
  // Aborts every tracked request; returns how many.
  size_t abort_all();

 private:
  ServerArgs args_;
  std::string model_name_;
  int64_t created_;
  ServerMetrics metrics_;
  LoadedModel model_;
  std::vector<int32_t> eos_ids_;
  std::optional<ReasoningFormat> reasoning_format_;
  std::unordered_set<int32_t> reasoning_ids_;
  std::unordered_set<int32_t> tool_ids_;
  std::unique_ptr<GrammarCache> grammars_;  // built with the model
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> id_counter_{0};
  std::mutex tracked_mu_;
  std::unordered_set<uint64_t> tracked_;
  uint64_t id_salt_;
};

}  // namespace tandem::server
