// Builds the statement/expression tree from tokens with Jinja's grammar and operator
// precedence. Syntax errors throw tandem::Error with line:column and what was expected.
#pragma once

#include <memory>
#include <string>

#include "chat_template/ast.h"

namespace tandem::jinja {

std::unique_ptr<Template> parse_template(const std::string& source);

}  // namespace tandem::jinja
