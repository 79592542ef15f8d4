// Walks a parsed template and produces its text. One Interp renders one request; it owns every
// value it creates, so concurrent renders of the same template share nothing mutable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat_template/ast.h"
#include "chat_template/scope.h"

namespace tandem::jinja {

class Interp {
 public:
  Interp(const Template& tpl, ScopePtr globals);
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  std::string render();

  // Calls a function value (built-in, bound method, macro, caller, loop for recursion).
  Value call(const Value& callee, CallArgs& args);
  // Filters and tests by name, for map('upper') and select('odd').
  Value apply_filter(std::string_view name, const Value& v, const CallArgs& args);
  bool apply_test(std::string_view name, const Value& v, const CallArgs& args);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  class LoopObject;

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out);
  void run_loop(const ForStmt& s, const ScopePtr& scope, const Value& iterable, int depth,
                std::string& out);
  void assign(const Target& t, Value v, const ScopePtr& scope);
  Value make_macro(const MacroDef& def, const ScopePtr& closure);
  Value call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args);
  Value apply_filters(const std::vector<FilterCall>& filters, Value v, const ScopePtr& scope);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value eval_inner(const Expr& e, const ScopePtr& scope);
  CallArgs eval_args(const ArgList& a, const ScopePtr& scope);

  const Template& tpl_;
  ScopePtr globals_;
  // Scopes that macros closed over; cleared at the end to free the cycles they form.
  std::vector<ScopePtr> captured_;
  int call_depth_ = 0;
};

}  // namespace tandem::jinja
