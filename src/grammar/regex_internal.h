// Regex -> EBNF expression, with the two variants JSON Schema's `pattern` needs on top of
// regex.h's plain full match.
#pragma once

#include <string>
#include <string_view>

#include "grammar/code_point_set.h"
#include "grammar/ebnf_writer.h"

namespace tandem::grammar::front {

struct RegexEmitOptions {
  // Match the text as it is written between the quotes of a JSON string: '"', '\' and control
  // characters become their JSON escapes (one canonical spelling each; \u00XX for controls
  // without a short escape).
  bool json_string = false;
  // JSON Schema semantics: the text need only contain a match (ECMAScript `search`), so a
  // side without its ^ or $ anchor gets "any characters" added.
  bool search = false;
};

Expr regex_expr(std::string_view regex, const RegexEmitOptions& opt);

// One code point of `s` as JSON string content (see RegexEmitOptions::json_string).
Expr json_string_chars(const CodePointSet& s);
// The canonical JSON string spelling of c (escaped where JSON requires it).
std::string json_escape(char32_t c);

}  // namespace tandem::grammar::front
