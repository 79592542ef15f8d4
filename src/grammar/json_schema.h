// JSON Schema -> EBNF (grammar.h's dialect), for response_format json_schema / json_object and
// SGLang's json_schema sampling parameter. docs/structured-outputs.md lists the keywords
// supported; any other keyword that would constrain the value is refused with a GrammarError
// naming it, never silently ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"

namespace tandem::grammar {

struct JsonGrammarOptions {
  // Whitespace allowed between tokens of the JSON text ([ \t\n\r], at most this many bytes per
  // gap): models write pretty-printed JSON, and an unbounded run would let one loop forever.
  int max_whitespace = 20;
  // OpenAI's `strict: true`: every property is required and additionalProperties must be false.
  bool strict = false;
};

// Rules matching one JSON value of `schema`, every rule name starting with `prefix` so that
// several schemas can share one grammar (tool calls); `root` names the rule of the value itself.
struct EbnfRules {
  std::string text;  // rule definitions, one or more lines
  std::string root;  // the rule that matches the value
};
// Properties are matched in the order the schema lists them, so pass the schema as an
// ordered_json (as the server parses requests); a plain json has already sorted its keys.
// `prefix` must be empty or match [A-Za-z_][A-Za-z0-9_-]*.
EbnfRules json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix,
                            const JsonGrammarOptions& opt = {});
EbnfRules json_schema_rules(const nlohmann::json& schema, const std::string& prefix,
                            const JsonGrammarOptions& opt = {});

// A whole grammar whose root is one JSON value of `schema` (the value's rule is `root`).
std::string json_schema_to_ebnf(const nlohmann::ordered_json& schema,
                                const JsonGrammarOptions& opt = {});
std::string json_schema_to_ebnf(const nlohmann::json& schema, const JsonGrammarOptions& opt = {});
// response_format {"type": "json_object"}: any JSON object.
std::string json_object_ebnf(const JsonGrammarOptions& opt = {});

}  // namespace tandem::grammar
