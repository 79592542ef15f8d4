// Tool calls in a chat model's output (--tool-call-parser, SGLang's names): the text is split,
// incrementally, into content and calls, each call an id, a function name and its arguments as
// JSON text arriving in fragments. Text that may still become a call's start marker is held back,
// so a streamed response never shows part of a call as content, and the concatenated deltas
// equal the non-streamed result (both run this parser over the same text).
//
// Formats (one file each): glm45 / glm47 (tool_call_glm.cpp), deepseekv3 / deepseekv31
// (tool_call_deepseek.cpp), deepseekv32 (tool_call_dsml.cpp); docs/server.md shows each.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/json_fields.h"

namespace tandem::server {

// What one push() or flush() produced for a call: its first delta carries the id and name with
// arguments "", later ones only argument fragments.
struct ToolCallDelta {
  size_t index = 0;  // the call's position among this output's calls: 0, 1, ...
  std::string id;    // first delta only: "call_" + 24 hex digits
  std::string name;  // first delta only
  std::string arguments;
};

struct ToolParseResult {
  std::string content;
  std::vector<ToolCallDelta> calls;  // in order; a call's fragments are merged
};

// The request's functions: name -> parameters schema.
class ToolSet {
 public:
  explicit ToolSet(const Json& tools);  // validated request tools (tool_request.h)
  bool has(std::string_view name) const { return find(name) != nullptr; }
  // The function's parameters schema; nullptr when the function has none or is unknown.
  const Json* parameters(std::string_view name) const;

 private:
  struct Function {
    std::string name;
    Json parameters;
  };
  const Function* find(std::string_view name) const;
  std::vector<Function> functions_;
};

class ToolCallParser {
 public:
  struct Options {
    bool parallel = true;  // parallel_tool_calls: false keeps only the first call
  };
  ToolCallParser(std::shared_ptr<const ToolSet> tools, Options o);
  virtual ~ToolCallParser();
  ToolCallParser(const ToolCallParser&) = delete;
  ToolCallParser& operator=(const ToolCallParser&) = delete;

  ToolParseResult push(std::string_view text);
  // End of output: held-back text is content after all; a call cut off (max_tokens) is closed
  // with the arguments it had.
  ToolParseResult flush();

 protected:
  // Consumes what it can of buf_; final: no more text will come.
  virtual void parse(bool final) = 0;

  // For the formats: content text (whitespace right before a call and right after one is
  // dropped, as SGLang strips it), a call's start, argument fragments and end. A call whose
  // function is not among the tools, or past the first with parallel_tool_calls false, is
  // dropped: its text is consumed and nothing is returned for it (SGLang drops calls to
  // undefined functions too).
  void content(std::string_view text);
  void begin_call(const std::string& name);
  void arguments(std::string_view fragment);
  void end_call();
  const Json* call_parameters() const { return call_params_; }

  std::string buf_;

 private:
  std::shared_ptr<const ToolSet> tools_;
  Options o_;
  ToolParseResult out_;
  std::string held_spaces_;  // trailing whitespace of content: dropped if a call follows
  bool after_call_ = false;  // drop leading whitespace of content
  bool call_open_ = false;
  bool call_kept_ = false;
  const Json* call_params_ = nullptr;
  size_t calls_ = 0;
};

// The --tool-call-parser names: glm45 (alias glm), glm47, deepseekv3, deepseekv31, deepseekv32.
bool is_tool_call_parser(std::string_view name);
const char* tool_call_parser_names();  // for messages: "glm45, glm47, ..."
std::unique_ptr<ToolCallParser> make_tool_call_parser(std::string_view name,
                                                      std::shared_ptr<const ToolSet> tools,
                                                      ToolCallParser::Options o);
// The format's markers, which the detokenizer must keep where they are special tokens.
std::vector<std::string> tool_call_markers(std::string_view name);

// "call_" + 24 random hex digits, as SGLang and vLLM name calls.
std::string new_tool_call_id();

}  // namespace tandem::server
