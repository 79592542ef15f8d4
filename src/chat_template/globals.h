// Global functions templates can call: Jinja's (range, dict, namespace, cycler, joiner) and
// the two transformers adds (raise_exception, strftime_now).
#pragma once

#include "chat_template/scope.h"

namespace tandem::jinja {

// namespace(): the one mutable object, assigned through {% set ns.attr = value %}.
class NamespaceObject : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  Value attr(std::string_view name) const override;
  std::string repr() const override;
  void set(std::string_view name, Value v) {
    attrs_.set(Value::string(std::string(name)), std::move(v));
  }
  void clear() { attrs_ = DictData(); }

 private:
  DictData attrs_;
};

// A scope holding the globals; render variables go in a child scope, which shadows them.
ScopePtr make_globals();

// Namespaces live for one render, and one may hold itself (`{% set ns.x = ns %}`), a cycle of
// shared pointers that would never be freed (LeakSanitizer; fuzz_chat_template). While one of
// these is alive, the namespaces the thread creates are recorded, and emptied when it ends.
class NamespacesOfThisRender {
 public:
  NamespacesOfThisRender();
  ~NamespacesOfThisRender();

 private:
  size_t first_;
};

}  // namespace tandem::jinja
