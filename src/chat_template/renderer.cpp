#include "chat_template/renderer.h"

#include <fmt/format.h>

#include "chat_template/errors.h"
#include "chat_template/filters.h"
#include "chat_template/globals.h"
#include "chat_template/operators.h"
#include "chat_template/predicates.h"
#include "chat_template/py_repr.h"

namespace tandem::jinja {

namespace {
// Deep enough for any real template's recursive macros, shallow enough that a runaway
// recursion fails cleanly instead of overflowing a server thread's stack.
constexpr int kMaxCallDepth = 200;
}  // namespace

// The `loop` variable: one per loop, advanced each iteration.
class Interp::LoopObject : public Object {
 public:
  LoopObject(std::vector<Value> items, int depth, const ForStmt* stmt, ScopePtr scope)
      : items_(std::move(items)),
        depth_(depth),
        stmt_(stmt),
        scope_(std::move(scope)),
        changed_(std::make_shared<ChangedState>()) {}

  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override {
    return fmt::format("<LoopContext {}/{}>", index0_ + 1, items_.size());
  }

  Value attr(std::string_view name) const override {
    int64_t n = static_cast<int64_t>(items_.size());
    int64_t i = static_cast<int64_t>(index0_);
    if (name == "index") return Value::integer(i + 1);
    if (name == "index0") return Value::integer(i);
    if (name == "revindex") return Value::integer(n - i);
    if (name == "revindex0") return Value::integer(n - i - 1);
    if (name == "first") return Value::boolean(i == 0);
    if (name == "last") return Value::boolean(i == n - 1);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(depth_);
    if (name == "depth0") return Value::integer(depth_ - 1);
    if (name == "previtem") {
      return i > 0 ? items_[index0_ - 1] : Value::undefined("there is no previous item");
    }
    if (name == "nextitem") {
      return i + 1 < n ? items_[index0_ + 1] : Value::undefined("there is no next item");
    }
    if (name == "cycle") {
      size_t idx = index0_;
      return Value::callable("cycle", [idx](Interp&, CallArgs& a) -> Value {
        if (a.args.empty()) render_fail("no items for cycling given");
        return a.args[idx % a.args.size()];
      });
    }
    if (name == "changed") {
      auto st = changed_;
      return Value::callable("changed", [st](Interp&, CallArgs& a) {
        Value now = Value::list(a.args);
        if (st->seen && equals(st->last, now)) return Value::boolean(false);
        st->seen = true;
        st->last = now;
        return Value::boolean(true);
      });
    }
    return Value::undefined("'LoopContext object' has no attribute '" + std::string(name) + "'");
  }

  size_t index0_ = 0;
  const std::vector<Value> items_;
  const int depth_;
  const ForStmt* stmt_;
  const ScopePtr scope_;  // where a recursive loop re-runs its body

 private:
  struct ChangedState {
    bool seen = false;
    Value last;
  };
  std::shared_ptr<ChangedState> changed_;
};

[[noreturn]] static void fail_missing_filter(const std::string& name) {
  if (is_unsupported_jinja_filter(name)) {
    render_fail("the '{}' filter is not supported by this chat template engine", name);
  }
  render_fail("No filter named '{}' found.", name);
}

Interp::Interp(const Template& tpl, ScopePtr globals) : tpl_(tpl), globals_(std::move(globals)) {}

Interp::~Interp() {
  for (auto& s : captured_) s->clear();
}

std::string Interp::render() {
  auto top = std::make_shared<Scope>(globals_);
  std::string out;
  exec(tpl_.body, top, out);
  return out;
}

Interp::Flow Interp::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interp::Flow Interp::exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  try {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out += static_cast<const TextStmt&>(s).text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput:
        append_str(out, eval(*static_cast<const OutputStmt&>(s).expr, scope));
        return Flow::kNormal;
      case Stmt::Kind::kIf: {
        const auto& n = static_cast<const IfStmt&>(s);
        for (const auto& [cond, body] : n.branches) {
          if (truthy(eval(*cond, scope))) return exec(body, scope, out);
        }
        return exec(n.otherwise, scope, out);
      }
      case Stmt::Kind::kFor:
        exec_for(static_cast<const ForStmt&>(s), scope, out);
        return Flow::kNormal;
      case Stmt::Kind::kSet: {
        const auto& n = static_cast<const SetStmt&>(s);
        assign(n.target, eval(*n.value, scope), scope);
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        const auto& n = static_cast<const SetBlockStmt&>(s);
        std::string text;
        exec(n.body, std::make_shared<Scope>(scope), text);
        assign(n.target, apply_filters(n.filters, Value::string(std::move(text)), scope), scope);
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro: {
        const auto& n = static_cast<const MacroStmt&>(s);
        scope->set(n.def.name, make_macro(n.def, scope));
        return Flow::kNormal;
      }
      case Stmt::Kind::kCallBlock: {
        const auto& n = static_cast<const CallBlockStmt&>(s);
        Value callee = eval(*n.call->callee, scope);
        CallArgs args = eval_args(n.call->args, scope);
        args.kwargs.emplace_back("caller", make_macro(n.caller, scope));
        append_str(out, call(callee, args));
        return Flow::kNormal;
      }
      case Stmt::Kind::kFilterBlock: {
        const auto& n = static_cast<const FilterBlockStmt&>(s);
        auto inner = std::make_shared<Scope>(scope);
        std::string text;
        exec(n.body, inner, text);
        append_str(out, apply_filters(n.filters, Value::string(std::move(text)), inner));
        return Flow::kNormal;
      }
      case Stmt::Kind::kWith: {
        const auto& n = static_cast<const WithStmt&>(s);
        auto inner = std::make_shared<Scope>(scope);
        for (const auto& [target, value] : n.assignments) {
          assign(target, eval(*value, scope), inner);
        }
        return exec(n.body, inner, out);
      }
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
      case Stmt::Kind::kBlock:
        // transformers compiles {% generation %} to a call block, so its body gets a scope.
        return exec(static_cast<const BlockStmt&>(s).body, std::make_shared<Scope>(scope), out);
    }
  } catch (RenderError& e) {
    if (e.line == 0) e.line = s.line;
    throw;
  }
  return Flow::kNormal;
}

