#include <gtest/gtest.h>

#include "bench_client/http.h"
#include "bench_client/request.h"
#include "core/error.h"

namespace tandem::bench {
namespace {

TEST(Request, SglangGenerateBody) {
  RequestOptions o;
  o.extra_body = {{"return_logprob", true}, {"stream", false}};
  const auto r = build_sglang_request("hello", 17, o);
  EXPECT_EQ(r.path, "/generate");
  EXPECT_EQ(r.body["text"], "hello");
  EXPECT_EQ(r.body["sampling_params"]["max_new_tokens"], 17);
  EXPECT_EQ(r.body["sampling_params"]["ignore_eos"], true);
  EXPECT_EQ(r.body["sampling_params"]["temperature"], 0.0);
  EXPECT_EQ(r.body["return_logprob"], true);
  EXPECT_EQ(r.body["stream"], false);  // the extra body wins, as **extra_request_body does
}

TEST(Request, OpenAIBodies) {
  RequestOptions o;
  o.model = "glm-5";
  o.ignore_eos = false;
  o.temperature = 0.7;
  const auto c = build_openai_completions_request("hi", 9, o);
  EXPECT_EQ(c.path, "/v1/completions");
  EXPECT_EQ(c.body["model"], "glm-5");
  EXPECT_EQ(c.body["prompt"], "hi");
  EXPECT_EQ(c.body["max_tokens"], 9);
  EXPECT_EQ(c.body["ignore_eos"], false);
  EXPECT_EQ(c.body["temperature"], 0.7);
  EXPECT_EQ(c.body["stream"], true);
  EXPECT_EQ(c.body["stream_options"]["include_usage"], true);
  const auto chat = build_openai_chat_request("hi", 9, o);
  EXPECT_EQ(chat.path, "/v1/chat/completions");
  EXPECT_EQ(chat.body["messages"][0]["role"], "user");
  EXPECT_EQ(chat.body["messages"][0]["content"], "hi");
  EXPECT_EQ(chat.body["max_completion_tokens"], 9);
  o.stream = false;
  EXPECT_FALSE(build_openai_chat_request("hi", 9, o).body.contains("stream_options"));
}

TEST(Request, TokenIdPrompts) {
  RequestOptions o;
  DatasetRow row{"ab", 2, 5, {97, 98}};
  const auto g = build_request(Backend::kSglang, row, 5, o);
  EXPECT_EQ(g.body["input_ids"], nlohmann::json::array({97, 98}));
  EXPECT_FALSE(g.body.contains("text"));  // /generate takes exactly one of them
  const auto c = build_request(Backend::kOpenAI, row, 5, o);
  EXPECT_EQ(c.body["prompt"], nlohmann::json::array({97, 98}));
  EXPECT_THROW(build_request(Backend::kOpenAIChat, row, 5, o), InvalidArgument);
  row.prompt_ids.clear();  // no ids: the text, on every backend
  EXPECT_EQ(build_request(Backend::kSglang, row, 5, o).body["text"], "ab");
  EXPECT_EQ(build_request(Backend::kOpenAI, row, 5, o).body["prompt"], "ab");
  EXPECT_EQ(build_request(Backend::kOpenAIChat, row, 5, o).body["messages"][0]["content"], "ab");
}

TEST(Request, BackendNames) {
  EXPECT_EQ(parse_backend("sglang"), Backend::kSglang);
  EXPECT_EQ(parse_backend("openai"), Backend::kOpenAI);
  EXPECT_EQ(parse_backend("openai-chat"), Backend::kOpenAIChat);
  EXPECT_EQ(parse_backend("sglang-oai-chat"), Backend::kOpenAIChat);
  EXPECT_THROW(parse_backend("trt"), InvalidArgument);
}

TEST(Http, BaseUrls) {
  Endpoint e = parse_base_url("http://127.0.0.1:30000");
  EXPECT_EQ(e.scheme_host_port, "http://127.0.0.1:30000");
  EXPECT_EQ(e.path_prefix, "");
  e = parse_base_url("localhost:8000/api/");
  EXPECT_EQ(e.scheme_host_port, "http://localhost:8000");
  EXPECT_EQ(e.path_prefix, "/api");
  EXPECT_EQ(parse_base_url("https://example.com/v").scheme_host_port, "https://example.com");
  EXPECT_THROW(parse_base_url("ftp://example.com"), InvalidArgument);
  EXPECT_THROW(parse_base_url("http:///x"), InvalidArgument);
}

}  // namespace
}  // namespace tandem::bench
