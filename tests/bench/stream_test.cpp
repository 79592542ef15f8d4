// ITL splitting and TTFT rules, fed made-up events with made-up times.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bench_client/stream.h"

namespace tandem::bench {
namespace {

using json = nlohmann::json;

std::string sg(const std::string& text, int64_t tokens) {
  return json{{"text", text},
              {"meta_info", {{"completion_tokens", tokens}, {"spec_verify_ct", tokens / 2}}}}
      .dump();
}

std::string oai(const std::string& text, std::optional<int64_t> usage = std::nullopt) {
  json j = {{"choices", json::array({{{"index", 0}, {"text", text}}})}};
  if (usage) j["usage"] = {{"completion_tokens", *usage}};
  return j.dump();
}

void expect_itl(const RequestOutput& o, const std::vector<double>& want) {
  ASSERT_EQ(o.itl.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(o.itl[i], want[i], 1e-12) << i;
}

TEST(Stream, SglangSplitsEachGapOverTheTokensItAdded) {
  StreamAccumulator acc(Backend::kSglang, 100);
  acc.on_event(sg("", 1), 0.05);       // no text yet: not the first token
  acc.on_event(sg("A", 2), 0.10);      // first token(s): TTFT
  acc.on_event(sg("AB C", 5), 0.13);   // 3 tokens in 30 ms: three samples of 10 ms
  acc.on_event(sg("AB C", 5), 0.15);   // no new token: merged into the next gap
  acc.on_event(sg("AB CD", 6), 0.17);  // 1 token, 40 ms after the last counted chunk
  acc.on_event("[DONE]", 0.18);
  const RequestOutput o = acc.finish();
  EXPECT_TRUE(o.success);
  EXPECT_DOUBLE_EQ(o.ttft, 0.10);
  EXPECT_DOUBLE_EQ(o.latency, 0.18);  // the last event of any kind
  EXPECT_EQ(o.output_len, 6);         // the server's count, not the 100 requested
  EXPECT_EQ(o.generated_text, "AB CD");
  EXPECT_EQ(o.spec_verify_ct, 3);
  expect_itl(o, {0.01, 0.01, 0.01, 0.04});
}

// SGLang events are read without building the document (the ids are skipped); the fields it
// keeps must be those of a full parse whatever the key order, nesting and extra fields, and
// anything unusual (an error, a payload that is not an object) takes the full parse.
TEST(Stream, SglangEventsReadWithoutADocumentAsWithOne) {
  StreamAccumulator acc(Backend::kSglang, 100);
  json a = {{"meta_info",
             {{"id", "x"},
              {"text", "not this"},
              {"completion_tokens", 3},
              {"nested", {{"completion_tokens", 99}}},
              {"spec_verify_ct", 2}}},
            {"output_ids", {1, 2, 3}},
            {"extra", {{"text", "nor this"}}},
            {"text", "a\"b\u00e9"}};
  acc.on_event(a.dump(), 0.1);
  a["text"] = "a\"b\u00e9 c";
  a["meta_info"]["completion_tokens"] = 5;
  a["output_ids"] = {1, 2, 3, 4, 5};
  acc.on_event(a.dump(), 0.2);
  RequestOutput o = acc.finish();
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.generated_text, "a\"b\u00e9 c");
  EXPECT_EQ(o.output_len, 5);
  EXPECT_EQ(o.spec_verify_ct, 2);
  expect_itl(o, {0.05, 0.05});
  StreamAccumulator err(Backend::kSglang, 10);
  err.on_event(R"({"text": "x", "error": {"message": "engine failed"}})", 0.1);
  EXPECT_FALSE(err.finish().success);
  EXPECT_EQ(err.finish().error, "engine failed");
  StreamAccumulator bad(Backend::kSglang, 10);
  bad.on_event("[1, 2]", 0.1);
  EXPECT_FALSE(bad.finish().success);
  StreamAccumulator cut(Backend::kSglang, 10);
  cut.on_event(R"({"text": "x", "output_ids": [1, 2)", 0.1);
  EXPECT_FALSE(cut.finish().success);
}

TEST(Stream, OpenAIWithoutCountsGivesOneSamplePerChunk) {
  StreamAccumulator acc(Backend::kOpenAI, 9);
  acc.on_event(oai("a"), 0.1);
  acc.on_event(oai("bc"), 0.3);
  acc.on_event(oai("d"), 0.35);
  acc.on_event(oai(""), 0.36);  // finish_reason chunk with no text
  acc.on_event(json{{"choices", json::array()}, {"usage", {{"completion_tokens", 7}}}}.dump(), 0.4);
  acc.on_event("[DONE]", 0.41);
  const RequestOutput o = acc.finish();
  EXPECT_TRUE(o.success);
  EXPECT_DOUBLE_EQ(o.ttft, 0.1);
  EXPECT_DOUBLE_EQ(o.latency, 0.41);
  EXPECT_EQ(o.output_len, 7);  // from the final usage chunk
  EXPECT_EQ(o.generated_text, "abcd");
  expect_itl(o, {0.2, 0.05});
}

TEST(Stream, OpenAIWithContinuousUsageSplitsPerToken) {
  StreamAccumulator acc(Backend::kOpenAI, 9);
  acc.on_event(oai("a", 1), 0.1);
  acc.on_event(oai("bcd", 4), 0.4);
  acc.on_event(oai("e", 5), 0.45);
  acc.on_event("[DONE]", 0.5);
  const RequestOutput o = acc.finish();
  EXPECT_EQ(o.output_len, 5);
  expect_itl(o, {0.1, 0.1, 0.1, 0.05});
}

TEST(Stream, OpenAIWithoutCountsKeepsTheRequestedLength) {
  StreamAccumulator acc(Backend::kOpenAI, 9);
  acc.on_event(oai("a"), 0.1);
  acc.on_event("[DONE]", 0.2);
  EXPECT_EQ(acc.finish().output_len, 9);
}

TEST(Stream, ChatIgnoresTheRoleOnlyFirstDelta) {
  StreamAccumulator acc(Backend::kOpenAIChat, 3);
  acc.on_event(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})", 0.01);
  acc.on_event(R"({"choices":[{"index":0,"delta":{"content":null}}]})", 0.02);
  acc.on_event(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})", 0.2);
  acc.on_event(R"({"choices":[{"index":0,"delta":{"content":" there"}}]})", 0.25);
  acc.on_event(R"({"choices":[],"usage":{"completion_tokens":2}})", 0.26);
  const RequestOutput o = acc.finish();
  EXPECT_DOUBLE_EQ(o.ttft, 0.2);
  EXPECT_EQ(o.generated_text, "Hi there");
  EXPECT_EQ(o.output_len, 2);
  expect_itl(o, {0.05});
}

