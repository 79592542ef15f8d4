// Limits on what one request can make the server do (issue #21): JSON nesting refused while
// parsing (at the limit and far beyond it, in every field that reaches recursive code), short
// error messages for huge bad values, the Content-Type rule, CORS off unless an origin is
// allowed, and request numbers near 2^31, 2^32, 2^63 and 2^64 that must never wrap.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "backends/init.h"
#include "chat_template/chat_template.h"
#include "core/error.h"
#include "default_model_routes.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "server/routes.h"
#include "server/sse.h"

namespace tandem::server {
namespace {

// `levels` nested arrays around 1: "[[1]]" for 2.
std::string nested(int levels) {
  return std::string(static_cast<size_t>(levels), '[') + "1" +
         std::string(static_cast<size_t>(levels), ']');
}

// A value `levels` deep built in code (no parsing), for the template engine's conversion.
Json nested_json(int levels) {
  Json v = 1;
  for (int i = 0; i < levels; ++i) {
    Json a = Json::array();
    a.push_back(std::move(v));
    v = std::move(a);
  }
  return v;
}

HttpRequest raw_post(const std::string& path, std::string body,
                     const std::string& content_type = "application/json") {
  HttpRequest r;
  r.method = "POST";
  r.path = path;
  r.body = std::move(body);
  if (!content_type.empty()) r.headers.emplace_back("Content-Type", content_type);
  return r;
}

HttpRequest post(const std::string& path, const Json& body) {
  return raw_post(path, body.dump());
}

HttpRequest get(const std::string& path) {
  HttpRequest r;
  r.method = "GET";
  r.path = path;
  return r;
}

std::string message_of(const HttpResponse& r) {
  return Json::parse(r.body)["error"]["message"].get<std::string>();
}

std::string header_of(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

std::string drain(BodyStream& s) {
  std::string all;
  for (int i = 0; i < 100000; ++i)
    if (!s.next(all, std::chrono::milliseconds(100))) break;
  return all;
}

const std::string kDepthError = "JSON nested deeper than 128 levels";

// Chat bodies nested `depth` levels in total (the body's object is level 1), the deepest part
// in each of the four places of issue #21. Each asks for one token.
std::vector<std::pair<std::string, std::string>> chat_bodies(int depth) {
  const std::string msg = R"({"role": "user", "content": "Hi")";
  const std::string head = R"({"max_tokens": 1, "messages": [)" + msg + "}]";
  return {
      {"temperature", head + R"(, "temperature": )" + nested(depth - 1) + "}"},
      {"tools", head + R"(, "tools": )" + nested(depth - 1) + "}"},
      {"message extra field",
       R"({"max_tokens": 1, "messages": [)" + msg + R"(, "extra": )" + nested(depth - 3) + "}]}"},
      {"chat_template_kwargs",
       head + R"(, "chat_template_kwargs": {"x": )" + nested(depth - 2) + "}}"},
  };
}

TEST(JsonDepth, ParseRefusesNestingBeyondTheLimit) {
  EXPECT_EQ(kMaxJsonDepth, 128);
  // The body's object is level 1: 127 arrays inside it make 128 levels.
  EXPECT_NO_THROW(parse_json_object(R"({"a": )" + nested(127) + "}"));
  for (int levels : {128, 1000, 100000}) {
    try {
      parse_json_object(R"({"a": )" + nested(levels) + "}");
      ADD_FAILURE() << levels << " levels accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_NE(std::string(e.what()).find(kDepthError), std::string::npos) << e.what();
    }
  }
  // Brackets inside strings are text, not nesting.
  EXPECT_NO_THROW(parse_json_object(R"({"a": ")" + std::string(100000, '[') + "\"}"));
  // Unterminated deep input is refused as well, without building it.
  EXPECT_THROW(parse_json_object("{\"a\": " + std::string(100000, '[')), ApiError);
}

// A number beyond double's range is a 400 (found by fuzz/request.cpp: it escaped as nlohmann's
// out_of_range, a 500), and the message does not quote the literal, however long.
TEST(JsonNumbers, OutOfRangeNumberIsA400) {
  const std::vector<std::string> numbers = {"92e337", "-1e400", "1" + std::string(400, '0')};
  for (const std::string& number : numbers) {
    try {
      parse_json_object(R"({"temperature": )" + number + "}");
      ADD_FAILURE() << number << " accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(std::string(e.what()),
                "Invalid JSON in the request body: a number is out of range");
    }
  }
  // Large integers that fit a double are numbers, as in Python's json.
  EXPECT_NO_THROW(parse_json_object(R"({"seed": 1e300, "n": )" + std::string(30, '9') + "}"));
}

TEST(JsonDepth, ErrorMessagesQuoteOnlyAShortPrefix) {
  const Json huge = parse_json_object(R"({"temperature": )" + nested(127) + "}");
  try {
    Fields(huge).number("temperature");
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    EXPECT_NE(std::string(e.what()).find("..."), std::string::npos);
  }
  Json wide = {{"n", Json::array()}, {"s", std::string(1 << 20, 'x')}};
  for (int i = 0; i < 100000; ++i) wide["n"].push_back(i);
  for (const char* key : {"n", "s"}) {
    try {
      Fields(wide).integer(key);
      FAIL();
    } catch (const ApiError& e) {
      EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    }
  }
  EXPECT_EQ(quote_json(Json{1, 2}), "[1, 2]");
  EXPECT_EQ(quote_json(Json(std::string(150, 'a'))), "\"" + std::string(99, 'a') + "...");
  // A cut never splits a UTF-8 character.
  const std::string q = quote_json(Json(std::string(120, '\xC3')));
  EXPECT_LE(q.size(), 103u);
}

TEST(JsonDepth, TemplateConversionIsBounded) {
  const ChatTemplate tpl("{{ x | length }}");
  EXPECT_EQ(tpl.render(Json{{"x", nested_json(128)}}), "1");
  for (int levels : {129, 100000}) {
    try {
      tpl.render(Json{{"x", nested_json(levels)}});
      ADD_FAILURE() << levels << " levels rendered";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos)
          << e.what();
    }
  }
}

