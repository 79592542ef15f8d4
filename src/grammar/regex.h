// Regular expression -> EBNF (grammar.h's dialect), for SGLang's `regex` sampling parameter and
// JSON Schema `pattern`. The syntax is the common subset of Python `re` and ECMAScript that
// structured-output regexes use (docs/structured-outputs.md); lookaround and backreferences are
// refused with a GrammarError. Matching is over code points; the grammar expands classes into
// UTF-8 byte sequences.
#pragma once

#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace tandem::grammar {

// An EBNF expression (no rule definitions) that matches exactly the strings `regex` matches in
// full (a leading ^ and trailing $ are accepted and mean the same).
std::string regex_to_ebnf_expression(std::string_view regex);
// A whole grammar: `root ::= <expression>`.
std::string regex_to_ebnf(std::string_view regex);

}  // namespace tandem::grammar
