// Routes through the router, without sockets: 503 before the model is loaded (validation still
// answers 400 first), and with the default model loaded, the SSE chunk sequence of a chat stream
// and a cancelled body that gives its engine request back.
#include <gtest/gtest.h>

#include <thread>

#include "backends/init.h"
#include "default_model_routes.h"
#include "model/model.h"
#include "server/routes.h"
#include "server/sse.h"

namespace tandem::server {
namespace {

HttpRequest post(const std::string& path, const Json& body) {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = body.dump();
  r.headers.emplace_back("Content-Type", "application/json");
  return r;
}

HttpRequest get(const std::string& path) {
  HttpRequest r;
  r.method = "GET";
  r.path = path;
  return r;
}

// Runs a streamed body to its end (or `limit` calls) and returns everything it produced.
std::string drain(BodyStream& s, int limit = 100000) {
  std::string all;
  for (int i = 0; i < limit; ++i)
    if (!s.next(all, std::chrono::milliseconds(100))) break;
  return all;
}

TEST(RoutesNotReady, AnswerWhileTheModelLoads) {
  ServerArgs a;
  a.model_path = "/models/x";
  a.served_model_name = "x";
  ServerState st(a);
  Router r;
  add_openai_routes(r, st);
  add_native_routes(r, st);
  EXPECT_EQ(r.dispatch(get("/health")).status, 503);
  EXPECT_EQ(r.dispatch(post("/v1/completions", {{"prompt", "hi"}})).status, 503);
  EXPECT_EQ(r.dispatch(post("/v1/chat/completions",
                            {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}))
                .status,
            503);
  EXPECT_EQ(r.dispatch(post("/generate", {{"text", "hi"}})).status, 503);
  EXPECT_EQ(r.dispatch(post("/flush_cache", Json::object())).status, 503);
  // Bad input is still a 400 whatever the state of the model.
  EXPECT_EQ(r.dispatch(post("/v1/completions", {{"prompt", "hi"}, {"temperature", -1}})).status,
            400);
  HttpResponse info = r.dispatch(get("/get_server_info"));
  EXPECT_EQ(info.status, 200);
  const Json j = Json::parse(info.body);
  EXPECT_EQ(j["status"], "loading");
  EXPECT_TRUE(j["internal_states"].empty());
  HttpResponse models = r.dispatch(get("/v1/models"));
  EXPECT_EQ(Json::parse(models.body)["data"][0]["id"], "x");
  HttpResponse metrics = r.dispatch(get("/metrics"));
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("sglang:num_running_reqs{model_name=\"x\"} 0"), std::string::npos);
}

class RoutesTest : public DefaultModelRoutes {};

TEST_F(RoutesTest, ChatStreamChunkSequence) {
  HttpResponse res = router_->dispatch(
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Good morning"}}}},
                                    {"max_tokens", 10},
                                    {"temperature", 0},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}},
                                    {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  ASSERT_EQ(res.status, 200);
  ASSERT_TRUE(res.stream);
  EXPECT_EQ(res.content_type, "text/event-stream");
  const std::string body = drain(*res.stream);
  const std::vector<std::string> events = sse_data_payloads(body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  const Json first = Json::parse(events.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  const Json usage = Json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 10);
  const Json finish = Json::parse(events[events.size() - 3]);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "length");
  std::string content;
  for (size_t i = 1; i + 3 < events.size(); ++i) {
    const Json e = Json::parse(events[i]);
    EXPECT_TRUE(e["choices"][0]["finish_reason"].is_null());
    content += e["choices"][0]["delta"].value("content", "");
  }
  // The non-streamed response carries the same text.
  HttpResponse full = router_->dispatch(
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "Good morning"}}}},
                                    {"max_tokens", 10},
                                    {"temperature", 0},
                                    {"chat_template_kwargs", {{"enable_thinking", false}}}}));
  ASSERT_TRUE(full.stream);
  const Json j = Json::parse(drain(*full.stream));
  EXPECT_EQ(j["choices"][0]["message"]["content"], content);
  EXPECT_FALSE(content.empty());
}

TEST_F(RoutesTest, CancelledBodyAbortsItsRequest) {
  HttpResponse res = router_->dispatch(post("/v1/completions", {{"prompt", "Once upon a time"},
                                                                {"max_tokens", 3000},
                                                                {"ignore_eos", true},
                                                                {"stream", true}}));
  ASSERT_TRUE(res.stream);
  drain(*res.stream, 5);
  EXPECT_EQ(state_->engine().metrics().num_running + state_->engine().metrics().num_waiting, 1);
  res.stream->cancel();
  EngineMetrics m;
  for (int i = 0; i < 200; ++i) {
    m = state_->engine().metrics();
    if (m.num_running == 0 && m.num_waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(m.num_running, 0);
  EXPECT_LT(m.generation_tokens_total, 3000u);
  EXPECT_EQ(state_->metrics().finished[static_cast<size_t>(FinishReason::kAbort)].load(), 1u);
}

}  // namespace
}  // namespace tandem::server
