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

 private:
  DictData attrs_;
};

// A scope holding the globals; render variables go in a child scope, which shadows them.
ScopePtr make_globals();

}  // namespace tandem::jinja
