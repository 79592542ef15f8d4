// Parsing and validating OpenAI requests: defaults, SGLang's extra fields, ignored unknown
// fields, and the 400s (with the offending field in `param`) for bad types and ranges.
#include <gtest/gtest.h>

#include "protocol_test_util.h"

#include "server/openai_protocol.h"

namespace tandem::server {
namespace {

TEST(JsonBody, MalformedAndNonObject) {
  expect_400([] { parse_json_object("{\"a\": "); }, "");
  expect_400([] { parse_json_object("[1, 2]"); }, "");
  expect_400([] { parse_json_object(""); }, "");
  EXPECT_EQ(parse_json_object("{\"a\": 1}")["a"], 1);
}

TEST(ChatRequest, DefaultsAndExtras) {
  const ChatRequest r =
      parse_chat_request(chat_body({{"unknown_field", {1, 2}},
                                    {"top_k", 20},
                                    {"stop", "END"},
                                    {"stop_token_ids", {5, 6}},
                                    {"seed", 42},
                                    {"ignore_eos", true},
                                    {"chat_template_kwargs", {{"enable_thinking", false}}},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}}));
  EXPECT_FALSE(r.params.max_new_tokens.has_value());  // up to the context
  EXPECT_FLOAT_EQ(r.params.temperature, 1.0f);
  EXPECT_EQ(r.params.top_k, 20);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(r.params.seed, 42);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.params.skip_special_tokens);
  EXPECT_EQ(r.template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(r.stream.stream);
  EXPECT_TRUE(r.stream.include_usage);
  EXPECT_FALSE(r.tools.has_tools());
}

TEST(ChatRequest, MaxCompletionTokensWins) {
  const ChatRequest r =
      parse_chat_request(chat_body({{"max_tokens", 10}, {"max_completion_tokens", 7}}));
  EXPECT_EQ(r.params.max_new_tokens, 7);
  EXPECT_EQ(r.params.max_tokens_param, "max_completion_tokens");
  // Explicit nulls are defaults, as with Pydantic's Optional fields.
  const ChatRequest n =
      parse_chat_request(chat_body({{"max_tokens", nullptr}, {"temperature", nullptr}}));
  EXPECT_FALSE(n.params.max_new_tokens.has_value());
  EXPECT_FLOAT_EQ(n.params.temperature, 1.0f);
}

TEST(ChatRequest, RangeAndTypeErrors) {
  expect_400([] { parse_chat_request(chat_body({{"temperature", -0.5}})); }, "temperature");
  expect_400([] { parse_chat_request(chat_body({{"temperature", "hot"}})); }, "temperature");
  expect_400([] { parse_chat_request(chat_body({{"top_p", 0}})); }, "top_p");
  expect_400([] { parse_chat_request(chat_body({{"top_p", 1.5}})); }, "top_p");
  expect_400([] { parse_chat_request(chat_body({{"top_k", -2}})); }, "top_k");
  expect_400([] { parse_chat_request(chat_body({{"max_tokens", 0}})); }, "max_tokens");
  expect_400([] { parse_chat_request(chat_body({{"max_tokens", 2.5}})); }, "max_tokens");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"max_completion_tokens", -1}}));
      },
      "max_completion_tokens");
  expect_400([] { parse_chat_request(chat_body({{"n", 0}})); }, "n");
  expect_400([] { parse_chat_request(chat_body({{"n", "two"}})); }, "n");
  expect_400([] { parse_chat_request(chat_body({{"stop", 5}})); }, "stop");
  expect_400([] { parse_chat_request(chat_body({{"stop", {"a", 1}}})); }, "stop");
  expect_400([] { parse_chat_request(chat_body({{"stop_token_ids", {"a"}}})); }, "stop_token_ids");
  expect_400([] { parse_chat_request(chat_body({{"stream", "yes"}})); }, "stream");
  expect_400([] { parse_chat_request(chat_body({{"seed", 1.5}})); }, "seed");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"chat_template_kwargs", "x"}}));
      },
      "chat_template_kwargs");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"stream_options", {{"include_usage", 1}}}}));
      },
      "stream_options.include_usage");
}

