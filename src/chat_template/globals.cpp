#include "chat_template/globals.h"

#include <algorithm>
#include <ctime>
#include <vector>

#include "chat_template/args.h"
#include "chat_template/errors.h"
#include "chat_template/operators.h"
#include "chat_template/py_repr.h"

namespace tandem::jinja {

Value NamespaceObject::attr(std::string_view name) const {
  if (const Value* v = attrs_.find(name)) return *v;
  return Value::undefined("'jinja2.utils.Namespace object' has no attribute '" + std::string(name) +
                          "'");
}

namespace {
thread_local std::vector<std::weak_ptr<NamespaceObject>> render_namespaces;
}  // namespace

NamespacesOfThisRender::NamespacesOfThisRender() : first_(render_namespaces.size()) {}

NamespacesOfThisRender::~NamespacesOfThisRender() {
  for (size_t i = first_; i < render_namespaces.size(); ++i)
    if (auto ns = render_namespaces[i].lock()) ns->clear();
  render_namespaces.resize(first_);
}

std::string NamespaceObject::repr() const {
  // A namespace can hold itself (`{% set ns.x = ns %}`): as Python's dict repr does, the inner
  // occurrence prints as {...}; the recursion overflowed the stack before (fuzz_chat_template's
  // 1M-run campaign).
  thread_local std::vector<const NamespaceObject*> open;
  if (std::find(open.begin(), open.end(), this) != open.end()) return "<Namespace {...}>";
  open.push_back(this);
  struct Close {
    ~Close() { open.pop_back(); }
  } close;
  std::string out = "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs_.entries) {
    if (!first) out += ", ";
    first = false;
    out += jinja::repr(k) + ": " + jinja::repr(v);
  }
  return out + "}>";
}

namespace {

// dict(...)/namespace(...) arguments: an optional mapping or list of pairs, then keywords.
DictData dict_from_args(const CallArgs& a, const char* fn) {
  DictData d;
  if (a.args.size() > 1) render_fail("{} expected at most 1 argument, got {}", fn, a.args.size());
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      for (const auto& pair : iterate(src)) {
        if (!pair.is_list() || pair.items().size() != 2) {
          render_fail("{} update sequence elements must have length 2", fn);
        }
        d.set(pair.items()[0], pair.items()[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs) d.set(Value::string(k), v);
  return d;
}

Value range_fn(Interp&, CallArgs& a) {
  if (!a.kwargs.empty()) render_fail("range() takes no keyword arguments");
  if (a.args.empty() || a.args.size() > 3) render_fail("range expected 1 to 3 arguments");
  int64_t start = 0, stop = 0, step = 1;
  if (a.args.size() == 1) {
    stop = expect_int("range() argument", a.args[0]);
  } else {
    start = expect_int("range() argument", a.args[0]);
    stop = expect_int("range() argument", a.args[1]);
    if (a.args.size() == 3) step = expect_int("range() argument", a.args[2]);
  }
  if (step == 0) render_fail("range() arg 3 must not be zero");
  std::vector<Value> out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    // The sandbox's MAX_RANGE.
    if (out.size() >= 100000) {
      render_fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    out.push_back(Value::integer(i));
  }
  return Value::list(std::move(out));
}

class Cycler : public Object {
 public:
  explicit Cycler(std::vector<Value> items) : state_(std::make_shared<State>()) {
    state_->items = std::move(items);
  }
  std::string type_name() const override { return "Cycler"; }
  Value attr(std::string_view name) const override {
    auto st = state_;  // the bound methods share the position with the object
    if (name == "current") return st->items[st->pos];
    if (name == "next") {
      return Value::callable("next", [st](Interp&, CallArgs&) {
        Value v = st->items[st->pos];
        st->pos = (st->pos + 1) % st->items.size();
        return v;
      });
    }
    if (name == "reset") {
      return Value::callable("reset", [st](Interp&, CallArgs&) {
        st->pos = 0;
        return Value::none();
      });
    }
    return Value::undefined("'Cycler object' has no attribute '" + std::string(name) + "'");
  }

 private:
  struct State {
    std::vector<Value> items;
    size_t pos = 0;
  };
  std::shared_ptr<State> state_;
};

}  // namespace

ScopePtr make_globals() {
  auto g = std::make_shared<Scope>(nullptr);
  g->set("range", Value::callable("range", range_fn));
  g->set("dict", Value::callable("dict", [](Interp&, CallArgs& a) {
           return Value::dict(dict_from_args(a, "dict"));
         }));
  g->set("namespace", Value::callable("namespace", [](Interp&, CallArgs& a) {
           auto ns = std::make_shared<NamespaceObject>();
           render_namespaces.push_back(ns);
           for (auto& [k, v] : dict_from_args(a, "namespace").entries) ns->set(to_str(k), v);
           return Value::object(ns);
         }));
  g->set("cycler", Value::callable("cycler", [](Interp&, CallArgs& a) {
           if (a.args.empty()) render_fail("at least one item has to be provided");
           return Value::object(std::make_shared<Cycler>(a.args));
         }));
  g->set("joiner", Value::callable("joiner", [](Interp&, CallArgs& a) {
           Params p("joiner", a, {"sep"});
           auto used = std::make_shared<bool>(false);
           std::string sep = p.get_str(0, ", ");
           return Value::callable("joiner", [used, sep](Interp&, CallArgs&) {
             if (!*used) {
               *used = true;
               return Value::string("");
             }
             return Value::string(sep);
           });
         }));
  // transformers: raise_exception(message) raises TemplateError(message).
  g->set("raise_exception", Value::callable("raise_exception", [](Interp&, CallArgs& a) -> Value {
           Params p("raise_exception", a, {"message"}, 1);
           throw RenderError{to_str(p[0]), 0, true};
         }));
  // transformers: strftime_now(format) formats the current local time.
  g->set("strftime_now", Value::callable("strftime_now", [](Interp&, CallArgs& a) {
           Params p("strftime_now", a, {"format"}, 1);
           std::time_t now = std::time(nullptr);
           std::tm tm{};
           localtime_r(&now, &tm);
           const std::string& f = expect_str("strftime_now format", p[0]);
           std::string buf(256 + f.size() * 8, '\0');
           size_t n = f.empty() ? 0 : std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
           buf.resize(n);
           return Value::string(std::move(buf));
         }));
  return g;
}

}  // namespace tandem::jinja
