// The server's side of constrained decoding: what a request asks for (response_format,
// SGLang's json_schema / regex / ebnf, a forced tool call), compiled once per distinct grammar
// against the tokenizer's vocabulary (GrammarCache), and one matcher per choice handed to the
// engine as its TokenConstraint.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/grammar.h"
#include "runtime/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// A constraint as the request spelled it, before compilation.
struct ConstraintSpec {
  enum class Kind { kNone, kJsonSchema, kJsonObject, kRegex, kEbnf, kToolCalls };
  Kind kind = Kind::kNone;
  // The schema's JSON text, the regex, the EBNF, or for a forced tool call the JSON text of
  // {"parser", "tools", "function" (empty: any), "parallel"} (tool_call_grammar.h).
  std::string source;
  bool strict = false;  // OpenAI json_schema.strict
  std::string param;    // the request field it came from, for 400s
  // The prompt left a think block open and the reasoning parser is on: the reasoning comes
  // first, unconstrained but for not closing early, then "</think>", then the constrained
  // answer (content). Not applied to a user's own EBNF, which governs the whole output.
  bool after_reasoning = false;
  int max_whitespace = 20;  // JSON: whitespace bytes allowed per gap (0: compact JSON)
  bool empty() const { return kind == Kind::kNone; }
};

// The EBNF a spec stands for. Throws grammar::GrammarError.
std::string constraint_ebnf(const ConstraintSpec& spec);
// A grammar whose root is `think-text "</think>" gap body_root`: any reasoning that does not
// contain "</think>", the marker, then the body (body_rules define body_root).
std::string after_reasoning_ebnf(const std::string& body_rules, const std::string& body_root);

// A grammar ready for matchers, with the EBNF it was compiled from (what other tensor-parallel
// ranks compile their copies from).
struct CompiledConstraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  std::shared_ptr<const std::string> ebnf;
};

// Compiled grammars by EBNF text, least recently used evicted past `capacity`; thread-safe.
// The vocabulary (token bytes and special flags) is read from the tokenizer once.
class GrammarCache {
 public:
  GrammarCache(const Tokenizer& tok, size_t capacity = 64);
  // Throws ApiError 400 naming spec.param (and the schema keyword) when it cannot be compiled.
  CompiledConstraint get(const ConstraintSpec& spec);
  const std::shared_ptr<const grammar::TokenVocab>& vocab() const { return vocab_; }

 private:
  std::shared_ptr<const grammar::TokenVocab> vocab_;
  size_t capacity_;
  std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  struct Entry {
    CompiledConstraint compiled;
    std::list<std::string>::iterator pos;
  };
  std::unordered_map<std::string, Entry> entries_;
};

// A follower rank's factory of constraints (tensor parallelism): rank 0's replica specs are
// EBNF texts, compiled here against this rank's copy of the tokenizer.
ConstraintFactory follower_constraint_factory(const Tokenizer& tok);

// One choice's matcher as the engine's TokenConstraint. The tokenizer's vocabulary may be
// smaller than the model's (padded embeddings): tokens past it are never allowed.
class GrammarConstraint final : public TokenConstraint {
 public:
  explicit GrammarConstraint(const CompiledConstraint& c);
  void fill_mask(uint32_t* bits, int64_t vocab) override;
  bool accept(int32_t token) override;
  void rollback(int64_t n) override { m_.rollback(n); }
  bool can_terminate() const override { return m_.can_terminate(); }
  bool is_terminated() const override { return m_.is_terminated(); }
  std::string replica_spec() const override { return *ebnf_; }

 private:
  grammar::Matcher m_;
  std::shared_ptr<const std::string> ebnf_;
};

}  // namespace tandem::server