// The model's own JSON files are parsed with a bound too: a clean error, not a crash.
TEST(JsonDepth, ModelFilesAreBounded) {
  const std::string dir = ::testing::TempDir();
  const std::string config = dir + "/deep_config.json";
  std::ofstream(config) << R"({"architectures": )" << nested(100000) << "}";
  try {
    ModelConfig::from_file(config);
    ADD_FAILURE() << "deep config.json accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos)
        << e.what();
  }
  const std::string header = R"({"t": {"dtype": )" + nested(100000) + "}}";
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((header.size() >> (8 * i)) & 0xFF);
  const std::string st = dir + "/deep.safetensors";
  std::ofstream(st, std::ios::binary) << file << header;
  try {
    SafetensorsFile::open(st);
    ADD_FAILURE() << "deep safetensors header accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos)
        << e.what();
  }
  std::remove(config.c_str());
  std::remove(st.c_str());
}

// tokenizer_config.json (and chat_template.json) and the checkpoint's shard index likewise.
TEST(JsonDepth, TokenizerConfigAndShardIndexAreBounded) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "deep_model_files";
  fs::create_directories(dir);
  auto expect_depth_error = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << what << " nested 100,000 deep accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos)
          << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u);
    }
  };
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"chat_template": "x", "bos_token": )" << nested(100000) << "}";
  expect_depth_error([&] { load_chat_template(dir.string()); }, "tokenizer_config.json");
  fs::remove(dir / "tokenizer_config.json");
  std::ofstream(dir / "chat_template.json") << R"({"chat_template": )" << nested(100000) << "}";
  expect_depth_error([&] { load_chat_template(dir.string()); }, "chat_template.json");
  fs::remove(dir / "chat_template.json");
  // At the limit it still loads.
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"chat_template": "x", "extra": )" << nested(127) << "}";
  EXPECT_EQ(load_chat_template(dir.string())->source, "x");
  fs::remove(dir / "tokenizer_config.json");
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"weight_map": {}, "metadata": )" << nested(100000) << "}";
  expect_depth_error([&] { Checkpoint::open(dir.string()); }, "model.safetensors.index.json");
  fs::remove_all(dir);
}

