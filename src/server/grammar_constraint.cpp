#include "server/grammar_constraint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "server/api_error.h"
#include "server/tool_call_grammar.h"

namespace tandem::server {

namespace {

// Text without "</think>" in it: a run of characters other than '<', or of '<'s each followed
// by a proper prefix of "/think>" and then a character that breaks the match (a '<' starts a new
// attempt). The marker's states as rules of repetition, so the matcher's stack stays flat.
constexpr const char* kThinkRules =
    R"(think-text ::= ([^<] | think-open* "<" think-miss)* think-open*
think-open ::= "<" ("/" ("t" ("h" ("i" ("n" ("k")?)?)?)?)?)?
think-miss ::= [^/<] | "/" ([^t<] | "t" ([^h<] | "h" ([^i<] | "i" ([^n<] | "n" ([^k<] | "k" [^<>])))))
think-gap ::= [\t\n\r ]{0,8}
)";

}  // namespace

std::string after_reasoning_ebnf(const std::string& body_rules, const std::string& body_root) {
  return "root ::= think-text \"</think>\" think-gap " + body_root + "\n" + kThinkRules +
         body_rules;
}

std::string constraint_ebnf(const ConstraintSpec& spec) {
  grammar::JsonGrammarOptions opt;
  opt.strict = spec.strict;
  opt.max_whitespace = spec.max_whitespace;
  // The body as rules under a prefix when reasoning comes first, else a whole grammar.
  const bool wrap = spec.after_reasoning && spec.kind != ConstraintSpec::Kind::kEbnf;
  auto json_rules = [&](const nlohmann::ordered_json& schema) {
    if (!wrap) return grammar::json_schema_to_ebnf(schema, opt);
    const grammar::EbnfRules r = grammar::json_schema_rules(schema, "answer-", opt);
    return after_reasoning_ebnf(r.text, r.root);
  };
  switch (spec.kind) {
    case ConstraintSpec::Kind::kJsonSchema: {
      nlohmann::ordered_json schema;  // ordered: properties come in the schema's order
      try {
        schema = nlohmann::ordered_json::parse(spec.source);
      } catch (const nlohmann::json::exception& e) {
        throw grammar::GrammarError(fmt::format("the schema is not valid JSON: {}", e.what()));
      }
      return json_rules(schema);
    }
    case ConstraintSpec::Kind::kJsonObject:
      if (!wrap) return grammar::json_object_ebnf(opt);
      return json_rules(nlohmann::ordered_json{{"type", "object"}, {"additionalProperties", true}});
    case ConstraintSpec::Kind::kRegex:
      if (!wrap) return grammar::regex_to_ebnf(spec.source);
      return after_reasoning_ebnf(
          "answer-root ::= " + grammar::regex_to_ebnf_expression(spec.source) + "\n",
          "answer-root");
    case ConstraintSpec::Kind::kEbnf:
      return spec.source;
    case ConstraintSpec::Kind::kToolCalls: {
      const Json j = Json::parse(spec.source);
      const grammar::EbnfRules r =
          tool_call_rules(j.at("parser").get<std::string>(), j.at("tools"),
                          j.at("function").get<std::string>(), j.at("parallel").get<bool>(), opt);
      return spec.after_reasoning ? after_reasoning_ebnf(r.text, r.root)
                                  : "root ::= " + r.root + "\n" + r.text;
    }
    case ConstraintSpec::Kind::kNone:
      break;
  }
  throw grammar::GrammarError("no constraint");
}

namespace {

// A request's grammar compiles on an HTTP thread in time proportional to its automaton nodes
// times the vocabulary: 20,000 nodes is a few seconds at most on a 150K vocabulary, far beyond
// any real schema (chapters.json, with nested objects and arrays, is a few hundred).
constexpr int64_t kMaxRequestGrammarNodes = 20000;

std::shared_ptr<const grammar::TokenVocab> read_vocab(const Tokenizer& tok) {
  auto v = std::make_shared<grammar::TokenVocab>();
  const int32_t V = tok.vocab_size();
  v->bytes.resize(static_cast<size_t>(V));
  v->special.assign(static_cast<size_t>(V), 0);
  for (int32_t id = 0; id < V; ++id) {
    v->bytes[static_cast<size_t>(id)] = tok.token_bytes(id);
    v->special[static_cast<size_t>(id)] = tok.is_special(id) ? 1 : 0;
  }
  return v;
}

}  // namespace

GrammarCache::GrammarCache(const Tokenizer& tok, size_t capacity)
    : vocab_(read_vocab(tok)), capacity_(std::max<size_t>(capacity, 1)) {}

CompiledConstraint GrammarCache::get(const ConstraintSpec& spec) {
  std::string ebnf;
  try {
    ebnf = constraint_ebnf(spec);
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = entries_.find(ebnf);
      if (it != entries_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second.pos);
        return it->second.compiled;
      }
    }
    // Compiled outside the lock: other requests' grammars need not wait for this one.
    CompiledConstraint compiled{grammar::compile(ebnf, vocab_, kMaxRequestGrammarNodes),
                                std::make_shared<const std::string>(ebnf)};
    std::lock_guard<std::mutex> g(mu_);
    if (!entries_.count(ebnf)) {
      lru_.push_front(ebnf);
      entries_[ebnf] = Entry{compiled, lru_.begin()};
      while (entries_.size() > capacity_) {
        entries_.erase(lru_.back());
        lru_.pop_back();
      }
    }
    return compiled;
  } catch (const grammar::GrammarError& e) {
    const std::string where = e.keyword().empty()
                                  ? spec.param
                                  : fmt::format("{} (keyword '{}')", spec.param, e.keyword());
    throw bad_request(
        fmt::format("'{}' cannot be used for constrained decoding: {}", where, e.what()),
        spec.param);
  }
}

GrammarConstraint::GrammarConstraint(const CompiledConstraint& c) : m_(c.grammar), ebnf_(c.ebnf) {}

ConstraintFactory follower_constraint_factory(const Tokenizer& tok) {
  auto cache = std::make_shared<GrammarCache>(tok);
  return [cache](const std::string& ebnf) -> std::shared_ptr<TokenConstraint> {
    return std::make_shared<GrammarConstraint>(
        cache->get(ConstraintSpec{ConstraintSpec::Kind::kEbnf, ebnf, false, "ebnf"}));
  };
}

void GrammarConstraint::fill_mask(uint32_t* bits, int64_t vocab) {
  const int64_t V = std::min<int64_t>(vocab, m_.vocab_size());
  const int64_t words = (m_.vocab_size() + 31) / 32;
  if (V == m_.vocab_size() && words <= (vocab + 31) / 32) {
    m_.fill_mask(bits);
    return;
  }
  // The model's vocabulary is the smaller one (unusual): fill a scratch row, copy what fits.
  std::vector<uint32_t> full(static_cast<size_t>(words), 0u);
  m_.fill_mask(full.data());
  std::memcpy(bits, full.data(), static_cast<size_t>((V + 31) / 32) * sizeof(uint32_t));
  if (V % 32) bits[V / 32] &= (1u << (V % 32)) - 1u;
}

bool GrammarConstraint::accept(int32_t token) {
  return token >= 0 && token < m_.vocab_size() && m_.accept_token(token);
}

}  // namespace tandem::server