void Interp::exec_for(const ForStmt& s, const ScopePtr& scope, std::string& out) {
  run_loop(s, scope, eval(*s.iter, scope), 1, out);
}

void Interp::run_loop(const ForStmt& s, const ScopePtr& scope, const Value& iterable, int depth,
                      std::string& out) {
  std::vector<Value> items = iterate(iterable);
  if (s.filter) {
    // `for x in xs if cond` filters first, so loop.length/last count only kept items.
    std::vector<Value> kept;
    for (auto& x : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign(s.target, x, probe);
      if (truthy(eval(*s.filter, probe))) kept.push_back(std::move(x));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.otherwise, std::make_shared<Scope>(scope), out);
    return;
  }
  // Only a recursive loop keeps its scope (to re-run the body); holding it otherwise could
  // form a cycle if the template stores `loop` in a namespace.
  auto loop = std::make_shared<LoopObject>(items, depth, &s, s.recursive ? scope : nullptr);
  Value loop_value = Value::object(loop);
  for (size_t i = 0; i < items.size(); ++i) {
    // A fresh scope per iteration: sets in the body do not carry over to the next one.
    auto iteration = std::make_shared<Scope>(scope);
    assign(s.target, items[i], iteration);
    loop->index0_ = i;
    iteration->set("loop", loop_value);
    if (exec(s.body, iteration, out) == Flow::kBreak) break;
  }
}

void Interp::assign(const Target& t, Value v, const ScopePtr& scope) {
  switch (t.kind) {
    case Target::Kind::kName:
      scope->set(t.name, std::move(v));
      return;
    case Target::Kind::kTuple: {
      std::vector<Value> parts = iterate(v);
      if (parts.size() > t.items.size()) {
        render_fail("too many values to unpack (expected {})", t.items.size());
      }
      if (parts.size() < t.items.size()) {
        render_fail("not enough values to unpack (expected {}, got {})", t.items.size(),
                    parts.size());
      }
      for (size_t i = 0; i < parts.size(); ++i) assign(t.items[i], std::move(parts[i]), scope);
      return;
    }
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = scope->find(t.name);
      auto* obj =
          ns && ns->is_object() ? dynamic_cast<NamespaceObject*>(ns->object().get()) : nullptr;
      if (!obj) render_fail("cannot assign attribute on non-namespace object");
      obj->set(t.attr, std::move(v));
      return;
    }
  }
}

Value Interp::make_macro(const MacroDef& def, const ScopePtr& closure) {
  captured_.push_back(closure);
  const MacroDef* d = &def;
  return Value::callable(def.name, [d, closure](Interp& in, CallArgs& args) {
    return in.call_macro(*d, closure, args);
  });
}