// Routes without a model: the depth error comes from parsing, before anything else.
TEST(JsonDepth, EveryChatFieldAt129And100000Levels) {
  ServerArgs a;
  a.model_path = "/models/x";
  ServerState st(a);
  Router r;
  add_openai_routes(r, st);
  add_native_routes(r, st);
  for (int depth : {129, 100000}) {
    for (const auto& [field, body] : chat_bodies(depth)) {
      const HttpResponse res = r.dispatch(raw_post("/v1/chat/completions", body));
      EXPECT_EQ(res.status, 400) << field << " at " << depth;
      EXPECT_NE(message_of(res).find(kDepthError), std::string::npos) << message_of(res);
    }
  }
  for (const char* path : {"/v1/completions", "/generate", "/tokenize", "/detokenize"}) {
    const HttpResponse res = r.dispatch(raw_post(path, R"({"x": )" + nested(100000) + "}"));
    EXPECT_EQ(res.status, 400) << path;
    EXPECT_NE(message_of(res).find(kDepthError), std::string::npos) << path;
  }
  // A value at the limit is parsed; temperature then fails its type check with a short message.
  const HttpResponse t = r.dispatch(raw_post("/v1/chat/completions", chat_bodies(128)[0].second));
  EXPECT_EQ(t.status, 400);
  EXPECT_EQ(message_of(t).find(kDepthError), std::string::npos);
  EXPECT_NE(message_of(t).find("'temperature' must be a number"), std::string::npos);
  EXPECT_LT(message_of(t).size(), 200u);
}

TEST(ContentType, NonEmptyBodiesMustBeJson) {
  Router r;
  r.add("POST", "/echo", [](const HttpRequest& q) { return HttpResponse::text(q.body); });
  const std::string body = R"({"a": 1})";
  EXPECT_EQ(r.dispatch(raw_post("/echo", body)).status, 200);
  for (const char* ok :
       {"application/json; charset=utf-8", "Application/JSON", " application/json ;charset=UTF-8"})
    EXPECT_EQ(r.dispatch(raw_post("/echo", body, ok)).status, 200) << ok;
  for (const char* bad :
       {"", "text/plain", "application/x-www-form-urlencoded", "text/plain; charset=utf-8",
        "application/jsonx", "multipart/form-data"}) {
    const HttpResponse res = r.dispatch(raw_post("/echo", body, bad));
    EXPECT_EQ(res.status, 415) << bad;
    const Json j = Json::parse(res.body);
    EXPECT_EQ(j["error"]["code"], 415);
    EXPECT_EQ(j["object"], "error");
    EXPECT_NE(j["message"].get<std::string>().find("application/json"), std::string::npos);
  }
  // An empty body needs no type (curl -X POST .../flush_cache).
  EXPECT_EQ(r.dispatch(raw_post("/echo", "", "")).status, 200);
  EXPECT_EQ(r.dispatch(raw_post("/echo", "", "text/plain")).status, 200);
  // A long header is quoted short.
  const HttpResponse res = r.dispatch(raw_post("/echo", body, std::string(5000, 'x')));
  EXPECT_LT(message_of(res).size(), 300u);
  EXPECT_FALSE(content_type_error("application/json").has_value());
}

