// regex.h's public entry points; regex_parse.cpp and regex_emit.cpp do the work.
#include "grammar/regex.h"

#include "grammar/regex_internal.h"

namespace tandem::grammar {

std::string regex_to_ebnf_expression(std::string_view regex) {
  try {
    return front::regex_expr(regex, {}).text;
  } catch (const GrammarError& e) {
    throw GrammarError(e.what(), "regex");
  }
}

std::string regex_to_ebnf(std::string_view regex) {
  return "root ::= " + regex_to_ebnf_expression(regex) + "\n";
}

}  // namespace tandem::grammar
