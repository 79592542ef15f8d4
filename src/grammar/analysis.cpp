#include "grammar/analysis.h"

#include <string>

#include "grammar/grammar.h"

namespace tandem::grammar::ir {

bool Analysis::expr_nullable(const Grammar& g, int32_t id) const {
  const Expr& e = g.exprs[id];
  switch (e.op) {
    case Op::kLiteral:
      return e.bytes.empty();
    case Op::kClass:
      return false;
    case Op::kRef:
      return nullable[e.rule] != 0;
    case Op::kSeq:
      for (int32_t c : e.items)
        if (!expr_nullable(g, c)) return false;
      return true;
    case Op::kChoice:
      for (int32_t c : e.items)
        if (expr_nullable(g, c)) return true;
      return false;
    case Op::kRepeat:
      return e.min == 0 || expr_nullable(g, e.items[0]);
  }
  return false;
}

bool Analysis::expr_productive(const Grammar& g, int32_t id) const {
  const Expr& e = g.exprs[id];
  switch (e.op) {
    case Op::kLiteral:
      return true;
    case Op::kClass:
      return !class_code_points(e).empty();
    case Op::kRef:
      return productive[e.rule] != 0;
    case Op::kSeq:
      for (int32_t c : e.items)
        if (!expr_productive(g, c)) return false;
      return true;
    case Op::kChoice:
      for (int32_t c : e.items)
        if (expr_productive(g, c)) return true;
      return false;
    case Op::kRepeat:
      return e.min == 0 || expr_productive(g, e.items[0]);
  }
  return false;
}

Analysis analyze(const Grammar& g) {
  Analysis a;
  const size_t n = g.rules.size();
  a.nullable.assign(n, 0);
  a.productive.assign(n, 0);
  // Least fixpoints: a rule becomes nullable (productive) once its body is, given the rules
  // already known to be.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (!a.nullable[r] && a.expr_nullable(g, g.rules[r].body)) a.nullable[r] = 1, changed = true;
      if (!a.productive[r] && a.expr_productive(g, g.rules[r].body)) {
        a.productive[r] = 1, changed = true;
      }
    }
  }
  return a;
}

namespace {

// Rules that expression `id` may call before it has consumed a byte.
void first_calls(const Grammar& g, const Analysis& a, int32_t id, std::vector<int32_t>& out) {
  const Expr& e = g.exprs[id];
  switch (e.op) {
    case Op::kLiteral:
    case Op::kClass:
      return;
    case Op::kRef:
      out.push_back(e.rule);
      return;
    case Op::kSeq:
      for (int32_t c : e.items) {
        first_calls(g, a, c, out);
        if (!a.expr_nullable(g, c)) return;
      }
      return;
    case Op::kChoice:
      for (int32_t c : e.items) first_calls(g, a, c, out);
      return;
    case Op::kRepeat:
      if (e.max != 0) first_calls(g, a, e.items[0], out);
      return;
  }
}

}  // namespace

void check_grammar(const Grammar& g, const Analysis& a) {
  const size_t n = g.rules.size();
  std::vector<std::vector<int32_t>> calls(n);
  for (size_t r = 0; r < n; ++r) first_calls(g, a, g.rules[r].body, calls[r]);
  // Depth-first search for a cycle in the "calls before consuming" graph; the path on the stack
  // names the cycle in the message.
  std::vector<uint8_t> color(n, 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<int32_t> path;
  auto dfs = [&](auto&& self, int32_t r) -> void {
    color[r] = 1;
    path.push_back(r);
    for (int32_t c : calls[r]) {
      if (color[c] == 1) {
        std::string cycle;
        size_t from = 0;
        while (path[from] != c) ++from;
        for (size_t i = from; i < path.size(); ++i) cycle += g.rules[path[i]].name + " -> ";
        cycle += g.rules[c].name;
        throw GrammarError("left recursion: " + cycle +
                           " (rewrite it right-recursively or with repetition)");
      }
      if (color[c] == 0) self(self, c);
    }
    path.pop_back();
    color[r] = 2;
  };
  for (size_t r = 0; r < n; ++r)
    if (color[r] == 0) dfs(dfs, static_cast<int32_t>(r));
  if (!a.productive[g.root]) throw GrammarError("the grammar matches nothing (root is empty)");
}

}  // namespace tandem::grammar::ir
