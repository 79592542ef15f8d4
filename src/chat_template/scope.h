// Variable scopes. Jinja gives each for-loop iteration, macro call, with/filter block its own
// scope whose reads fall back to the enclosing one, while if-blocks share their parent's, so a
// {% set %} inside a loop body is gone at the next iteration but one inside an if is not.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat_template/value.h"

namespace tandem::jinja {

class Scope;
using ScopePtr = std::shared_ptr<Scope>;

class Scope {
 public:
  explicit Scope(ScopePtr parent) : parent_(std::move(parent)) {}

  // Looks the name up here and then in the enclosing scopes; nullptr when unbound.
  const Value* find(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent_.get()) {
      for (const auto& [k, v] : s->vars_) {
        if (k == name) return &v;
      }
    }
    return nullptr;
  }

  void set(std::string_view name, Value v) {
    for (auto& [k, old] : vars_) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars_.emplace_back(std::string(name), std::move(v));
  }

  // Drops the variables; breaks the reference cycle a macro closure makes with its scope.
  void clear() { vars_.clear(); }

 private:
  ScopePtr parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

}  // namespace tandem::jinja
