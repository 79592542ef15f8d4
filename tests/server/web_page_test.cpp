// The web page at /: served as HTML with a Content-Security-Policy, byte for byte the file in
// src/server/web/, with no external references; reachable without the API key while the API
// still needs it; gone with --disable-web-page; the other routes and the JSON rules unchanged.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server/routes.h"
#include "server/web_page.h"

namespace tandem::server {
namespace {

HttpRequest req(std::string method, std::string path) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

std::string header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

std::string read_source(const std::string& rel) {
  std::ifstream f(std::string(TANDEM_SOURCE_DIR) + "/" + rel, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The routes `tandem serve` registers, over a server whose model is still loading (the page
// needs none).
struct Server {
  explicit Server(ServerArgs a) : state(prepare(std::move(a))) {
    add_openai_routes(router, state);
    add_native_routes(router, state);
    add_web_page_routes(router, state.args());
    router.set_api_key(state.args().api_key);
  }
  static ServerArgs prepare(ServerArgs a) {
    a.model_path = "/models/x";
    a.served_model_name = "x";
    return a;
  }
  ServerState state;
  Router router;
};

TEST(WebPage, ServedAsHtmlAtRootAndIndex) {
  Server s{ServerArgs{}};
  for (const char* path : {"/", "/index.html"}) {
    SCOPED_TRACE(path);
    const HttpResponse r = s.router.dispatch(req("GET", path));
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_EQ(r.body.rfind("<!doctype html>", 0), 0u);
    EXPECT_NE(r.body.find("<title>Tandem</title>"), std::string::npos);
    EXPECT_NE(header(r, "Content-Security-Policy").find("connect-src 'self'"), std::string::npos);
    EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
  }
  EXPECT_EQ(s.router.dispatch(req("HEAD", "/")).status, 200);
  const HttpResponse post = s.router.dispatch(req("POST", "/"));
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(header(post, "Allow"), "GET");
  EXPECT_EQ(s.router.dispatch(req("GET", "/index.htm")).status, 404);
}

TEST(WebPage, EmbedsTheSourceFileVerbatim) {
  const std::string file = read_source("src/server/web/index.html");
  ASSERT_GT(file.size(), 1000u);
  EXPECT_EQ(std::string(web_page_html()), file);
}

TEST(WebPage, CallsOnlyItsOwnServer) {
  std::string page(web_page_html());
  // The one URL allowed is the SVG namespace of the inline icon, which is a name, not a request.
  const std::string ns = "http://www.w3.org/2000/svg";
  for (size_t at; (at = page.find(ns)) != std::string::npos;) page.erase(at, ns.size());
  EXPECT_EQ(page.find("://"), std::string::npos) << "the page names an external URL";
  EXPECT_EQ(page.find("@import"), std::string::npos);
  EXPECT_EQ(page.find("<script src"), std::string::npos);
  // It uses the API it documents, with JSON bodies, and renders model output as text.
  for (const char* used :
       {"'/v1/chat/completions'", "'/metrics'", "'/get_server_info'", "'/v1/models'",
        "'Content-Type'] = 'application/json'", "stream: true", "tandem:spec_accept_length",
        "tandem:spec_accepted_tokens_per_pos_total"})
    EXPECT_NE(page.find(used), std::string::npos) << used;
  EXPECT_EQ(page.find("innerHTML"), std::string::npos);
}

TEST(WebPage, NeedsNoApiKeyButTheApiStillDoes) {
  ServerArgs a;
  a.api_key = "secret";
  Server s{a};
  EXPECT_EQ(s.router.dispatch(req("GET", "/")).status, 200);
  EXPECT_EQ(s.router.dispatch(req("GET", "/get_server_info")).status, 401);
  EXPECT_EQ(s.router.dispatch(req("GET", "/v1/models")).status, 401);
  HttpRequest authed = req("GET", "/get_server_info");
  authed.headers.emplace_back("Authorization", "Bearer secret");
  EXPECT_EQ(s.router.dispatch(authed).status, 200);
}

TEST(WebPage, DisabledByTheFlag) {
  ServerArgs a;
  a.disable_web_page = true;
  Server s{a};
  for (const char* path : {"/", "/index.html"}) {
    const HttpResponse r = s.router.dispatch(req("GET", path));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.content_type, "application/json");
  }
  EXPECT_EQ(s.router.dispatch(req("GET", "/v1/models")).status, 200);
  EXPECT_EQ(Json::parse(s.router.dispatch(req("GET", "/get_server_info")).body)["disable_web_page"],
            true);
}

TEST(WebPage, JsonRulesStillHold) {
  // The page posts JSON; a form body (what a cross-site form could send) is still a 415.
  Server s{ServerArgs{}};
  HttpRequest form = req("POST", "/v1/chat/completions");
  form.body = "messages=hi";
  form.headers.emplace_back("Content-Type", "application/x-www-form-urlencoded");
  EXPECT_EQ(s.router.dispatch(form).status, 415);
  HttpRequest json = req("POST", "/v1/chat/completions");
  json.body = R"({"messages": [{"role": "user", "content": "hi"}], "stream": true})";
  json.headers.emplace_back("Content-Type", "application/json");
  EXPECT_EQ(s.router.dispatch(json).status, 503);  // accepted; the model is still loading
  // No CORS header for other origins: the page is same-origin and needs none.
  HttpRequest cross = req("GET", "/");
  cross.headers.emplace_back("Origin", "http://elsewhere.example");
  const HttpResponse r = s.router.dispatch(cross);
  EXPECT_EQ(header(r, "Access-Control-Allow-Origin"), "");
}

}  // namespace
}  // namespace tandem::server