Value Interp::call_macro(const MacroDef& def, const ScopePtr& closure, CallArgs& args) {
  if (call_depth_ >= kMaxCallDepth) {
    render_fail("maximum recursion depth exceeded calling macro '{}'", def.name);
  }
  struct DepthGuard {
    int& d;
    explicit DepthGuard(int& x) : d(x) { ++d; }
    ~DepthGuard() { --d; }
  } guard(call_depth_);

  auto s = std::make_shared<Scope>(closure);
  size_t np = def.params.size();
  std::vector<bool> bound(np, false);
  for (size_t i = 0; i < args.args.size() && i < np; ++i) {
    s->set(def.params[i].first, args.args[i]);
    bound[i] = true;
  }
  if (args.args.size() > np && !def.uses_varargs) {
    render_fail("macro '{}' takes not more than {} argument(s)", def.name, np);
  }
  DictData extra_kwargs;
  Value caller = Value::undefined("No caller defined");
  for (auto& [k, v] : args.kwargs) {
    size_t i = 0;
    while (i < np && def.params[i].first != k) ++i;
    if (i < np) {
      if (bound[i]) render_fail("macro '{}' got multiple values for argument '{}'", def.name, k);
      s->set(k, v);
      bound[i] = true;
    } else if (k == "caller" && def.uses_caller) {
      caller = v;
    } else if (def.uses_kwargs) {
      extra_kwargs.set(Value::string(k), v);
    } else {
      render_fail("macro '{}' takes no keyword argument '{}'", def.name, k);
    }
  }
  for (size_t i = 0; i < np; ++i) {
    if (bound[i]) continue;
    const auto& [name, dflt] = def.params[i];
    s->set(name,
           dflt ? eval(*dflt, s) : Value::undefined("parameter '" + name + "' was not provided"));
  }
  if (def.uses_varargs) {
    std::vector<Value> rest;
    if (args.args.size() > np) rest.assign(args.args.begin() + np, args.args.end());
    s->set("varargs", Value::list(std::move(rest), true));
  }
  if (def.uses_kwargs) s->set("kwargs", Value::dict(std::move(extra_kwargs)));
  if (def.uses_caller) s->set("caller", caller);
  std::string out;
  exec(def.body, s, out);
  return Value::string(std::move(out));
}

Value Interp::apply_filters(const std::vector<FilterCall>& filters, Value v,
                            const ScopePtr& scope) {
  for (const auto& f : filters) {
    CallArgs args = eval_args(f.args, scope);
    if (!f.fn) fail_missing_filter(f.name);
    v = f.fn(*this, v, args);
  }
  return v;
}

Value Interp::call(const Value& callee, CallArgs& args) {
  switch (callee.kind()) {
    case Value::Kind::kCallable:
      return callee.callable().fn(*this, args);
    case Value::Kind::kUndefined:
      fail_undefined(callee);
    case Value::Kind::kObject:
      if (auto* loop = dynamic_cast<LoopObject*>(callee.object().get())) {
        if (!loop->stmt_->recursive) {
          render_fail(
              "Tried to call non recursive loop. Maybe you forgot the 'recursive' modifier.");
        }
        if (args.args.size() != 1 || !args.kwargs.empty()) render_fail("loop() takes one argument");
        if (call_depth_ >= kMaxCallDepth) render_fail("maximum recursion depth exceeded in loop()");
        ++call_depth_;
        std::string out;
        try {
          run_loop(*loop->stmt_, loop->scope_, args.args[0], loop->depth_ + 1, out);
        } catch (...) {
          --call_depth_;
          throw;
        }
        --call_depth_;
        return Value::string(std::move(out));
      }
      break;
    default:
      break;
  }
  render_fail("'{}' object is not callable", type_name(callee));
}

Value Interp::apply_filter(std::string_view name, const Value& v, const CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (!fn) render_fail("No filter named '{}'.", name);
  return fn(*this, v, args);
}

bool Interp::apply_test(std::string_view name, const Value& v, const CallArgs& args) {
  TestFn fn = find_test(name);
  if (!fn) render_fail("No test named '{}'.", name);
  return fn(*this, v, args);
}

CallArgs Interp::eval_args(const ArgList& a, const ScopePtr& scope) {
  CallArgs out;
  out.args.reserve(a.positional.size());
  for (const auto& e : a.positional) out.args.push_back(eval(*e, scope));
  if (a.star_args) {
    for (auto& v : iterate(eval(*a.star_args, scope))) out.args.push_back(std::move(v));
  }
  for (const auto& [k, e] : a.keyword) out.kwargs.emplace_back(k, eval(*e, scope));
  if (a.star_kwargs) {
    Value d = eval(*a.star_kwargs, scope);
    if (!d.is_dict()) render_fail("argument after ** must be a mapping, not {}", type_name(d));
    for (const auto& [k, v] : d.dict().entries) {
      if (!k.is_string()) render_fail("keywords must be strings");
      out.kwargs.emplace_back(k.str(), v);
    }
  }
  return out;
}

