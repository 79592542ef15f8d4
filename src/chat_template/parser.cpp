// Statement half of the parser: template bodies, block tags (if/for/set/macro/call/filter/with/
// generation, break/continue) and assignment targets. Expressions are in parser_expr.cpp.
#include "chat_template/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "chat_template/lexer.h"
#include "chat_template/parser_impl.h"
#include "core/error.h"

namespace tandem::jinja {
namespace parser_detail {

std::unique_ptr<Template> Parser::run() {
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

// Parses until a block tag whose name is in `end_tags`; returns with that name current (the
// '{%' consumed). `opener`/`opened_at` describe the enclosing block for error messages.
Body Parser::subparse(Names end_tags, std::string_view opener, int opened_at) {
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
        fail(t, "unexpected end of template: expected {} to close the '{}' block opened at line {}",
             quoted_list(end_tags), opener, opened_at);
      default:
        fail(t, "unexpected {}", describe(t));
    }
  }
}

std::string Parser::quoted_list(Names names) {
  std::string out;
  size_t k = 0;
  for (auto n : names) {
    if (k++) out += k == names.size() ? " or " : ", ";
    out += fmt::format("'{}'", n);
  }
  return out;
}

StmtPtr Parser::parse_statement() {
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

StmtPtr Parser::parse_if(int line) {
  bool saved_soft = soft_;
  soft_ = true;
  auto r = parse_if_body(line);
  soft_ = saved_soft;
  return r;
}

StmtPtr Parser::parse_if_body(int line) {
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

StmtPtr Parser::parse_for(int line) {
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

StmtPtr Parser::parse_set(int line) {
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

void Parser::parse_signature(MacroDef& def) {
  bool saved_soft = soft_;
  soft_ = false;  // defaults are compiled in the macro's frame
  parse_signature_items(def);
  soft_ = saved_soft;
}

void Parser::parse_signature_items(MacroDef& def) {
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
void Parser::parse_macro_body(MacroDef& def, std::string_view end_tag, std::string_view opener,
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

StmtPtr Parser::parse_macro(int line) {
  auto node = std::make_unique<MacroStmt>(line);
  node->def.name = expect_name("a macro name");
  parse_signature(node->def);
  parse_macro_body(node->def, "endmacro", "macro", line);
  return node;
}

StmtPtr Parser::parse_call_block(int line) {
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

StmtPtr Parser::parse_filter_block(int line) {
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

StmtPtr Parser::parse_with(int line) {
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
Target Parser::parse_target(bool with_namespace, Names end_names) {
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

bool Parser::at_target_end(Names end_names) const {
  if (cur().type == Tok::kBlockEnd || at_op("=") || at_op(")")) return true;
  return cur().type == Tok::kName &&
         std::find(end_names.begin(), end_names.end(), cur().text) != end_names.end();
}

Target Parser::parse_target_item() {
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

}  // namespace parser_detail

std::unique_ptr<Template> parse_template(const std::string& source) {
  return parser_detail::Parser(tokenize(source)).run();
}

}  // namespace tandem::jinja