TEST(Stream, ChatReasoningTextCounts) {
  StreamAccumulator acc(Backend::kOpenAIChat, 8);
  acc.on_event(
      R"({"choices":[{"delta":{"role":"assistant","content":""}}],"usage":{"completion_tokens":0}})",
      0.01);
  acc.on_event(
      R"({"choices":[{"delta":{"reasoning_content":"hm"}}],"usage":{"completion_tokens":1}})", 0.1);
  acc.on_event(
      R"({"choices":[{"delta":{"reasoning_content":", so"}}],"usage":{"completion_tokens":3}})",
      0.14);
  acc.on_event(R"({"choices":[{"delta":{"content":" Yes"}}],"usage":{"completion_tokens":4}})",
               0.15);
  const RequestOutput o = acc.finish();
  EXPECT_DOUBLE_EQ(o.ttft, 0.1);
  EXPECT_EQ(o.generated_text, "hm, so Yes");
  EXPECT_EQ(o.output_len, 4);
  expect_itl(o, {0.02, 0.02, 0.01});
}

TEST(Stream, ErrorEventsAndGarbageFailTheRequest) {
  StreamAccumulator a(Backend::kSglang, 4);
  a.on_event(sg("x", 1), 0.1);
  a.on_event(R"({"error":{"message":"out of memory","code":500}})", 0.2);
  a.on_event("[DONE]", 0.3);
  EXPECT_FALSE(a.finish().success);
  EXPECT_EQ(a.finish().error, "out of memory");

  StreamAccumulator b(Backend::kOpenAI, 4);
  b.on_event("{not json", 0.1);
  EXPECT_FALSE(b.finish().success);
  EXPECT_NE(b.finish().error.find("malformed"), std::string::npos);
}

TEST(Stream, NoTextMeansTtftIsTheLatency) {
  StreamAccumulator acc(Backend::kSglang, 4);
  acc.on_event("[DONE]", 0.3);
  const RequestOutput o = acc.finish();
  EXPECT_TRUE(o.success);
  EXPECT_DOUBLE_EQ(o.ttft, 0.3);
}

TEST(Stream, NonStreamingBodies) {
  StreamAccumulator s(Backend::kSglang, 4);
  s.on_body(R"({"text":"abc","meta_info":{"completion_tokens":3}})", 0.5);
  RequestOutput o = s.finish();
  EXPECT_TRUE(o.success);
  EXPECT_DOUBLE_EQ(o.ttft, 0.5);
  EXPECT_DOUBLE_EQ(o.latency, 0.5);
  EXPECT_EQ(o.output_len, 3);
  EXPECT_TRUE(o.itl.empty());

  StreamAccumulator c(Backend::kOpenAIChat, 4);
  c.on_body(R"({"choices":[{"message":{"content":"hey"}}],"usage":{"completion_tokens":2}})", 0.4);
  o = c.finish();
  EXPECT_EQ(o.generated_text, "hey");
  EXPECT_EQ(o.output_len, 2);
}

}  // namespace
}  // namespace tandem::bench
