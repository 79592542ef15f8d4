// tool_choice "required" and a named function, enforced: the grammar of the tool calls a
// --tool-call-parser format writes, with each function's arguments typed by its JSON schema
// (grammar/json_schema.h). The output is then nothing but calls, which the same format's parser
// turns into message.tool_calls.
#pragma once

#include <string>

#include "grammar/json_schema.h"
#include "server/json_fields.h"

namespace tandem::server {

// Rules (every name starting with "tool-") whose root, `tool-root`, matches one call of
// `function` (one of tools) or, when function is empty, one call of any of tools; with
// `parallel` one or more calls. parser: a --tool-call-parser name. Throws grammar::GrammarError
// for a format without a grammar or a schema the front end refuses (the keyword is named).
grammar::EbnfRules tool_call_rules(const std::string& parser, const Json& tools,
                                   const std::string& function, bool parallel,
                                   const grammar::JsonGrammarOptions& opt = {});

}  // namespace tandem::server
