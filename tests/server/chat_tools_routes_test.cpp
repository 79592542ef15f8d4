// Chat completions on the default model: the README's example answers in content (no reasoning
// parser by default, and the model's template opens no think block), and with
// --tool-call-parser glm47 --reasoning-parser glm45 tool requests are validated, rendered (tool
// calls and results of earlier turns included) and answered, streamed and not alike.
#include <gtest/gtest.h>

#include "default_model_routes.h"
#include "server/sse.h"

namespace tandem::server {
namespace {

HttpRequest post(const Json& body) {
  HttpRequest r;
  r.method = "POST";
  r.path = "/v1/chat/completions";
  r.body = body.dump();
  r.headers.emplace_back("Content-Type", "application/json");
  return r;
}

std::string drain(BodyStream& s) {
  std::string all;
  while (s.next(all, std::chrono::milliseconds(100))) {
  }
  return all;
}

Json run(Router& router, const Json& body, int* status = nullptr) {
  HttpResponse res = router.dispatch(post(body));
  if (status) *status = res.status;
  return Json::parse(res.stream ? drain(*res.stream) : res.body);
}

const Json kTools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Weather of a city.", "parameters": {"type": "object", "properties":
  {"city": {"type": "string"}}, "required": ["city"]}}}])");

class DefaultChat : public DefaultModelRoutes {};

TEST_F(DefaultChat, ReadmeExampleAnswersInContent) {
  const Json j =
      run(*router_, {{"messages", {{{"role", "user"}, {"content", "Tell me about Mr. Darcy."}}}},
                     {"max_tokens", 64}});
  const Json& msg = j["choices"][0]["message"];
  EXPECT_FALSE(msg["content"].get<std::string>().empty()) << j.dump();
  EXPECT_FALSE(msg.contains("reasoning_content")) << j.dump();
  // Without --tool-call-parser, tools are rendered but the output stays text.
  const Json t = run(*router_, {{"messages", {{{"role", "user"}, {"content", "Weather?"}}}},
                                {"tools", kTools},
                                {"max_tokens", 8},
                                {"temperature", 0}});
  EXPECT_TRUE(t["choices"][0]["message"]["tool_calls"].is_null());
  EXPECT_NE(t["choices"][0]["finish_reason"], "tool_calls");
}

class ToolChat : public DefaultModelRoutes {
 protected:
  static void SetUpTestSuite() {
    ServerArgs a;
    a.tool_call_parser = "glm47";
    a.reasoning_parser = "glm45";
    set_up(a);
  }
};

Json two_turn(Json arguments) {
  return {{"messages",
           {{{"role", "user"}, {"content", "What is the weather in Bath?"}},
            {{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls",
              {{{"id", "call_1"},
                {"type", "function"},
                {"function", {{"name", "get_weather"}, {"arguments", arguments}}}}}}},
            {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Rain, as ever."}}}},
          {"tools", kTools},
          {"max_tokens", 16},
          {"temperature", 0}};
}

TEST_F(ToolChat, MarkerTokensAreKept) {
  // The default model's tokenizer has GLM's markers as special tokens, which the detokenizer
  // skips unless the parsers need them.
  EXPECT_EQ(state_->tool_call_token_ids().size(), 6u);  // <tool_call> ... </arg_value>
  EXPECT_EQ(state_->reasoning_token_ids().size(), 2u);  // <think>, </think>
  EXPECT_EQ(state_->reasoning_format(), ReasoningFormat::kGlm45);
}

TEST_F(ToolChat, ValidationErrors) {
  int status = 0;
  Json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"tools", kTools}};
  // ("required" and a named function are enforced by constrained decoding: route tests of
  // them are in tests/e2e/structured_client.mjs and tool_call_grammar_test.cpp.)
  for (Json choice :
       {Json({{"type", "function"}, {"function", {{"name", "nope"}}}}), Json("sometimes")}) {
    body["tool_choice"] = choice;
    const Json e = run(*router_, body, &status);
    EXPECT_EQ(status, 400) << choice.dump();
    EXPECT_EQ(e["error"]["param"], "tool_choice") << e.dump();
  }
  const Json e = run(*router_, two_turn("{not json"), &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "messages[1].tool_calls[0].function.arguments");
}

// tool_choice "required" and a named function, through the route on the real engine: the
// constrained output comes back as tool_calls, finish_reason "tool_calls", no content.
TEST_F(ToolChat, ForcedCallsComeBackAsToolCalls) {
  // A bounded city: a model trained on novels would otherwise write until max_tokens.
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
    "required": ["city"]}}}])");
  for (Json choice :
       {Json("required"), Json({{"type", "function"}, {"function", {{"name", "get_weather"}}}})}) {
    Json body = {{"messages", {{{"role", "user"}, {"content", "Weather in Bath?"}}}},
                 {"tools", tools},
                 {"tool_choice", choice},
                 {"max_tokens", 120},
                 {"temperature", 0}};
    int status = 0;
    const Json r = run(*router_, body, &status);
    ASSERT_EQ(status, 200) << r.dump();
    const Json& c = r["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls") << r.dump();
    ASSERT_TRUE(c["message"]["tool_calls"].is_array()) << r.dump();
    ASSERT_GE(c["message"]["tool_calls"].size(), 1u);
    EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_TRUE(
        Json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>())
            .is_object());
    EXPECT_TRUE(c["message"]["content"].is_null()) << r.dump();
  }
}

TEST_F(ToolChat, TwoTurnsStreamedAndNot) {
  // Turn 1: the model may call the tool or answer; either way the response is well formed.
  Json first = {{"messages", {{{"role", "user"}, {"content", "What is the weather in Bath?"}}}},
                {"tools", kTools},
                {"tool_choice", "auto"},
                {"max_tokens", 24},
                {"temperature", 0}};
  const Json a = run(*router_, first);
  const Json& msg = a["choices"][0]["message"];
  if (msg["tool_calls"].is_null()) {
    EXPECT_TRUE(msg["content"].is_string());
    EXPECT_NE(a["choices"][0]["finish_reason"], "tool_calls");
  } else {
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  }
  // Turn 2: the call (arguments as OpenAI clients send them, a JSON string) and its result are
  // rendered and answered; the prompt is longer than turn 1's.
  const Json b = run(*router_, two_turn(R"({"city": "Bath"})"));
  EXPECT_EQ(b["object"], "chat.completion") << b.dump();
  EXPECT_GT(b["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"]);
  EXPECT_EQ(b["usage"]["completion_tokens"], 16);
  // Streamed, the same request gives the same content and calls.
  Json sb = two_turn(R"({"city": "Bath"})");
  sb["stream"] = true;
  HttpResponse res = router_->dispatch(post(sb));
  ASSERT_TRUE(res.stream);
  std::string content;
  for (const std::string& e : sse_data_payloads(drain(*res.stream))) {
    if (e == "[DONE]") continue;
    const Json ch = Json::parse(e);
    for (const Json& c : ch["choices"]) content += c["delta"].value("content", "");
  }
  const Json& bm = b["choices"][0]["message"];
  EXPECT_EQ(content, bm["content"].is_null() ? "" : bm["content"].get<std::string>());
}

}  // namespace
}  // namespace tandem::server