Value Interp::eval(const Expr& e, const ScopePtr& scope) {
  try {
    return eval_inner(e, scope);
  } catch (RenderError& err) {
    if (err.line == 0) err.line = e.line;
    throw;
  }
}

Value Interp::eval_inner(const Expr& e, const ScopePtr& scope) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::kLiteral:
      return static_cast<const LiteralExpr&>(e).value;
    case K::kName: {
      const auto& n = static_cast<const NameExpr&>(e);
      if (const Value* v = scope->find(n.name)) return *v;
      return Value::undefined("'" + n.name + "' is undefined");
    }
    case K::kList:
    case K::kTuple: {
      const auto& n = static_cast<const SequenceExpr&>(e);
      std::vector<Value> items;
      items.reserve(n.items.size());
      for (const auto& x : n.items) items.push_back(eval(*x, scope));
      return Value::list(std::move(items), e.kind == K::kTuple);
    }
    case K::kDict: {
      const auto& n = static_cast<const DictExpr&>(e);
      DictData d;
      for (const auto& [k, v] : n.items) {
        Value key = eval(*k, scope);
        if (!hashable(key)) render_fail("unhashable type: '{}'", type_name(key));
        d.set(std::move(key), eval(*v, scope));
      }
      return Value::dict(std::move(d));
    }
    case K::kGetAttr: {
      const auto& n = static_cast<const GetAttrExpr&>(e);
      return get_attr(eval(*n.object, scope), n.name);
    }
    case K::kGetItem: {
      const auto& n = static_cast<const GetItemExpr&>(e);
      Value obj = eval(*n.object, scope);
      return get_item(obj, eval(*n.key, scope));
    }
    case K::kSlice: {
      const auto& n = static_cast<const SliceExpr&>(e);
      Value obj = eval(*n.object, scope);
      auto bound = [&](const ExprPtr& x) { return x ? eval(*x, scope) : Value::none(); };
      Value start = bound(n.start), stop = bound(n.stop), step = bound(n.step);
      return get_slice(obj, start, stop, step);
    }
    case K::kCall: {
      const auto& n = static_cast<const CallExpr&>(e);
      Value callee = eval(*n.callee, scope);
      CallArgs args = eval_args(n.args, scope);
      return call(callee, args);
    }
    case K::kFilter: {
      const auto& n = static_cast<const FilterExpr&>(e);
      Value v = eval(*n.operand, scope);
      CallArgs args = eval_args(n.filter.args, scope);
      // Unknown filters parse inside if blocks and fail only when reached, as in Jinja.
      if (!n.filter.fn) fail_missing_filter(n.filter.name);
      return n.filter.fn(*this, v, args);
    }
    case K::kTest: {
      const auto& n = static_cast<const TestExpr&>(e);
      Value v = eval(*n.operand, scope);
      CallArgs args = eval_args(n.args, scope);
      if (!n.fn) render_fail("No test named '{}' found.", n.name);
      return Value::boolean(n.fn(*this, v, args) != n.negated);
    }
    case K::kNeg:
      return negate(eval(*static_cast<const UnaryExpr&>(e).operand, scope));
    case K::kPos:
      return unary_plus(eval(*static_cast<const UnaryExpr&>(e).operand, scope));
    case K::kNot:
      return Value::boolean(!truthy(eval(*static_cast<const UnaryExpr&>(e).operand, scope)));
    case K::kBinary: {
      const auto& n = static_cast<const BinaryExpr&>(e);
      Value l = eval(*n.lhs, scope);
      return binary_op(n.op, l, eval(*n.rhs, scope));
    }
    case K::kAnd: {
      const auto& n = static_cast<const BinaryExpr&>(e);
      Value l = eval(*n.lhs, scope);
      return truthy(l) ? eval(*n.rhs, scope) : l;
    }
    case K::kOr: {
      const auto& n = static_cast<const BinaryExpr&>(e);
      Value l = eval(*n.lhs, scope);
      return truthy(l) ? l : eval(*n.rhs, scope);
    }
    case K::kConcat: {
      std::string out;
      for (const auto& p : static_cast<const ConcatExpr&>(e).parts)
        append_str(out, eval(*p, scope));
      return Value::string(std::move(out));
    }
    case K::kCompare: {
      const auto& n = static_cast<const CompareExpr&>(e);
      Value left = eval(*n.first, scope);
      for (const auto& [op, rhs] : n.rest) {
        Value right = eval(*rhs, scope);
        if (!compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case K::kCondExpr: {
      const auto& n = static_cast<const CondExpr&>(e);
      if (truthy(eval(*n.cond, scope))) return eval(*n.then, scope);
      if (n.otherwise) return eval(*n.otherwise, scope);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          e.line));
    }
  }
  return {};
}

}  // namespace tandem::jinja