TEST(ChatRequest, UnsupportedFeaturesAre400OnlyWhenUsed) {
  EXPECT_NO_THROW(parse_chat_request(chat_body({{"logprobs", false},
                                                {"frequency_penalty", 0},
                                                {"presence_penalty", 0.0},
                                                {"min_p", 0},
                                                {"repetition_penalty", 1.0},
                                                {"logit_bias", Json::object()},
                                                {"response_format", {{"type", "text"}}},
                                                {"tool_choice", "auto"}})));
  expect_400([] { parse_chat_request(chat_body({{"logprobs", true}})); }, "logprobs");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"frequency_penalty", 0.5}}));
      },
      "frequency_penalty");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"frequency_penalty", 3}}));
      },
      "frequency_penalty");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"response_format", {{"type", "structural_tag"}}}}));
      },
      "response_format");
  expect_400([] { parse_chat_request(chat_body({{"logit_bias", {{"5", 1}}}})); }, "logit_bias");
  expect_400([] { parse_chat_request(chat_body({{"tool_choice", "required"}})); }, "tool_choice");
}

// Structured outputs are parsed into one constraint; two of them, or a json_schema format without
// its schema, are a 400 naming the field.
TEST(ChatRequest, StructuredOutputFields) {
  using Kind = ConstraintSpec::Kind;
  const ChatRequest a =
      parse_chat_request(chat_body({{"response_format", {{"type", "json_object"}}}}));
  EXPECT_EQ(a.params.constraint.kind, Kind::kJsonObject);
  const ChatRequest b = parse_chat_request(chat_body(
      {{"response_format",
        {{"type", "json_schema"},
         {"json_schema", {{"name", "p"}, {"strict", true}, {"schema", {{"type", "object"}}}}}}}}));
  EXPECT_EQ(b.params.constraint.kind, Kind::kJsonSchema);
  EXPECT_TRUE(b.params.constraint.strict);
  EXPECT_EQ(b.params.constraint.source, R"({"type":"object"})");
  EXPECT_EQ(b.params.constraint.param, "response_format.json_schema.schema");
  const ChatRequest c = parse_chat_request(chat_body({{"regex", "a+"}}));
  EXPECT_EQ(c.params.constraint.kind, Kind::kRegex);
  const ChatRequest d = parse_chat_request(chat_body({{"json_schema", R"({"type": "integer"})"}}));
  EXPECT_EQ(d.params.constraint.kind, Kind::kJsonSchema);
  EXPECT_TRUE(parse_chat_request(chat_body({{"response_format", {{"type", "text"}}}}))
                  .params.constraint.empty());
  expect_400(
      [] {
        parse_chat_request(chat_body({{"regex", "a"}, {"ebnf", "root ::= \"a\""}}));
      },
      "ebnf");
  expect_400(
      [] {
        parse_chat_request(chat_body({{"response_format", {{"type", "json_schema"}}}}));
      },
      "response_format");
  expect_400([] { parse_chat_request(chat_body({{"json_schema", 5}})); }, "json_schema");
}

TEST(ChatRequest, MessageValidation) {
  expect_400([] { parse_chat_request(Json{{"model", "x"}}); }, "messages");
  expect_400([] { parse_chat_request(Json{{"messages", Json::array()}}); }, "messages");
  expect_400([] { parse_chat_request(Json{{"messages", "hi"}}); }, "messages");
  expect_400(
      [] {
        parse_chat_request(Json{{"messages", {{{"content", "hi"}}}}});
      },
      "messages[0].role");
  expect_400(
      [] {
        parse_chat_request(Json{{"messages", {{{"role", "user"}, {"content", 5}}}}});
      },
      "messages[0].content");
  expect_400(
      [] {
        parse_chat_request(
            Json{{"messages",
                  {{{"role", "user"},
                    {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}}});
      },
      "messages[0].content");
  // Text parts, null content with tool calls, and tool messages are fine.
  EXPECT_NO_THROW(parse_chat_request(
      Json{{"messages",
            {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}}}},
             {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array()}},
             {{"role", "tool"}, {"content", "42"}}}}}));
}

