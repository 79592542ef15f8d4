// Forced tool calls: the grammar of each --tool-call-parser format accepts the calls that
// format writes (the same text its parser reads back into the same calls) and refuses what
// breaks the choice: another function, a missing required argument, a value of the wrong type,
// a second call without parallel_tool_calls, text before the call.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/grammar_constraint.h"
#include "server/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {
namespace {

const Tokenizer& tokenizer() {
  // Bytes, plus GLM's markers as special tokens (the grammar's literals enable them).
  static const Tokenizer t = Tokenizer::from_json(make_byte_level_tokenizer_json(
      {"<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"}));
  return t;
}

const Json& tools() {
  static const Json t = Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"town": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                     "units": {"enum": ["c", "f"]}},
      "required": ["town", "days"]}}},
    {"type": "function", "function": {"name": "ping"}}])");
  return t;
}

// Whether the grammar for (parser, function, parallel) takes `text` whole, byte by byte.
bool accepts(const std::string& parser, const std::string& function, bool parallel,
             const std::string& text) {
  static GrammarCache cache(tokenizer());
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kToolCalls;
  spec.source =
      Json{{"parser", parser}, {"tools", tools()}, {"function", function}, {"parallel", parallel}}
          .dump();
  spec.param = "tool_choice";
  GrammarConstraint c(cache.get(spec));
  for (unsigned char ch : text) {
    int32_t id = -1;
    for (int32_t v = 0; v < 256 && id < 0; ++v)
      if (tokenizer().token_bytes(v) == std::string(1, static_cast<char>(ch))) id = v;
    if (!c.accept(id)) return false;
  }
  return c.can_terminate();
}

// The calls the format's own parser reads from text.
std::vector<std::pair<std::string, Json>> parse(const std::string& parser,
                                                const std::string& text) {
  auto p = make_tool_call_parser(parser, std::make_shared<const ToolSet>(tools()), {});
  ToolParseResult a = p->push(text), b = p->flush();
  std::vector<std::pair<std::string, Json>> out;
  std::map<size_t, std::pair<std::string, std::string>> calls;
  for (const auto* r : {&a, &b})
    for (const ToolCallDelta& d : r->calls) {
      if (!d.name.empty()) calls[d.index].first = d.name;
      calls[d.index].second += d.arguments;
    }
  for (auto& [i, c] : calls) out.emplace_back(c.first, Json::parse(c.second));
  EXPECT_EQ(a.content + b.content, "") << parser << ": the output is nothing but calls";
  return out;
}

struct Case {
  std::string parser, weather, ping;  // a get_weather(town=Bath, days=3) call and a ping() call
  std::string between;                // what separates two calls
  std::string open, close;            // around all calls
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"glm47",
       "<tool_call>get_weather<arg_key>town</arg_key><arg_value>Bath</arg_value><arg_key>days</"
       "arg_key><arg_value>3</arg_value></tool_call>",
       "<tool_call>ping</tool_call>", "\n", "", ""},
      {"glm45",
       "<tool_call>get_weather\n<arg_key>town</arg_key>\n<arg_value>Bath</arg_value>\n<arg_key>"
       "days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>",
       "<tool_call>ping\n</tool_call>", "\n", "", ""},
      {"deepseekv3",
       "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"town\": \"Bath\", "
       "\"days\": 3}\n```<｜tool▁call▁end｜>",
       "<｜tool▁call▁begin｜>function<｜tool▁sep｜>ping\n```json\n{}\n```<｜tool▁call▁end｜>", "\n",
       "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"},
      {"deepseekv31",
       "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"town\": \"Bath\", \"days\": "
       "3}<｜tool▁call▁end｜>",
       "<｜tool▁call▁begin｜>ping<｜tool▁sep｜>{}<｜tool▁call▁end｜>", "", "<｜tool▁calls▁begin｜>",
       "<｜tool▁calls▁end｜>"},
      {"deepseekv32",
       "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"town\" "
       "string=\"true\">Bath</｜DSML｜parameter>\n<｜DSML｜parameter name=\"days\" "
       "string=\"false\">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n",
       "<｜DSML｜invoke name=\"ping\">\n</｜DSML｜invoke>\n", "", "<｜DSML｜function_calls>\n",
       "</｜DSML｜function_calls>"},
  };
  return c;
}

TEST(ToolCallGrammar, AcceptsWhatEachFormatWritesAndItsParserReadsBack) {
  for (const Case& c : cases()) {
    const std::string one = c.open + c.weather + c.close;
    const std::string two = c.open + c.weather + c.between + c.ping + c.close;
    EXPECT_TRUE(accepts(c.parser, "", true, one)) << c.parser << ": " << one;
    EXPECT_TRUE(accepts(c.parser, "get_weather", true, one)) << c.parser;
    EXPECT_TRUE(accepts(c.parser, "", true, two)) << c.parser << ": " << two;
    const auto calls = parse(c.parser, two);
    ASSERT_EQ(calls.size(), 2u) << c.parser;
    EXPECT_EQ(calls[0].first, "get_weather");
    EXPECT_EQ(calls[0].second, Json::parse(R"({"town": "Bath", "days": 3})")) << c.parser;
    EXPECT_EQ(calls[1].first, "ping");
  }
}

TEST(ToolCallGrammar, RefusesWhatBreaksTheChoice) {
  for (const Case& c : cases()) {
    auto wrap = [&](const std::string& calls) { return c.open + calls + c.close; };
    EXPECT_FALSE(accepts(c.parser, "get_weather", true, wrap(c.ping))) << c.parser << ": other fn";
    EXPECT_FALSE(accepts(c.parser, "", false, wrap(c.weather + c.between + c.ping)))
        << c.parser << ": two calls without parallel_tool_calls";
    EXPECT_FALSE(accepts(c.parser, "", true, "Sure! " + wrap(c.weather)))
        << c.parser << ": text before the call";
    EXPECT_FALSE(accepts(c.parser, "", true, c.open + c.close)) << c.parser << ": no call";
    // days must be an integer >= 1, and is required.
    std::string bad = c.weather;
    const size_t at = bad.find('3');
    ASSERT_NE(at, std::string::npos);
    bad.replace(at, 1, "0");
    EXPECT_FALSE(accepts(c.parser, "", true, wrap(bad))) << c.parser << ": days 0";
    bad[at] = 'x';
    EXPECT_FALSE(accepts(c.parser, "", true, wrap(bad))) << c.parser << ": days x";
  }
  // A string enum is written raw, as the template writes strings.
  EXPECT_TRUE(accepts("glm47", "", true,
                      "<tool_call>get_weather<arg_key>town</arg_key><arg_value>Bath</arg_value>"
                      "<arg_key>days</arg_key><arg_value>2</arg_value><arg_key>units</arg_key>"
                      "<arg_value>c</arg_value></tool_call>"));
}

TEST(ToolCallGrammar, ErrorsNameToolChoice) {
  auto rules = [](const std::string& parser, const std::string& fn) {
    return tool_call_rules(parser, tools(), fn, true);
  };
  EXPECT_THROW(rules("glm47", "nope"), grammar::GrammarError);
  EXPECT_THROW(rules("qwen25", ""), grammar::GrammarError);
  const Json bad = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"x": {"type": "string", "format": "hostname"}}}}}])");
  try {
    tool_call_rules("glm47", bad, "", true);
    FAIL() << "format hostname was accepted";
  } catch (const grammar::GrammarError& e) {
    EXPECT_EQ(e.keyword(), "format");
  }
}

}  // namespace
}  // namespace tandem::server
