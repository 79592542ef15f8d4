#include "chat_template/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <set>
#include <string_view>

#include "chat_template/filters.h"
#include "chat_template/lexer.h"
#include "chat_template/predicates.h"
#include "core/error.h"

namespace tandem::jinja {
namespace {

using Names = std::initializer_list<std::string_view>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  std::unique_ptr<Template> run() {
    auto tpl = std::make_unique<Template>();
    tpl->body = subparse({}, "", 0);
    // Like Jinja's compiler: an unknown filter or test is an error unless it sits in an if
    // statement or inline if, where it only fails if it is reached.
    for (const auto& u : unknown_) {
      if (!u.soft) {
        throw Error(fmt::format("chat template syntax error at {}:{}: no {} named '{}'", u.line,
                                u.col, u.kind, u.name));
      }
    }
    return tpl;
  }

 private:
  // ---- token helpers ----
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op, const Token& t) const {
    return t.type == Tok::kOp && t.text == op;
  }
  bool at_op(std::string_view op) const { return is_op(op, cur()); }
  bool at_name(std::string_view n) const { return cur().type == Tok::kName && cur().text == n; }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!at_name(n)) return false;
    advance();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail_expected(fmt::format("'{}'", op));
  }
  std::string expect_name(std::string_view what) {
    if (cur().type != Tok::kName) fail_expected(std::string(what));
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::kBlockEnd) fail_expected("end of statement block '%}'");
    advance();
  }

  template <typename... Args>
  [[noreturn]] void fail(const Token& at, fmt::format_string<Args...> f, Args&&... args) const {
    throw Error(fmt::format("chat template syntax error at {}:{}: {}", at.line, at.col,
                            fmt::format(f, std::forward<Args>(args)...)));
  }
  [[noreturn]] void fail_expected(const std::string& what) const {
    fail(cur(), "expected {}, found {}", what, describe(cur()));
  }

  // ---- statements ----

  // Parses until a block tag whose name is in `end_tags`; returns with that name current (the
  // '{%' consumed). `opener`/`opened_at` describe the enclosing block for error messages.
  Body subparse(Names end_tags, std::string_view opener, int opened_at) {
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case Tok::kText:
          body.push_back(std::make_unique<TextStmt>(t.text, t.line));
          advance();
          break;
        case Tok::kVarBegin: {
          int line = t.line;
          advance();
          auto e = parse_tuple(true, {}, false);
          if (cur().type != Tok::kVarEnd) fail_expected("end of print statement '}}'");
          advance();
          body.push_back(std::make_unique<OutputStmt>(std::move(e), line));
          break;
        }
        case Tok::kBlockBegin: {
          advance();
          if (cur().type == Tok::kName &&
              std::find(end_tags.begin(), end_tags.end(), cur().text) != end_tags.end()) {
            return body;
          }
          body.push_back(parse_statement());
          break;
        }
        case Tok::kEnd:
          if (end_tags.size() == 0) return body;
          fail(t,
               "unexpected end of template: expected {} to close the '{}' block opened at line {}",
               quoted_list(end_tags), opener, opened_at);
        default:
          fail(t, "unexpected {}", describe(t));
      }
    }
  }

  static std::string quoted_list(Names names) {
    std::string out;
    size_t k = 0;
    for (auto n : names) {
      if (k++) out += k == names.size() ? " or " : ", ";
      out += fmt::format("'{}'", n);
    }
    return out;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != Tok::kName) fail(t, "expected a tag name, found {}", describe(t));
    std::string tag = t.text;
    int line = t.line;
    advance();
    StmtPtr s;
    if (tag == "if") {
      s = parse_if(line);
    } else if (tag == "for") {
      s = parse_for(line);
    } else if (tag == "set") {
      s = parse_set(line);
    } else if (tag == "macro") {
      s = parse_macro(line);
    } else if (tag == "call") {
      s = parse_call_block(line);
    } else if (tag == "filter") {
      s = parse_filter_block(line);
    } else if (tag == "with") {
      s = parse_with(line);
    } else if (tag == "generation") {
      // transformers' AssistantTracker tag; outside assistant-mask tracking it just renders.
      auto b = std::make_unique<BlockStmt>(line);
      expect_block_end();
      s = hard_frame([&] {
        b->body = subparse({"endgeneration"}, "generation", line);
        advance();
        return StmtPtr(std::move(b));
      });
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(t_[i_ - 1], "'{}' is only allowed inside a loop", tag);
      s = std::make_unique<Stmt>(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
    } else if (tag == "include" || tag == "import" || tag == "from" || tag == "extends" ||
               tag == "block" || tag == "autoescape" || tag == "trans" || tag == "do") {
      fail(t_[i_ - 1], "the '{}' tag is not supported in chat templates", tag);
    } else {
      fail(t_[i_ - 1], "encountered unknown tag '{}'", tag);
    }
    expect_block_end();
    return s;
  }

  // Runs f with soft_ off: Jinja compiles these block bodies in a frame of their own.
  template <typename F>
  StmtPtr hard_frame(F f) {
    bool saved = soft_;
    soft_ = false;
    auto r = f();
    soft_ = saved;
    return r;
  }

  StmtPtr parse_if(int line) {
    bool saved_soft = soft_;
    soft_ = true;
    auto r = parse_if_body(line);
    soft_ = saved_soft;
    return r;
  }

  StmtPtr parse_if_body(int line) {
    auto node = std::make_unique<IfStmt>(line);
    ExprPtr cond = parse_tuple(false, {}, false);
    while (true) {
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"}, "if", line);
      node->branches.emplace_back(std::move(cond), std::move(body));
      if (skip_name("elif")) {
        cond = parse_tuple(false, {}, false);
        continue;
      }
      if (skip_name("else")) {
        expect_block_end();
        node->otherwise = subparse({"endif"}, "if", line);
      }
      advance();  // endif
      return node;
    }
  }

  StmtPtr parse_for(int line) {
    auto node = std::make_unique<ForStmt>(line);
    node->target = parse_target(false, {"in"});
    if (!skip_name("in")) fail_expected("'in'");
    node->iter = parse_tuple(false, {"recursive"}, false);
    return hard_frame([&] {
      if (skip_name("if")) node->filter = parse_expression(true);
      node->recursive = skip_name("recursive");
      expect_block_end();
      ++loop_depth_;
      node->body = subparse({"endfor", "else"}, "for", line);
      --loop_depth_;
      if (skip_name("else")) {
        expect_block_end();
        node->otherwise = subparse({"endfor"}, "for", line);
      }
      advance();  // endfor
      return StmtPtr(std::move(node));
    });
  }

  StmtPtr parse_set(int line) {
    Target target = parse_target(true, {});
    if (skip_op("=")) {
      auto node = std::make_unique<SetStmt>(line);
      node->target = std::move(target);
      node->value = parse_tuple(true, {}, false);
      return node;
    }
    auto node = std::make_unique<SetBlockStmt>(line);
    node->target = std::move(target);
    return hard_frame([&] {
      if (at_op("|")) node->filters = parse_filter_chain();
      expect_block_end();
      node->body = subparse({"endset"}, "set", line);
      advance();
      return StmtPtr(std::move(node));
    });
  }

  void parse_signature(MacroDef& def) {
    bool saved_soft = soft_;
    soft_ = false;  // defaults are compiled in the macro's frame
    parse_signature_items(def);
    soft_ = saved_soft;
  }

  void parse_signature_items(MacroDef& def) {
    expect_op("(");
    while (!at_op(")")) {
      if (!def.params.empty()) expect_op(",");
      if (at_op(")")) break;  // trailing comma
      std::string name = expect_name("a parameter name");
      ExprPtr dflt;
      if (skip_op("=")) dflt = parse_expression(true);
      def.params.emplace_back(std::move(name), std::move(dflt));
    }
    expect_op(")");
  }

  // Parses a macro or caller body and records whether it uses varargs/kwargs/caller.
  void parse_macro_body(MacroDef& def, std::string_view end_tag, std::string_view opener,
                        int line) {
    expect_block_end();
    macro_names_.emplace_back();
    int saved_loop_depth = loop_depth_;
    bool saved_soft = soft_;
    loop_depth_ = 0;
    soft_ = false;
    def.body = subparse({end_tag}, opener, line);
    loop_depth_ = saved_loop_depth;
    soft_ = saved_soft;
    const auto& used = macro_names_.back();
    def.uses_varargs = used.count("varargs") > 0;
    def.uses_kwargs = used.count("kwargs") > 0;
    def.uses_caller = used.count("caller") > 0;
    macro_names_.pop_back();
    advance();
  }

  StmtPtr parse_macro(int line) {
    auto node = std::make_unique<MacroStmt>(line);
    node->def.name = expect_name("a macro name");
    parse_signature(node->def);
    parse_macro_body(node->def, "endmacro", "macro", line);
    return node;
  }

  StmtPtr parse_call_block(int line) {
    auto node = std::make_unique<CallBlockStmt>(line);
    node->caller.name = "caller";
    if (at_op("(")) parse_signature(node->caller);
    const Token& at = cur();
    ExprPtr call = parse_expression(true);
    if (call->kind != Expr::Kind::kCall) fail(at, "expected a call after 'call'");
    node->call.reset(static_cast<CallExpr*>(call.release()));
    parse_macro_body(node->caller, "endcall", "call", line);
    return node;
  }

  StmtPtr parse_filter_block(int line) {
    auto node = std::make_unique<FilterBlockStmt>(line);
    return hard_frame([&] {
      node->filters.push_back(parse_filter_call());
      if (at_op("|")) {
        auto more = parse_filter_chain();
        for (auto& f : more) node->filters.push_back(std::move(f));
      }
      expect_block_end();
      node->body = subparse({"endfilter"}, "filter", line);
      advance();
      return StmtPtr(std::move(node));
    });
  }

  StmtPtr parse_with(int line) {
    auto node = std::make_unique<WithStmt>(line);
    while (cur().type != Tok::kBlockEnd) {
      if (!node->assignments.empty()) expect_op(",");
      Target t = parse_target(false, {});
      expect_op("=");
      node->assignments.emplace_back(std::move(t), parse_expression(true));
    }
    expect_block_end();
    return hard_frame([&] {
      node->body = subparse({"endwith"}, "with", line);
      advance();
      return StmtPtr(std::move(node));
    });
  }

  // name | ns.attr | a, b | (a, (b, c))
  Target parse_target(bool with_namespace, Names end_names) {
    if (with_namespace && cur().type == Tok::kName && is_op(".", peek()) &&
        peek(2).type == Tok::kName) {
      Target t;
      t.kind = Target::Kind::kNamespaceAttr;
      t.line = cur().line;
      t.name = cur().text;
      t.attr = peek(2).text;
      advance();
      advance();
      advance();
      return t;
    }
    Target tuple;
    tuple.kind = Target::Kind::kTuple;
    tuple.line = cur().line;
    bool is_tuple = false;
    while (true) {
      if (!tuple.items.empty()) {
        if (!skip_op(",")) break;
        is_tuple = true;
        if (at_target_end(end_names)) break;
      }
      tuple.items.push_back(parse_target_item());
    }
    if (!is_tuple) return std::move(tuple.items[0]);
    return tuple;
  }

  bool at_target_end(Names end_names) const {
    if (cur().type == Tok::kBlockEnd || at_op("=") || at_op(")")) return true;
    return cur().type == Tok::kName &&
           std::find(end_names.begin(), end_names.end(), cur().text) != end_names.end();
  }

  Target parse_target_item() {
    if (skip_op("(")) {
      Target inner = parse_target(false, {});
      expect_op(")");
      return inner;
    }
    if (cur().type != Tok::kName) fail_expected("a variable name to assign to");
    static const std::set<std::string_view> kReserved = {
        "true", "false", "none", "True", "False", "None", "in", "not", "and", "or", "is", "if"};
    if (kReserved.count(cur().text)) fail(cur(), "cannot assign to '{}'", cur().text);
    Target t;
    t.kind = Target::Kind::kName;
    t.name = cur().text;
    t.line = cur().line;
    advance();
    return t;
  }

  // ---- expressions ----

  bool at_tuple_end(Names extra_end) const {
    const Token& t = cur();
    if (t.type == Tok::kVarEnd || t.type == Tok::kBlockEnd || t.type == Tok::kEnd || at_op(")")) {
      return true;
    }
    return t.type == Tok::kName &&
           std::find(extra_end.begin(), extra_end.end(), t.text) != extra_end.end();
  }

  // Comma-separated expressions: one is itself, several (or a trailing comma) a tuple.
  ExprPtr parse_tuple(bool with_condexpr, Names extra_end, bool explicit_parens) {
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

  ExprPtr parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
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

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(Expr::Kind::kOr, BinOp::kAdd, std::move(left),
                                          parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(Expr::Kind::kAnd, BinOp::kAdd, std::move(left),
                                          parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      int line = cur().line;
      advance();
      return std::make_unique<UnaryExpr>(Expr::Kind::kNot, parse_not(), line);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
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

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!at_op("~")) return first;
    auto c = std::make_unique<ConcatExpr>(line);
    c->parts.push_back(std::move(first));
    while (skip_op("~")) c->parts.push_back(parse_math2());
    return c;
  }

  ExprPtr parse_math2() {
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

  ExprPtr parse_pow() {
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
  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_list() {
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

  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr object) {
    int line = cur().line;
    expect_op("[");
    std::vector<ExprPtr> keys;
    while (!at_op("]")) {
      if (!keys.empty()) expect_op(",");
      keys.push_back(parse_subscribed(line));
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
  ExprPtr parse_subscribed(int line) {
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

  ArgList parse_call_args() {
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
  std::string dotted_name(std::string_view what) {
    std::string name = expect_name(what);
    while (at_op(".") && peek().type == Tok::kName) {
      advance();
      name += "." + cur().text;
      advance();
    }
    return name;
  }

  FilterCall parse_filter_call() {
    FilterCall f;
    const Token& at = cur();
    f.line = at.line;
    f.name = dotted_name("a filter name");
    f.fn = find_filter(f.name);
    if (!f.fn && !is_unsupported_jinja_filter(f.name)) note_unknown(at, "filter", f.name);
    if (at_op("(")) f.args = parse_call_args();
    return f;
  }

  std::vector<FilterCall> parse_filter_chain() {
    std::vector<FilterCall> out;
    while (skip_op("|")) out.push_back(parse_filter_call());
    return out;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
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

  ExprPtr parse_test(ExprPtr operand, int line) {
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

  void note_unknown(const Token& at, const char* kind, const std::string& name) {
    unknown_.push_back(Unknown{at.line, at.col, kind, name, soft_});
  }

  struct Unknown {
    int line, col;
    const char* kind;
    std::string name;
    bool soft;
  };

  std::vector<Token> t_;
  size_t i_ = 0;
  // Inside an if statement: Jinja compiles such code in a "soft" frame.
  bool soft_ = false;
  std::vector<Unknown> unknown_;
  int loop_depth_ = 0;
  // Names referenced inside each macro body being parsed (for varargs/kwargs/caller).
  std::vector<std::set<std::string>> macro_names_;
};

}  // namespace

std::unique_ptr<Template> parse_template(const std::string& source) {
  return Parser(tokenize(source)).run();
}

}  // namespace tandem::jinja