TEST(Cors, OffByDefault) {
  Router r;
  r.add("GET", "/ok", [](const HttpRequest&) { return HttpResponse::json(Json{{"ok", true}}); });
  HttpRequest q = get("/ok");
  q.headers.emplace_back("Origin", "http://evil.example");
  const HttpResponse res = r.dispatch(q);
  EXPECT_EQ(res.status, 200);
  EXPECT_EQ(header_of(res, "Access-Control-Allow-Origin"), "");
  HttpRequest pre = q;
  pre.method = "OPTIONS";
  pre.headers.emplace_back("Access-Control-Request-Method", "POST");
  const HttpResponse p = r.dispatch(pre);
  EXPECT_EQ(p.status, 204);
  EXPECT_EQ(header_of(p, "Access-Control-Allow-Origin"), "");
  EXPECT_EQ(header_of(p, "Access-Control-Allow-Methods"), "");
  EXPECT_EQ(header_of(p, "Access-Control-Allow-Headers"), "");
  EXPECT_EQ(header_of(p, "Allow"), "GET");
}

TEST(Cors, AllowListAndWildcard) {
  Router r;
  r.add("GET", "/ok", [](const HttpRequest&) { return HttpResponse::json(Json{{"ok", true}}); });
  r.add("POST", "/ok", [](const HttpRequest&) { return HttpResponse::json(Json{{"ok", true}}); });
  r.set_allowed_origins({"http://a.com", "https://b.org:8443"});
  auto from = [](const std::string& method, const std::string& origin) {
    HttpRequest q = get("/ok");
    q.method = method;
    if (!origin.empty()) q.headers.emplace_back("Origin", origin);
    q.headers.emplace_back("Access-Control-Request-Headers", "content-type, authorization");
    return q;
  };
  for (const char* o : {"http://a.com", "https://b.org:8443"}) {
    const HttpResponse res = r.dispatch(from("GET", o));
    EXPECT_EQ(header_of(res, "Access-Control-Allow-Origin"), o);
    EXPECT_EQ(header_of(res, "Vary"), "Origin");
    const HttpResponse p = r.dispatch(from("OPTIONS", o));
    EXPECT_EQ(p.status, 204);
    EXPECT_EQ(header_of(p, "Access-Control-Allow-Origin"), o);
    EXPECT_EQ(header_of(p, "Access-Control-Allow-Methods"), "GET, POST");
    EXPECT_EQ(header_of(p, "Access-Control-Allow-Headers"), "content-type, authorization");
  }
  for (const char* o : {"http://evil.com", "http://a.com.evil.com", "https://a.com", ""}) {
    EXPECT_EQ(header_of(r.dispatch(from("GET", o)), "Access-Control-Allow-Origin"), "") << o;
    EXPECT_EQ(header_of(r.dispatch(from("OPTIONS", o)), "Access-Control-Allow-Methods"), "") << o;
  }
  // Errors carry the header too, so an allowed page can read them.
  HttpRequest missing = from("GET", "http://a.com");
  missing.path = "/missing";
  EXPECT_EQ(header_of(r.dispatch(missing), "Access-Control-Allow-Origin"), "http://a.com");

  r.set_allowed_origins({"*"});
  EXPECT_EQ(header_of(r.dispatch(from("GET", "http://any.where")), "Access-Control-Allow-Origin"),
            "http://any.where");
  EXPECT_EQ(header_of(r.dispatch(from("GET", "")), "Access-Control-Allow-Origin"), "");
}

