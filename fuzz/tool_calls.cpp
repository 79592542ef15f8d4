// Fuzzes the tool-call parsers (src/server/tool_call_*.cpp) on model output: any bytes, cut into
// pieces of any size. Besides surviving, every parser must give the same content and calls
// however the output is cut, and GLM's and DSML's arguments (which the parser writes itself) must
// always be a JSON object, even for output cut off inside a call.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/log.h"
#include "server/tool_call_parser.h"

namespace {

using tandem::server::Json;
using tandem::server::ToolCallParser;

void check(bool ok) {
  if (!ok) std::abort();
}

struct Result {
  std::string content;
  std::vector<std::string> names, arguments;
};

Result parse(const char* format, std::string_view text, size_t piece, bool parallel) {
  static const auto tools = std::make_shared<const tandem::server::ToolSet>(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "get_time"}}])"));
  auto p = tandem::server::make_tool_call_parser(format, tools, ToolCallParser::Options{parallel});
  Result r;
  auto add = [&](tandem::server::ToolParseResult d) {
    r.content += d.content;
    for (const auto& c : d.calls) {
      if (c.index == r.names.size()) {
        check(!c.id.empty() && c.arguments.empty());
        r.names.push_back(c.name);
        r.arguments.emplace_back();
      }
      check(c.index + 1 == r.names.size());
      r.arguments[c.index] += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += piece) add(p->push(text.substr(i, piece)));
  add(p->flush());
  return r;
}

}  // namespace

// The first byte picks the format, the piece size and parallel_tool_calls; the rest is output.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (tandem::set_log_level(tandem::LogLevel::Error), true);
  (void)quiet;  // dropped calls are logged as warnings
  if (size == 0) return 0;
  static const char* kFormats[] = {"glm45", "glm47", "deepseekv3", "deepseekv31", "deepseekv32"};
  const char* format = kFormats[data[0] % 5];
  const size_t piece = 1 + (data[0] / 5) % 24;
  const bool parallel = data[0] < 128;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);

  const Result whole = parse(format, text, text.size() + 1, parallel);
  const Result cut = parse(format, text, piece, parallel);
  check(whole.content == cut.content);
  check(whole.names == cut.names);
  check(whole.arguments == cut.arguments);
  check(parallel || whole.names.size() <= 1);
  const std::string_view f(format);
  if (f.rfind("glm", 0) == 0 || f == "deepseekv32")
    for (const std::string& a : whole.arguments) {
      const Json j = Json::parse(a, nullptr, /*allow_exceptions=*/false);
      check(j.is_object());
    }
  return 0;
}
