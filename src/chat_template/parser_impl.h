// Internal to the parser: the Parser state class shared by parser.cpp (statements, tags,
// assignment targets) and parser_expr.cpp (expressions, filters, tests, literals).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "chat_template/ast.h"
#include "chat_template/lexer.h"
#include "core/error.h"

namespace tandem::jinja::parser_detail {

using Names = std::initializer_list<std::string_view>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  std::unique_ptr<Template> run();

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

  // ---- statements (parser.cpp) ----

  // Parses until a block tag whose name is in `end_tags`; returns with that name current (the
  // '{%' consumed). `opener`/`opened_at` describe the enclosing block for error messages.
  Body subparse(Names end_tags, std::string_view opener, int opened_at);
  static std::string quoted_list(Names names);
  StmtPtr parse_statement();

  // Runs f with soft_ off: Jinja compiles these block bodies in a frame of their own.
  template <typename F>
  StmtPtr hard_frame(F f) {
    bool saved = soft_;
    soft_ = false;
    auto r = f();
    soft_ = saved;
    return r;
  }

  StmtPtr parse_if(int line);
  StmtPtr parse_if_body(int line);
  StmtPtr parse_for(int line);
  StmtPtr parse_set(int line);
  void parse_signature(MacroDef& def);
  void parse_signature_items(MacroDef& def);
  // Parses a macro or caller body and records whether it uses varargs/kwargs/caller.
  void parse_macro_body(MacroDef& def, std::string_view end_tag, std::string_view opener, int line);
  StmtPtr parse_macro(int line);
  StmtPtr parse_call_block(int line);
  StmtPtr parse_filter_block(int line);
  StmtPtr parse_with(int line);

  // name | ns.attr | a, b | (a, (b, c))
  Target parse_target(bool with_namespace, Names end_names);
  bool at_target_end(Names end_names) const;
  Target parse_target_item();

  // ---- expressions (parser_expr.cpp) ----

  bool at_tuple_end(Names extra_end) const;
  // Comma-separated expressions: one is itself, several (or a trailing comma) a tuple.
  ExprPtr parse_tuple(bool with_condexpr, Names extra_end, bool explicit_parens);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  // Like Jinja, a sign binds tighter than filters: -x|abs is (-x)|abs.
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr object);
  // One subscript: an expression or a start:stop:step slice.
  ExprPtr parse_subscribed(int line);
  ArgList parse_call_args();
  // name, possibly dotted, as filters and tests are named.
  std::string dotted_name(std::string_view what);
  FilterCall parse_filter_call();
  std::vector<FilterCall> parse_filter_chain();
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_test(ExprPtr operand, int line);
  void note_unknown(const Token& at, const char* kind, const std::string& name);

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

}  // namespace tandem::jinja::parser_detail
