// The function-calling fields of a chat request (OpenAI's spelling): tools, tool_choice and
// parallel_tool_calls, validated, and what they mean for the chat template and the output parser.
#pragma once

#include <string>

#include "server/json_fields.h"

namespace tandem::server {

// tool_choice: "auto" (the model decides), "none" (no calls), "required" (at least one call) or
// {"type": "function", "function": {"name": ...}} (a call of that function). "required" and a
// named function can only be guaranteed by constrained decoding, which reads this struct.
struct ToolChoice {
  enum class Mode { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the function's name (one of the request's tools)
};

struct ToolRequest {
  Json tools;  // null, or a non-empty list of {"type": "function", "function": {"name", ...}}
  ToolChoice choice;
  bool parallel_tool_calls = true;  // false: at most one call is returned

  bool has_tools() const { return !tools.is_null(); }
  // Whether the output is parsed for calls (given a --tool-call-parser): tools were given and
  // tool_choice is not "none".
  bool parse_calls() const { return has_tools() && choice.mode != ToolChoice::Mode::kNone; }
  // The tools the chat template declares, as SGLang passes them: none for tool_choice "none",
  // only the named function for a named choice, else all. Null when none.
  Json template_tools() const;
};

// Reads tools, tool_choice and parallel_tool_calls of a chat request body. Throws ApiError(400)
// naming the field: malformed tools, an unknown tool_choice string, a named function that is not
// among the tools, "required" or a named function without tools.
ToolRequest parse_tool_request(const Fields& f);

}  // namespace tandem::server
