// Function calling in the OpenAI protocol: tools / tool_choice / parallel_tool_calls parsing and
// their 400s (param names the field), what the template gets (tools by tool_choice, assistant
// tool-call arguments parsed from JSON strings for templates that read mappings), and the shape
// of tool calls in responses and stream chunks.
#include <gtest/gtest.h>

#include "protocol_test_util.h"

#include <fstream>
#include <sstream>

#include "server/openai_protocol.h"

namespace tandem::server {
namespace {

const Json kTools = Json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
   "properties": {"city": {"type": "string"}}}}},
  {"type": "function", "function": {"name": "get_time"}}])");

TEST(ToolRequest, ToolChoiceForms) {
  using Mode = ToolChoice::Mode;
  EXPECT_EQ(parse_chat_request(chat_body({{"tools", kTools}})).tools.choice.mode, Mode::kAuto);
  const ChatRequest none =
      parse_chat_request(chat_body({{"tools", kTools}, {"tool_choice", "none"}}));
  EXPECT_EQ(none.tools.choice.mode, Mode::kNone);
  EXPECT_FALSE(none.tools.parse_calls());
  EXPECT_TRUE(none.tools.template_tools().is_null());  // SGLang does not render them
  const ChatRequest req =
      parse_chat_request(chat_body({{"tools", kTools}, {"tool_choice", "required"}}));
  EXPECT_EQ(req.tools.choice.mode, Mode::kRequired);
  EXPECT_EQ(req.tools.template_tools(), kTools);
  const ChatRequest named = parse_chat_request(
      chat_body({{"tools", kTools},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_time"}}}}},
                 {"parallel_tool_calls", false}}));
  EXPECT_EQ(named.tools.choice.mode, Mode::kFunction);
  EXPECT_EQ(named.tools.choice.function, "get_time");
  EXPECT_FALSE(named.tools.parallel_tool_calls);
  ASSERT_EQ(named.tools.template_tools().size(), 1u);  // only the named function
  EXPECT_EQ(named.tools.template_tools()[0]["function"]["name"], "get_time");
  // Without tools, "auto" and "none" mean no calls; an empty list is no tools.
  EXPECT_FALSE(parse_chat_request(chat_body({{"tool_choice", "auto"}})).tools.parse_calls());
  EXPECT_FALSE(parse_chat_request(chat_body({{"tools", Json::array()}})).tools.has_tools());
}