TEST(Cors, AllowedOriginsFlag) {
  using V = std::vector<std::string>;
  EXPECT_EQ(parse_allowed_origins(""), V{});
  EXPECT_EQ(parse_allowed_origins(R"(["http://a.com", "http://b.com"])"),
            (V{"http://a.com", "http://b.com"}));
  EXPECT_EQ(parse_allowed_origins("http://a.com, http://b.com"),
            (V{"http://a.com", "http://b.com"}));
  EXPECT_EQ(parse_allowed_origins("*"), V{"*"});
  EXPECT_EQ(parse_allowed_origins(R"(["*"])"), V{"*"});
  EXPECT_THROW(parse_allowed_origins("[http://a.com"), InvalidArgument);
  EXPECT_THROW(parse_allowed_origins("[1]"), InvalidArgument);
  ServerArgs a;
  a.allowed_origins = R"(["http://a.com"])";
  EXPECT_EQ(a.to_json()["allowed_origins"], Json::array({"http://a.com"}));
  EXPECT_EQ(ServerArgs{}.to_json()["allowed_origins"], Json::array());
  a.allowed_origins = "[oops";
  EXPECT_THROW(engine_options(a, false), InvalidArgument);
}

// Request numbers at the integer boundaries, through the routes with the default model loaded.
class RequestLimitsTest : public DefaultModelRoutes {
 protected:
  static HttpResponse chat(Json extra) {
    Json body = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
    for (auto& [k, v] : extra.items()) body[k] = v;
    return router_->dispatch(post("/v1/chat/completions", body));
  }
};

// 2^31, 2^32, 2^63 - 1, and 2^64 - 1 (which only fits uint64).
const std::vector<Json> kBoundaries = {Json(int64_t{1} << 31), Json(int64_t{1} << 32),
                                       Json(INT64_MAX), Json(UINT64_MAX)};

TEST_F(RequestLimitsTest, MaxTokensNeverWraps) {
  for (const Json& v : kBoundaries) {
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      const HttpResponse res = chat({{key, v}});
      EXPECT_EQ(res.status, 400) << key << " = " << v;
      EXPECT_EQ(Json::parse(res.body)["error"]["param"], key) << message_of(res);
    }
    const HttpResponse c =
        router_->dispatch(post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", v}}));
    EXPECT_EQ(c.status, 400) << v;
    const HttpResponse g = router_->dispatch(
        post("/generate", {{"text", "Hi"}, {"sampling_params", {{"max_new_tokens", v}}}}));
    EXPECT_EQ(g.status, 400) << v;
    EXPECT_EQ(Json::parse(g.body)["error"]["param"], "sampling_params.max_new_tokens");
  }
  // Within int64 the message names the context length and the requested number, unwrapped.
  const std::string m = message_of(chat({{"max_tokens", INT64_MAX}}));
  EXPECT_NE(m.find("maximum context length"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(INT64_MAX)), std::string::npos) << m;
  EXPECT_EQ(m.find("-9223"), std::string::npos) << m;
  // As floats too.
  EXPECT_EQ(chat({{"max_tokens", 9.2e18}}).status, 400);
  EXPECT_EQ(chat({{"max_tokens", 1e300}}).status, 400);
  // The engine checks without overflow as well.
  Request r;
  r.prompt = {1, 2, 3};
  for (int64_t max_new : {INT64_MAX, INT64_MAX - 2, int64_t{1} << 62}) {
    r.max_new_tokens = max_new;
    EXPECT_THROW(state_->engine().submit(r), InvalidArgument) << max_new;
  }
  EXPECT_EQ(state_->engine().metrics().num_waiting + state_->engine().metrics().num_running, 0);
}

TEST_F(RequestLimitsTest, CountsAtTheBoundaries) {
  for (const Json& v : kBoundaries) {
    for (const char* key : {"n", "top_k", "top_logprobs", "logprobs", "best_of"}) {
      const HttpResponse res = chat({{key, v}});
      EXPECT_EQ(res.status, 400) << key << " = " << v;
      EXPECT_EQ(Json::parse(res.body)["error"]["param"], key) << message_of(res);
    }
    const HttpResponse g = router_->dispatch(
        post("/generate", {{"text", "Hi"}, {"sampling_params", {{"n", v}, {"top_k", 5}}}}));
    EXPECT_EQ(g.status, 400) << v;
  }
  for (const Json& v : {Json(-2), Json(INT64_MIN)})
    EXPECT_EQ(chat({{"top_k", v}}).status, 400) << v;
  // A top_k beyond the vocabulary is "keep everything" and runs.
  const HttpResponse ok = chat({{"top_k", INT32_MAX}, {"max_tokens", 2}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  ASSERT_TRUE(ok.stream);
  EXPECT_EQ(Json::parse(drain(*ok.stream))["usage"]["completion_tokens"], 2);
}

TEST_F(RequestLimitsTest, TokenIdsOutsideTheVocabulary) {
  const int64_t V = state_->engine().model_config().vocab_size;
  for (const Json& id : {Json(V), Json(-1), Json(int64_t{1} << 31), Json(int64_t{1} << 32),
                         Json(INT64_MAX), Json(UINT64_MAX)}) {
    const std::string name = id.dump();
    const HttpResponse c =
        router_->dispatch(post("/v1/completions", {{"prompt", {1, id}}, {"max_tokens", 1}}));
    EXPECT_EQ(c.status, 400) << name;
    EXPECT_NE(message_of(c).find(name), std::string::npos) << message_of(c);
    const HttpResponse g =
        router_->dispatch(post("/generate", {{"input_ids", {1, id}}, {"stream", false}}));
    EXPECT_EQ(g.status, 400) << name;
    EXPECT_NE(message_of(g).find(name), std::string::npos) << message_of(g);
    const HttpResponse d = router_->dispatch(post("/detokenize", {{"tokens", {1, id}}}));
    EXPECT_EQ(d.status, 400) << name;
    EXPECT_NE(message_of(d).find(name), std::string::npos) << message_of(d);
  }
  // In range is fine.
  const HttpResponse d = router_->dispatch(post("/detokenize", {{"tokens", {65, V - 1}}}));
  EXPECT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(router_->dispatch(post("/detokenize", {{"tokens", {"a"}}})).status, 400);
}

TEST_F(RequestLimitsTest, DeepValuesAtTheLimitWork) {
  // tools: a schema nested up to the limit (body level 1, tools 2, tool 3, function 4,
  // parameters 5, then arrays down to level 128) renders and generates.
  Json deep = nested_json(123);
  Json tools = Json::array(
      {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", {{"x", deep}}}}}}});
  const HttpResponse ok = chat({{"tools", tools}, {"max_tokens", 1}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  ASSERT_TRUE(ok.stream);
  EXPECT_FALSE(Json::parse(drain(*ok.stream)).contains("error"));
  // One level more is refused while parsing and the server answers the next request.
  tools[0]["function"]["parameters"]["x"] = nested_json(124);
  const HttpResponse bad = chat({{"tools", tools}, {"max_tokens", 1}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(message_of(bad).find(kDepthError), std::string::npos) << message_of(bad);
  for (int depth : {129, 100000})
    for (const auto& [field, body] : chat_bodies(depth)) {
      const HttpResponse res = router_->dispatch(raw_post("/v1/chat/completions", body));
      EXPECT_EQ(res.status, 400) << field;
      EXPECT_NE(message_of(res).find(kDepthError), std::string::npos) << message_of(res);
    }
  // At the limit: a message's extra field and chat_template_kwargs reach the template and
  // generate; temperature is parsed and fails its type check, tools (a list of lists) too
  // or renders, never with the depth error.
  const std::vector<std::pair<std::string, std::string>> at_limit = chat_bodies(128);
  for (size_t i = 0; i < at_limit.size(); ++i) {
    const HttpResponse res =
        router_->dispatch(raw_post("/v1/chat/completions", at_limit[i].second));
    if (i >= 2) {
      EXPECT_EQ(res.status, 200) << at_limit[i].first << ": " << res.body;
      if (res.stream) {
        EXPECT_FALSE(Json::parse(drain(*res.stream)).contains("error"));
      }
    } else {
      EXPECT_EQ(res.body.find(kDepthError), std::string::npos) << res.body;
      if (res.stream) drain(*res.stream);
    }
  }
  EXPECT_EQ(router_->dispatch(get("/health")).status, 200);
}

}  // namespace
}  // namespace tandem::server
