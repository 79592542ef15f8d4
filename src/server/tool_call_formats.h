// The tool-call formats' parsers (internal to tool_call_parser.cpp's factory) and their markers.
#pragma once

#include <memory>

#include "server/tool_arguments.h"
#include "server/tool_call_parser.h"

namespace tandem::server {

// The formats whose arguments come one key/value pair at a time, as text (GLM's arg_key /
// arg_value, DSML's parameters): the value of key_ runs up to its end tag.
class KeyValueToolParser : public ToolCallParser {
 protected:
  using ToolCallParser::ToolCallParser;
  enum class ValueEnd { kMore, kClosed, kCutOff };
  // Reads key_'s value from buf_ up to end_tag: a string value is passed on as it arrives
  // (holding back what may be the tag's start and an unfinished UTF-8 character), any other
  // when complete. kMore: wait for more text; kClosed: value and tag consumed; kCutOff: the
  // output ended inside the value (a non-string value is dropped) and buf_ is empty.
  ValueEnd read_value(std::string_view end_tag, bool final);

  ArgumentsWriter args_;
  std::string key_;
  ArgType type_ = ArgType::kAuto;
};

// GLM-4.5 .. GLM-5: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>
// (glm45 puts newlines after the name and around each pair; both spellings are accepted).
inline constexpr const char* kGlmMarkers[] = {"<tool_call>", "</tool_call>", "<arg_key>",
                                              "</arg_key>",  "<arg_value>",  "</arg_value>"};
std::unique_ptr<ToolCallParser> make_glm_tool_parser(std::shared_ptr<const ToolSet> tools,
                                                     ToolCallParser::Options o);

// DeepSeek-V3 (typed_header: "function<｜tool▁sep｜>name\n```json\nargs\n```") and V3.1
// ("name<｜tool▁sep｜>args"), each call in <｜tool▁call▁begin｜>..<｜tool▁call▁end｜> inside
// <｜tool▁calls▁begin｜>..<｜tool▁calls▁end｜>.
inline constexpr const char* kDeepSeekMarkers[] = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>",
                                                   "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
                                                   "<｜tool▁sep｜>"};
std::unique_ptr<ToolCallParser> make_deepseek_tool_parser(bool typed_header,
                                                          std::shared_ptr<const ToolSet> tools,
                                                          ToolCallParser::Options o);

// DeepSeek-V3.2's DSML: <｜DSML｜function_calls><｜DSML｜invoke name="f"><｜DSML｜parameter
// name="k" string="true|false">v</｜DSML｜parameter>...</｜DSML｜invoke></｜DSML｜function_calls>.
inline constexpr const char* kDsmlMarkers[] = {"<｜DSML｜function_calls>",
                                               "</｜DSML｜function_calls>", "</｜DSML｜invoke>",
                                               "</｜DSML｜parameter>"};
std::unique_ptr<ToolCallParser> make_dsml_tool_parser(std::shared_ptr<const ToolSet> tools,
                                                      ToolCallParser::Options o);

}  // namespace tandem::server
