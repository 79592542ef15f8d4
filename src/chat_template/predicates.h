// Jinja's built-in tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...).
#pragma once

#include <string_view>

#include "chat_template/ast.h"

namespace tandem::jinja {

// nullptr when Jinja has no test of that name.
TestFn find_test(std::string_view name);

}  // namespace tandem::jinja
