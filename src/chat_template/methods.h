// Attributes of str, list and dict values: the methods templates call (content.split('</think>'),
// message.get('x'), tools.items()). Mutating list/dict methods exist but are refused, as in
// transformers' ImmutableSandboxedEnvironment.
#pragma once

#include <optional>
#include <string_view>

#include "chat_template/value.h"

namespace tandem::jinja {

// The bound method `self.name`; an unsafe undefined for a method the sandbox refuses; nullopt
// when Python's type has no attribute of that name.
std::optional<Value> method(const Value& self, std::string_view name);

}  // namespace tandem::jinja
