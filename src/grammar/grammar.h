// A grammar engine for constrained decoding: an EBNF grammar over UTF-8 text, compiled against a
// tokenizer's byte-level vocabulary into per-node token masks, and a matcher that follows one
// request's output token by token. No C++ grammar library is installable here, so this is ours
// (docs/structured-outputs.md says how it works and what it supports).
//
// The EBNF dialect (GBNF / xgrammar style; json_schema.h and regex.h produce it):
//   # comment to the end of the line
//   root ::= item ("," ws item)*          one rule per `name ::= expression`; names match
//                                          [A-Za-z_][A-Za-z0-9_-]*; a rule may span lines
//   "literal"                              escapes \" \\ \n \r \t \/ \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_] [^"\\\x00-\x1f]              character classes over code points, ^ negates;
//                                          escapes as in literals plus \] \- \^
//   ( ... )  a | b  x*  x+  x?  x{n}  x{n,}  x{n,m}
// The start rule is `root`. Left recursion is refused (GrammarError) rather than looped on.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::grammar {

// A grammar (or a schema, regex or tool definition that becomes one) the engine cannot take.
// keyword(): the JSON Schema keyword or request field at fault, empty if none applies; the
// server turns it into a 400 naming it.
class GrammarError : public std::runtime_error {
 public:
  explicit GrammarError(const std::string& what, std::string keyword = {})
      : std::runtime_error(what), keyword_(std::move(keyword)) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

// The bytes each token id contributes to the output text, as Tokenizer::token_bytes gives them.
// special[id] != 0 for added special tokens: they never match grammar text, except a special
// token whose whole text occurs inside one of the grammar's string literals (so that a tool-call
// grammar can ask for GLM's <tool_call> token). Stop tokens are the caller's business.
struct TokenVocab {
  std::vector<std::string> bytes;  // [V]
  std::vector<uint8_t> special;    // [V]
  int32_t size() const { return static_cast<int32_t>(bytes.size()); }
};

class CompiledGrammar;  // immutable once built; share it between requests and threads

// Parses `ebnf` and precomputes its token masks for `vocab`. Throws GrammarError on a syntax
// error (with line and column), an undefined rule, a missing root or left recursion.
// max_nodes: the most automaton nodes the grammar may have; each costs a walk over the
// vocabulary at compile time (bounded repetitions such as a schema's maxLength expand into one
// node per repeat), so a server compiling requests' grammars keeps it lower.
std::shared_ptr<const CompiledGrammar> compile(std::string_view ebnf,
                                               std::shared_ptr<const TokenVocab> vocab,
                                               int64_t max_nodes = 200000);

// Compile-time statistics (benchmarks and logs).
struct GrammarStats {
  int64_t rules = 0, nodes = 0;
  int64_t mask_nodes = 0;      // automaton nodes with precomputed token masks
  int64_t context_tokens = 0;  // context-dependent (node, token) pairs, checked at run time
  double compile_seconds = 0;  // parse, automaton, masks (the vocabulary trie is cached)
};
GrammarStats stats(const CompiledGrammar& g);

// One request's position in the grammar. Not thread-safe; one per request.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> g);
  ~Matcher();
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;

  int32_t vocab_size() const;
  // bits: [(V + 31) / 32] words; bit (v % 32) of word v / 32 is set iff token v may come next.
  // Stop tokens are not set: the caller allows them when can_terminate().
  void fill_mask(uint32_t* bits) const;
  // Advances by one token; false (and nothing changes) if the grammar does not allow it.
  bool accept_token(int32_t id);
  // Undoes the last n accepted tokens (n <= num_tokens()); speculative decoding rolls back
  // rejected drafts with it.
  void rollback(int64_t n);
  int64_t num_tokens() const;
  // The output so far is a complete sentence of the grammar (a stop token may come now).
  bool can_terminate() const;
  // Complete and nothing may follow: only a stop token can come next.
  bool is_terminated() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::grammar