TEST(ChatTemplateContext, FlattensPartsOnlyForStringTemplates) {
  const ChatRequest r = parse_chat_request(Json{
      {"messages",
       {{{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}},
      {"chat_template_kwargs", {{"enable_thinking", false}}},
      {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}});
  const ChatTemplate plain("{% for m in messages %}{{ m.content }}{% endfor %}");
  Json ctx = chat_template_context(r, plain, "<s>", "</s>");
  EXPECT_EQ(ctx["messages"][0]["content"], "a\nb");
  EXPECT_EQ(ctx["enable_thinking"], false);
  EXPECT_EQ(ctx["add_generation_prompt"], true);
  EXPECT_EQ(ctx["bos_token"], "<s>");
  EXPECT_EQ(ctx["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(plain.render(ctx), "a\nb");
  const ChatTemplate parts(
      "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in "
      "m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}");
  ctx = chat_template_context(r, parts, "", "");
  EXPECT_TRUE(ctx["messages"][0]["content"].is_array());
  EXPECT_EQ(parts.render(ctx), "ab");
}

TEST(CompletionRequest, PromptForms) {
  auto prompts = [](Json p) { return parse_completion_request(Json{{"prompt", p}}).prompts; };
  auto one = prompts("hello");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(*one[0].text, "hello");
  EXPECT_EQ(prompts({"a", "b"}).size(), 2u);
  auto ids = prompts({1, 2, 3});
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_FALSE(ids[0].text.has_value());
  EXPECT_EQ(ids[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(prompts({{1, 2}, {3}}).size(), 2u);
  expect_400([] { parse_completion_request(Json{{"max_tokens", 3}}); }, "prompt");
  expect_400([] { parse_completion_request(Json{{"prompt", 5}}); }, "prompt");
  expect_400([] { parse_completion_request(Json{{"prompt", Json::array()}}); }, "prompt");
  expect_400([] { parse_completion_request(Json{{"prompt", {"a", 1}}}); }, "prompt");
  expect_400([] { parse_completion_request(Json{{"prompt", {1, -2}}}); }, "prompt");
  expect_400([] { parse_completion_request(Json{{"prompt", {{1}, 2}}}); }, "prompt");
}

TEST(CompletionRequest, Defaults) {
  const CompletionRequest r =
      parse_completion_request(Json{{"prompt", "x"}, {"echo", true}, {"whatever", 1}});
  EXPECT_EQ(r.params.max_new_tokens, 16);  // OpenAI's default for completions
  EXPECT_TRUE(r.echo);
  EXPECT_FALSE(r.stream.stream);
  expect_400([] { parse_completion_request(Json{{"prompt", "x"}, {"logprobs", 2}}); }, "logprobs");
  EXPECT_NO_THROW(parse_completion_request(Json{{"prompt", "x"}, {"logprobs", nullptr}}));
  expect_400([] { parse_completion_request(Json{{"prompt", "x"}, {"echo", "yes"}}); }, "echo");
}

TEST(ErrorJson, Envelope) {
  const Json e = error_json(400, "bad temperature", "temperature");
  EXPECT_EQ(e["object"], "error");
  EXPECT_EQ(e["error"]["message"], "bad temperature");
  EXPECT_EQ(e["error"]["type"], "BadRequestError");
  EXPECT_EQ(e["error"]["param"], "temperature");
  EXPECT_EQ(e["error"]["code"], 400);
  EXPECT_EQ(e["code"], 400);
  EXPECT_TRUE(error_json(404, "x")["error"]["param"].is_null());
  EXPECT_EQ(error_json(404, "x")["error"]["type"], "NotFoundError");
}

}  // namespace
}  // namespace tandem::server