TEST(ToolRequest, Errors) {
  auto req = [](Json extra) { return [extra] { parse_chat_request(chat_body(extra)); }; };
  expect_400(req({{"tool_choice", "required"}}), "tool_choice");  // without tools
  expect_400(req({{"tools", kTools}, {"tool_choice", "always"}}), "tool_choice");
  expect_400(req({{"tools", kTools}, {"tool_choice", 3}}), "tool_choice");
  expect_400(req({{"tools", kTools}, {"tool_choice", {{"type", "function"}}}}), "tool_choice");
  expect_400(req({{"tools", kTools},
                  {"tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}}}}),
             "tool_choice");
  expect_400(req({{"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}}),
             "tool_choice");
  expect_400(req({{"tools", "get_time"}}), "tools");
  expect_400(req({{"tools", {5}}}), "tools[0]");
  expect_400(req({{"tools", {{{"type", "retrieval"}, {"function", {{"name", "f"}}}}}}}),
             "tools[0].type");
  expect_400(req({{"tools", {{{"type", "function"}}}}}), "tools[0].function");
  expect_400(req({{"tools", {{{"function", {{"name", ""}}}}}}}), "tools[0].function.name");
  expect_400(req({{"tools", {{{"function", {{"name", "f"}, {"parameters", "x"}}}}}}}),
             "tools[0].function.parameters");
  expect_400(req({{"tools", kTools}, {"parallel_tool_calls", "no"}}), "parallel_tool_calls");
}

std::string read_source(const std::string& rel) {
  std::ifstream in(std::string(TANDEM_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ToolTemplateContext, WhichTemplatesReadArgumentMappings) {
  for (const char* f :
       {"tests/data/templates/glm-4.5.jinja", "tests/data/templates/glm-4.7-flash.jinja",
        "tests/data/templates/glm5_style.jinja", "tests/data/templates/deepseek-v3.jinja",
        "tests/data/templates/deepseek-v3.1.jinja", "tests/data/templates/deepseek-v3.2.jinja",
        "models/tandem-austen/chat_template.jinja"})
    EXPECT_TRUE(template_reads_argument_mappings(read_source(f))) << f;
  // DeepSeek-V3.1's own template concatenates the string.
  EXPECT_FALSE(
      template_reads_argument_mappings("{{ '<sep>' + tool['function']['arguments'] + '<end>' }}"));
}

Json history(Json arguments) {
  return {{"messages",
           {{{"role", "user"}, {"content", "time?"}},
            {{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls",
              {{{"id", "c1"},
                {"type", "function"},
                {"function", {{"name", "get_time"}, {"arguments", arguments}}}}}}},
            {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "12:00"}}}},
          {"tools", kTools}};
}

TEST(ToolTemplateContext, ArgumentsStringsBecomeObjectsForMappingTemplates) {
  const ChatTemplate reads(
      "{% for m in messages %}{% for c in m.tool_calls or [] %}{% for k, v in "
      "c.function.arguments.items() %}{{ k }}={{ v }};{% endfor %}{% endfor %}{% endfor %}"
      "{{ tools | length }}");
  const ChatTemplate concat(
      "{% for m in messages %}{% for c in m.tool_calls or [] %}{{ c.function.arguments + '!' }}"
      "{% endfor %}{% endfor %}");
  const ChatRequest r = parse_chat_request(history(R"({"tz": "UTC", "n": 2})"));
  EXPECT_EQ(reads.render(chat_template_context(r, reads, "", "")), "tz=UTC;n=2;2");
  EXPECT_EQ(concat.render(chat_template_context(r, concat, "", "")), R"({"tz": "UTC", "n": 2}!)");
  // Objects pass as they are; an empty string is no arguments.
  EXPECT_EQ(
      reads.render(chat_template_context(parse_chat_request(history({{"a", 1}})), reads, "", "")),
      "a=1;2");
  EXPECT_EQ(reads.render(chat_template_context(parse_chat_request(history("")), reads, "", "")),
            "2");
  for (const char* bad : {"{oops", "[1, 2]", "\"text\""})
    expect_400([&] { chat_template_context(parse_chat_request(history(bad)), reads, "", ""); },
               "messages[1].tool_calls[0].function.arguments");
}

TEST(ToolResponse, MessageShape) {
  ChoiceResult c;
  c.finish_reason = FinishReason::kStop;
  c.matched_token = 7;
  Json plain = chat_message_json(c, true);
  EXPECT_EQ(plain["content"], "");  // no calls: content stays a string
  EXPECT_TRUE(plain["reasoning_content"].is_null());
  EXPECT_TRUE(plain["tool_calls"].is_null());
  EXPECT_STREQ(openai_finish_reason(c), "stop");
  EXPECT_EQ(chat_matched_stop(c), 7);

  c.tool_calls = {{"call_abc", "get_weather", R"({"city": "Oslo"})"}};
  c.reasoning = "think";
  const Json msg = chat_message_json(c, true);
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_TRUE(msg["content"].is_null());  // empty content with calls is null, as OpenAI's
  EXPECT_EQ(msg["reasoning_content"], "think");
  EXPECT_EQ(msg["tool_calls"], Json::parse(R"([{"id": "call_abc", "type": "function",
                             "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}])"));
  EXPECT_FALSE(chat_message_json(c, false).contains("reasoning_content"));
  EXPECT_STREQ(openai_finish_reason(c), "tool_calls");
  EXPECT_TRUE(chat_matched_stop(c).is_null());
  c.text = "Checking.";
  EXPECT_EQ(chat_message_json(c, false)["content"], "Checking.");
  c.finish_reason = FinishReason::kLength;  // cut off: the reason stays length
  EXPECT_STREQ(openai_finish_reason(c), "length");
}

TEST(ToolResponse, StreamChunks) {
  const ResponseMeta m{"chatcmpl-1", 5, "model"};
  ChoiceResult c;
  c.finish_reason = FinishReason::kStop;
  c.tool_calls = {{"call_1", "get_weather", "{}"}, {"call_2", "get_time", "{}"}};
  ChoiceDelta d;
  d.text = "Sure.";
  d.tool_calls = {{0, "call_1", "get_weather", ""},
                  {0, "", "", "{\"city\": "},
                  {0, "", "", "\"Oslo\"}"},
                  {1, "call_2", "get_time", "{}"}};
  d.finished = true;
  const std::vector<Json> chunks = chat_delta_chunks(m, d, c, false);
  ASSERT_EQ(chunks.size(), 6u);
  for (const Json& ch : chunks) {
    EXPECT_EQ(ch["object"], "chat.completion.chunk");
    EXPECT_EQ(ch["id"], "chatcmpl-1");
  }
  auto calls = [&](size_t i) { return chunks[i]["choices"][0]["delta"]["tool_calls"]; };
  EXPECT_EQ(chunks[0]["choices"][0]["delta"], Json({{"content", "Sure."}}));
  // A call starts with index, id, type, name and arguments "", as OpenAI's stream; its fragments
  // follow, merged.
  EXPECT_EQ(calls(1), Json::parse(R"([{"index": 0, "id": "call_1", "type": "function",
                                       "function": {"name": "get_weather", "arguments": ""}}])"));
  EXPECT_TRUE(chunks[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(calls(2),
            Json::parse(R"([{"index": 0, "function": {"arguments": "{\"city\": \"Oslo\"}"}}])"));
  EXPECT_EQ(calls(3)[0]["id"], "call_2");
  EXPECT_EQ(calls(3)[0]["function"]["arguments"], "");
  EXPECT_EQ(calls(4), Json::parse(R"([{"index": 1, "function": {"arguments": "{}"}}])"));
  const Json& fin = chunks[5]["choices"][0];
  EXPECT_EQ(fin["delta"], Json::object());
  EXPECT_EQ(fin["finish_reason"], "tool_calls");
  EXPECT_TRUE(fin["matched_stop"].is_null());
  // Later fragments of a call: index and arguments only.
  ChoiceDelta more;
  more.tool_calls = {{1, "", "", "}"}};
  EXPECT_EQ(chat_delta_chunks(m, more, c, false)[0]["choices"][0]["delta"]["tool_calls"],
            Json::parse(R"([{"index": 1, "function": {"arguments": "}"}}])"));
}

}  // namespace
}  // namespace tandem::server
