// The tool-call parsers on hand-written outputs: plain text passes through untouched, calls of
// unknown functions and calls past the first with parallel_tool_calls false are dropped, values
// are typed by the schema, whitespace around calls is dropped, and output cut off inside a call
// still ends in a call with valid JSON arguments. Every case is also cut at every byte.
#include <gtest/gtest.h>

#include "core/log.h"
#include "server/tool_arguments.h"
#include "tool_parse_util.h"

namespace tandem::server {
namespace {

std::shared_ptr<const ToolSet> tools() {
  return std::make_shared<const ToolSet>(Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
     "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                    "unit": {"enum": ["c", "f"]}, "maybe": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "get_time"}}])"));
}

Parsed parse(const std::string& format, const std::string& text, ToolCallParser::Options o = {}) {
  return parse_at_every_cut(format, tools(), text, std::nullopt, o);
}

Json args(const Parsed& p, size_t i) {
  return Json::parse(p.calls.at(i).arguments);
}

TEST(ToolCallParser, NamesAndMarkers) {
  for (const char* n : {"glm", "glm45", "glm47", "deepseekv3", "deepseekv31", "deepseekv32"}) {
    EXPECT_TRUE(is_tool_call_parser(n)) << n;
    EXPECT_NE(make_tool_call_parser(n, tools(), {}), nullptr) << n;
    EXPECT_FALSE(tool_call_markers(n).empty()) << n;
  }
  EXPECT_FALSE(is_tool_call_parser("qwen25"));
  EXPECT_EQ(make_tool_call_parser("qwen25", tools(), {}), nullptr);
  EXPECT_NE(new_tool_call_id(), new_tool_call_id());
}

TEST(ToolCallParser, PlainTextIsUntouched) {
  for (const char* f : {"glm47", "deepseekv3", "deepseekv31", "deepseekv32"})
    for (const std::string text : {"", "  Hello, <b>world</b> a < b\n\n", "ends in <tool",
                                   "ends in <｜tool▁ca", "ends in <｜DSML｜func"}) {
      const Parsed p = parse(f, text);
      EXPECT_EQ(p.content, text) << f;
      EXPECT_TRUE(p.calls.empty()) << f;
    }
}

TEST(ToolCallParser, GlmBothSpellingsAndTypes) {
  const std::string glm47 =
      "Sure.\n<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
      "<arg_key>days</arg_key><arg_value>three</arg_value><arg_key>unit</arg_key><arg_value>c"
      "</arg_value><arg_key>maybe</arg_key><arg_value>null</arg_value><arg_key>extra</arg_key>"
      "<arg_value>[1, {\"a\": 2}]</arg_value><arg_key>free</arg_key><arg_value>Bath</arg_value>"
      "</tool_call>\n<tool_call>get_time</tool_call>\n";
  const std::string glm45 =
      "Sure.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n"
      "<arg_key>days</arg_key>\n<arg_value>three</arg_value>\n<arg_key>unit</arg_key>\n"
      "<arg_value>c</arg_value>\n<arg_key>maybe</arg_key>\n<arg_value>null</arg_value>\n"
      "<arg_key>extra</arg_key>\n<arg_value>[1, {\"a\": 2}]</arg_value>\n<arg_key>free"
      "</arg_key>\n<arg_value>Bath</arg_value>\n</tool_call>\n<tool_call>get_time\n</tool_call>";
  for (const char* f : {"glm45", "glm47"})
    for (const std::string& text : {glm47, glm45}) {
      const Parsed p = parse(f, text);
      EXPECT_EQ(p.content, "Sure.");
      ASSERT_EQ(p.calls.size(), 2u);
      // Typed by the schema: a string stays a string, an integer that is no number falls back
      // to text, an enum of strings is a string, ["string", "null"] and unknown keys take what
      // the text parses as.
      EXPECT_EQ(p.calls[0].arguments,
                R"({"city": "Oslo", "days": "three", "unit": "c", "maybe": null, )"
                R"("extra": [1, {"a": 2}], "free": "Bath"})");
      EXPECT_EQ(p.calls[1].name, "get_time");
      EXPECT_EQ(p.calls[1].arguments, "{}");
    }
}

TEST(ToolCallParser, UnknownFunctionsAreDropped) {
  set_log_level(LogLevel::Error);  // each drop is logged as a warning
  const Parsed p = parse("glm47",
                         "<tool_call>launch_rockets<arg_key>n</arg_key><arg_value>3</arg_value>"
                         "</tool_call><tool_call>get_time</tool_call>");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_time");
  const Parsed d = parse("deepseekv31",
                         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>nope<｜tool▁sep｜>{}"
                         "<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_TRUE(d.calls.empty());
  EXPECT_EQ(d.content, "");
  set_log_level(LogLevel::Info);
}

TEST(ToolCallParser, ParallelFalseKeepsTheFirstCall) {
  const std::string two =
      "<tool_call>get_time</tool_call><tool_call>get_weather<arg_key>city</arg_key>"
      "<arg_value>Oslo</arg_value></tool_call>";
  EXPECT_EQ(parse("glm47", two).calls.size(), 2u);
  const Parsed one = parse("glm47", two, {.parallel = false});
  ASSERT_EQ(one.calls.size(), 1u);
  EXPECT_EQ(one.calls[0].name, "get_time");
}

TEST(ToolCallParser, CutOffOutput) {
  // A call cut off (max_tokens) keeps what it had, with valid JSON arguments.
  const Parsed p =
      parse("glm47", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Ox\"ford");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(args(p, 0), Json({{"city", "Ox\"ford"}}));
  const Parsed q = parse("glm47",
                         "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
                         "<arg_key>days</arg_key><arg_value>1");
  EXPECT_EQ(args(q, 0), Json({{"city", "Oslo"}}));  // an unfinished non-string value is dropped
  // A start marker whose name never finished is text.
  EXPECT_EQ(parse("glm47", "Hmm <tool_call>get_wea").content, "Hmm <tool_call>get_wea");
  const Parsed d = parse("deepseekv31",
                         "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                         "{\"city\": \"Oslo\"}");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "{\"city\": \"Oslo\"}");
  const Parsed s = parse("deepseekv32",
                         "<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
                         "<｜DSML｜parameter name=\"city\" string=\"true\">Os");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(args(s, 0), Json({{"city", "Os"}}));
}

TEST(ToolCallParser, DeepSeekArgumentsAreTheModelsJson) {
  const Parsed v3 = parse("deepseekv3",
                          "Checking.\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function"
                          "<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\", \"days\": 2}\n"
                          "```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                          "get_time\n```json\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>");
  EXPECT_EQ(v3.content, "Checking.");
  ASSERT_EQ(v3.calls.size(), 2u);
  EXPECT_EQ(v3.calls[0].arguments, "{\"city\": \"Oslo\", \"days\": 2}");
  EXPECT_EQ(v3.calls[1].arguments, "{}");  // nothing between the fences
  // A bare call without the section marker, then text again.
  const Parsed v31 =
      parse("deepseekv31", "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>Done.");
  ASSERT_EQ(v31.calls.size(), 1u);
  EXPECT_EQ(v31.content, "Done.");
}

TEST(ToolCallParser, DsmlTypes) {
  const Parsed p =
      parse("deepseekv32",
            "On it.\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
            "<｜DSML｜parameter name=\"city\" string=\"true\">42</｜DSML｜parameter>\n"
            "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
            "<｜DSML｜parameter name=\"bad\" string=\"false\">{oops</｜DSML｜parameter>\n"
            "<｜DSML｜parameter name=\"unit\">c</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
            "<｜DSML｜invoke name=\"get_time\">\n</｜DSML｜invoke>\n</｜DSML｜function_calls>");
  EXPECT_EQ(p.content, "On it.");
  ASSERT_EQ(p.calls.size(), 2u);
  // string="true" is text however it looks; "false" is JSON, or text if it does not parse; no
  // attribute: the schema decides.
  EXPECT_EQ(args(p, 0), Json({{"city", "42"}, {"days", 2}, {"bad", "{oops"}, {"unit", "c"}}));
  EXPECT_EQ(p.calls[1].arguments, "{}");
}

TEST(ToolArguments, DumpAndWriter) {
  EXPECT_EQ(dump_arguments_json(Json::parse(R"({"a":[1,2,{"b":"é"}],"c":null})")),
            R"({"a": [1, 2, {"b": "é"}], "c": null})");
  ArgumentsWriter w;
  std::string s = w.begin_string("k");  // one call at a time: each depends on the one before
  s += ArgumentsWriter::string_piece("a\"b");
  s += ArgumentsWriter::string_piece("\n");
  s += ArgumentsWriter::end_string();
  s += w.value("n", 5);
  s += w.finish();
  EXPECT_EQ(s, R"({"k": "a\"b\n", "n": 5})");
  EXPECT_EQ(ArgumentsWriter().finish(), "{}");
}

}  // namespace
}  // namespace tandem::server
