// Writing grammar.h's EBNF dialect: escaped literals and classes, expressions composed with the
// parentheses precedence needs, and a rule table that hands out unique, prefixed rule names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/code_point_set.h"
#include "grammar/utf8_ranges.h"  // append_utf8

namespace tandem::grammar::front {

// Decodes the UTF-8 character at text[pos] and advances pos; GrammarError on invalid UTF-8.
char32_t next_code_point(std::string_view text, size_t& pos);

// An EBNF expression and how tightly it binds, so that composing adds parentheses only where
// the dialect needs them.
struct Expr {
  enum Prec { kAlt, kSeq, kAtom };
  std::string text;
  Prec prec = kAtom;

  bool is_empty() const { return text == "\"\""; }
};

inline constexpr int64_t kUnbounded = -1;

Expr empty_expr();
// The literal matching exactly `utf8` (escaped so that any byte content round-trips).
Expr literal(std::string_view utf8);
Expr literal_code_points(std::u32string_view text);
// A class matching one code point of `s` (s must be non-empty); written negated when that is
// shorter.
Expr char_class(const CodePointSet& s);
Expr rule_ref(const std::string& name);
Expr seq(const std::vector<Expr>& parts);
// Alternatives; an empty alternative makes the whole group optional instead of being written
// as "" next to the others.
Expr alt(const std::vector<Expr>& options);
// e{lo,hi}; hi == kUnbounded for no upper bound.
Expr repeat(const Expr& e, int64_t lo, int64_t hi);
inline Expr optional(const Expr& e) {
  return repeat(e, 0, 1);
}
inline Expr star(const Expr& e) {
  return repeat(e, 0, kUnbounded);
}

// Rules of one grammar under construction. Every name starts with the prefix; a name is
// reserved before its body is known, which is what lets recursive schemas refer to themselves.
class RuleTable {
 public:
  explicit RuleTable(std::string prefix) : prefix_(std::move(prefix)) {}

  // A fresh name "<prefix><hint>" (suffixed with a number if taken); hint is sanitized.
  std::string reserve(std::string_view hint);
  void define(const std::string& name, const Expr& body);
  // A rule for `body`, reusing an existing rule with the same body.
  std::string add(std::string_view hint, const Expr& body);
  bool defined(const std::string& name) const;
  const std::string& prefix() const { return prefix_; }
  // "name ::= body" lines in the order the rules were reserved.
  std::string text() const;

 private:
  std::string prefix_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> bodies_;   // name -> body ("" while only reserved)
  std::map<std::string, std::string> by_body_;  // body -> name, for add()
};

}  // namespace tandem::grammar::front
