// The parsed grammar: rules whose bodies are expression trees over UTF-8 text. The EBNF parser
// builds it, the automaton compiler and the Earley reference recognizer read it. Expressions live
// in one arena (Grammar::exprs) and point at each other by index, so a grammar is plain data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::grammar::ir {

// Inclusive code-point range.
struct CodeRange {
  uint32_t lo = 0, hi = 0;
};

enum class Op : uint8_t {
  kLiteral,  // bytes (valid UTF-8, may be empty: "" matches the empty string)
  kClass,    // one code point in ranges (or, negated, any scalar value outside them)
  kRef,      // rule
  kSeq,      // items in order
  kChoice,   // one of items
  kRepeat,   // items[0] between min and max times
};

inline constexpr int32_t kUnbounded = -1;

struct Expr {
  Op op = Op::kLiteral;
  std::string bytes;              // kLiteral
  std::vector<CodeRange> ranges;  // kClass: as written (before negation)
  bool negated = false;           // kClass
  int32_t rule = -1;              // kRef: index into Grammar::rules
  std::vector<int32_t> items;     // kSeq, kChoice: children; kRepeat: the one child
  int32_t min = 0, max = 0;       // kRepeat: max may be kUnbounded
};

struct Rule {
  std::string name;
  int32_t body = -1;  // index into Grammar::exprs
  int line = 0, column = 0;
};

struct Grammar {
  std::vector<Expr> exprs;
  std::vector<Rule> rules;
  int32_t root = -1;  // the rule named `root`

  int32_t add(Expr e) {
    exprs.push_back(std::move(e));
    return static_cast<int32_t>(exprs.size()) - 1;
  }
};

// Parses grammar.h's EBNF dialect. Throws GrammarError ("line L:C: ...") on a syntax error, an
// undefined or duplicate rule, a missing root, left recursion or a grammar that matches nothing.
Grammar parse_ebnf(std::string_view text);

// The code points a class matches, as sorted disjoint ranges: negation applied, surrogates
// (U+D800..U+DFFF) removed. Empty if the class matches nothing.
std::vector<CodeRange> class_code_points(const Expr& e);

// Every literal's bytes (special tokens may match inside them).
std::vector<std::string> literals(const Grammar& g);

}  // namespace tandem::grammar::ir
