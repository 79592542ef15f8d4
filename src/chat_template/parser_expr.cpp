// Expression half of the parser: Jinja's precedence climbing (condexpr, or/and/not,
// comparisons, arithmetic, concatenation), unary signs, postfix attribute/subscript/call,
// filters and tests, and primary expressions and literals.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "chat_template/filters.h"
#include "chat_template/lexer.h"
#include "chat_template/parser_impl.h"
#include "chat_template/predicates.h"

namespace tandem::jinja::parser_detail {

bool Parser::at_tuple_end(Names extra_end) const {
  const Token& t = cur();
  if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEnd || at_op(")")) {
    return true;
  }
  return t.type == Tok::kName &&
         std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
}

// Comma-separated expressions: one is itself, several (or a trailing comma) a tuple.
ExprPtr Parser::parse_tuple(bool with_condexpr, Names extra_end, bool explicit_parens) {
  int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (at_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (at_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) fail(cur(), "expected an expression, found {}", describe(cur()));
  }
  auto t = std::make_unique<SequenceExpr>(Expr::Kind::kTuple, line);
  t->items = std::move(items);
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = cur().line;
  size_t mark = unknown_.size();
  ExprPtr expr = parse_or();
  bool inline_if = false;
  while (skip_name("if")) {
    inline_if = true;
    auto c = std::make_unique<CondExpr>(line);
    c->cond = parse_or();
    if (skip_name("else")) c->otherwise = parse_condexpr();
    c->then = std::move(expr);
    expr = std::move(c);
  }
  // Everything inside an inline if (value, condition, else) is compiled "soft".
  if (inline_if) {
    for (size_t i = mark; i < unknown_.size(); ++i) unknown_[i].soft = true;
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(Expr::Kind::kOr, BinOp::kAdd, std::move(left), parse_and(),
                                        line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(Expr::Kind::kAnd, BinOp::kAdd, std::move(left), parse_not(),
                                        line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    int line = cur().line;
    advance();
    return std::make_unique<UnaryExpr>(Expr::Kind::kNot, parse_not(), line);
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = cur().line;
  ExprPtr first = parse_math1();
  std::vector<std::pair<CmpOp, ExprPtr>> rest;
  while (true) {
    std::optional<CmpOp> op;
    if (cur().type == Tok::kOp) {
      const std::string& o = cur().text;
      if (o == "==")
        op = CmpOp::kEq;
      else if (o == "!=")
        op = CmpOp::kNe;
      else if (o == "<")
        op = CmpOp::kLt;
      else if (o == "<=")
        op = CmpOp::kLe;
      else if (o == ">")
        op = CmpOp::kGt;
      else if (o == ">=")
        op = CmpOp::kGe;
      if (op) advance();
    } else if (at_name("in")) {
      op = CmpOp::kIn;
      advance();
    } else if (at_name("not") && peek().type == Tok::kName && peek().text == "in") {
      op = CmpOp::kNotIn;
      advance();
      advance();
    }
    if (!op) break;
    rest.emplace_back(*op, parse_math1());
  }
  if (rest.empty()) return first;
  auto c = std::make_unique<CompareExpr>(line);
  c->first = std::move(first);
  c->rest = std::move(rest);
  return c;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    BinOp op = at_op("+") ? BinOp::kAdd : BinOp::kSub;
    int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(Expr::Kind::kBinary, op, std::move(left), parse_concat(),
                                        line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  int line = cur().line;
  ExprPtr first = parse_math2();
  if (!at_op("~")) return first;
  auto c = std::make_unique<ConcatExpr>(line);
  c->parts.push_back(std::move(first));
  while (skip_op("~")) c->parts.push_back(parse_math2());
  return c;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (true) {
    BinOp op;
    if (at_op("*"))
      op = BinOp::kMul;
    else if (at_op("/"))
      op = BinOp::kDiv;
    else if (at_op("//"))
      op = BinOp::kFloorDiv;
    else if (at_op("%"))
      op = BinOp::kMod;
    else
      break;
    int line = cur().line;
    advance();
    left =
        std::make_unique<BinaryExpr>(Expr::Kind::kBinary, op, std::move(left), parse_pow(), line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_op("**")) {
    int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(Expr::Kind::kBinary, BinOp::kPow, std::move(left),
                                        parse_unary(true), line);
  }
  return left;
}

// Like Jinja, a sign binds tighter than filters: -x|abs is (-x)|abs.
ExprPtr Parser::parse_unary(bool with_filter) {
  int line = cur().line;
  ExprPtr node;
  if (skip_op("-")) {
    node = std::make_unique<UnaryExpr>(Expr::Kind::kNeg, parse_unary(false), line);
  } else if (skip_op("+")) {
    node = std::make_unique<UnaryExpr>(Expr::Kind::kPos, parse_unary(false), line);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  int line = t.line;
  switch (t.type) {
    case Tok::kName: {
      std::string n = t.text;
      advance();
      if (n == "true" || n == "True")
        return std::make_unique<LiteralExpr>(Value::boolean(true), line);
      if (n == "false" || n == "False")
        return std::make_unique<LiteralExpr>(Value::boolean(false), line);
      if (n == "none" || n == "None") return std::make_unique<LiteralExpr>(Value::none(), line);
      for (auto& names : macro_names_) names.insert(n);
      return std::make_unique<NameExpr>(n, line);
    }
    case Tok::kString: {
      std::string s;
      while (cur().type == Tok::kString) {  // adjacent literals concatenate
        s += cur().text;
        advance();
      }
      return std::make_unique<LiteralExpr>(Value::string(std::move(s)), line);
    }
    case Tok::kInt: {
      auto v = Value::integer(t.int_value);
      advance();
      return std::make_unique<LiteralExpr>(v, line);
    }
    case Tok::kFloat: {
      auto v = Value::number(t.float_value);
      advance();
      return std::make_unique<LiteralExpr>(v, line);
    }
    case Tok::kOp:
      if (t.text == "(") {
        advance();
        ExprPtr e = parse_tuple(true, {}, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  fail(t, "expected an expression, found {}", describe(t));
}

ExprPtr Parser::parse_list() {
  auto l = std::make_unique<SequenceExpr>(Expr::Kind::kList, cur().line);
  expect_op("[");
  while (!at_op("]")) {
    if (!l->items.empty()) expect_op(",");
    if (at_op("]")) break;
    l->items.push_back(parse_expression(true));
  }
  expect_op("]");
  return l;
}

ExprPtr Parser::parse_dict() {
  auto d = std::make_unique<DictExpr>(cur().line);
  expect_op("{");
  while (!at_op("}")) {
    if (!d->items.empty()) expect_op(",");
    if (at_op("}")) break;
    ExprPtr key = parse_expression(true);
    expect_op(":");
    d->items.emplace_back(std::move(key), parse_expression(true));
  }
  expect_op("}");
  return d;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Tok::kName) {
        node = std::make_unique<GetAttrExpr>(std::move(node), cur().text, line);
        advance();
      } else if (cur().type == Tok::kInt) {  // x.0 is x[0]
        auto key = std::make_unique<LiteralExpr>(Value::integer(cur().int_value), line);
        node = std::make_unique<GetItemExpr>(std::move(node), std::move(key), line);
        advance();
      } else {
        fail_expected("an attribute name after '.'");
      }
    } else if (at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      auto c = std::make_unique<CallExpr>(line);
      c->callee = std::move(node);
      c->args = parse_call_args();
      node = std::move(c);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr object) {
  int line = cur().line;
  expect_op("[");
  std::vector<ExprPtr> keys;
  while (!at_op("]")) {
    if (!keys.empty()) expect_op(",");
    const Token& at = cur();
    keys.push_back(parse_subscribed(line));
    // Python would pass a tuple holding a slice object, which no str, list or dict accepts as a
    // key; a slice node is only evaluable as the whole subscript (found by
    // fuzz/chat_template.cpp: it was evaluated without its object).
    if (keys.size() > 1 &&
        (keys.back()->kind == Expr::Kind::kSlice || keys.front()->kind == Expr::Kind::kSlice))
      fail(at, "a slice cannot be part of a tuple subscript");
  }
  expect_op("]");
  if (keys.size() == 1 && keys[0]->kind == Expr::Kind::kSlice) {
    auto* s = static_cast<SliceExpr*>(keys[0].get());
    s->object = std::move(object);
    return std::move(keys[0]);
  }
  ExprPtr key;
  if (keys.size() == 1) {
    key = std::move(keys[0]);
  } else {
    auto t = std::make_unique<SequenceExpr>(Expr::Kind::kTuple, line);
    t->items = std::move(keys);
    key = std::move(t);
  }
  return std::make_unique<GetItemExpr>(std::move(object), std::move(key), line);
}

// One subscript: an expression or a start:stop:step slice.
ExprPtr Parser::parse_subscribed(int line) {
  ExprPtr start;
  if (!at_op(":")) {
    start = parse_expression(true);
    if (!at_op(":")) return start;
  }
  advance();  // ':'
  auto s = std::make_unique<SliceExpr>(line);
  s->start = std::move(start);
  if (!at_op("]") && !at_op(",") && !at_op(":")) s->stop = parse_expression(true);
  if (skip_op(":")) {
    if (!at_op("]") && !at_op(",")) s->step = parse_expression(true);
  }
  return s;
}

ArgList Parser::parse_call_args() {
  ArgList a;
  expect_op("(");
  bool first = true;
  while (!at_op(")")) {
    if (!first) {
      expect_op(",");
      if (at_op(")")) break;
    }
    first = false;
    if (skip_op("*")) {
      a.star_args = parse_expression(true);
    } else if (skip_op("**")) {
      a.star_kwargs = parse_expression(true);
    } else if (cur().type == Tok::kName && is_op("=", peek())) {
      std::string key = cur().text;
      advance();
      advance();
      a.keyword.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!a.keyword.empty() || a.star_kwargs) {
        fail(cur(), "positional argument follows keyword argument");
      }
      a.positional.push_back(parse_expression(true));
    }
  }
  expect_op(")");
  return a;
}

// name, possibly dotted, as filters and tests are named.
std::string Parser::dotted_name(std::string_view what) {
  std::string name = expect_name(what);
  while (at_op(".") && peek().type == Tok::kName) {
    advance();
    name += "." + cur().text;
    advance();
  }
  return name;
}

FilterCall Parser::parse_filter_call() {
  FilterCall f;
  const Token& at = cur();
  f.line = at.line;
  f.name = dotted_name("a filter name");
  f.fn = find_filter(f.name);
  if (!f.fn && !is_unsupported_jinja_filter(f.name)) note_unknown(at, "filter", f.name);
  if (at_op("(")) f.args = parse_call_args();
  return f;
}

std::vector<FilterCall> Parser::parse_filter_chain() {
  std::vector<FilterCall> out;
  while (skip_op("|")) out.push_back(parse_filter_call());
  return out;
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    int line = cur().line;
    if (skip_op("|")) {
      auto f = std::make_unique<FilterExpr>(line);
      f->operand = std::move(node);
      f->filter = parse_filter_call();
      node = std::move(f);
    } else if (at_name("is")) {
      advance();
      node = parse_test(std::move(node), line);
    } else if (at_op("(")) {
      auto c = std::make_unique<CallExpr>(line);
      c->callee = std::move(node);
      c->args = parse_call_args();
      node = std::move(c);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_test(ExprPtr operand, int line) {
  auto t = std::make_unique<TestExpr>(line);
  t->operand = std::move(operand);
  t->negated = skip_name("not");
  const Token& at = cur();
  t->name = dotted_name("a test name");
  t->fn = find_test(t->name);
  if (!t->fn) note_unknown(at, "test", t->name);
  // A test takes either a call's arguments or one bare argument: `is divisibleby 3`.
  const Token& n = cur();
  if (at_op("(")) {
    t->args = parse_call_args();
  } else if ((n.type == Tok::kName || n.type == Tok::kString || n.type == Tok::kInt ||
              n.type == Tok::kFloat || at_op("[") || at_op("{")) &&
             !(n.type == Tok::kName && (n.text == "else" || n.text == "or" || n.text == "and"))) {
    if (at_name("is")) fail(n, "you cannot chain multiple tests with 'is'");
    t->args.positional.push_back(parse_postfix(parse_primary()));
  }
  return t;
}

void Parser::note_unknown(const Token& at, const char* kind, const std::string& name) {
  unknown_.push_back(Unknown{at.line, at.col, kind, name, soft_});
}

}  // namespace tandem::jinja::parser_detail
