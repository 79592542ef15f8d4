// Routing: 404 and 405 as JSON errors, HEAD as GET, CORS preflight, the API key, and handler
// exceptions mapped to statuses.
#include <gtest/gtest.h>

#include "core/error.h"
#include "server/http_types.h"

namespace tandem::server {
namespace {

HttpRequest req(std::string method, std::string path) {
  HttpRequest r;
  r.method = std::move(method);
  r.path = std::move(path);
  return r;
}

Router make_router() {
  Router r;
  r.add("GET", "/ok", [](const HttpRequest&) { return HttpResponse::json(Json{{"ok", true}}); });
  r.add("POST", "/bad",
        [](const HttpRequest&) -> HttpResponse { throw bad_request("nope", "field"); });
  r.add("POST", "/invalid",
        [](const HttpRequest&) -> HttpResponse { throw InvalidArgument("too long"); });
  r.add("POST", "/boom",
        [](const HttpRequest&) -> HttpResponse { throw std::runtime_error("oops"); });
  r.add("GET", "/items/*", [](const HttpRequest& q) { return HttpResponse::text(q.path); });
  r.add("GET", "/health", [](const HttpRequest&) { return HttpResponse::text(""); });
  return r;
}

TEST(Router, Statuses) {
  const Router r = make_router();
  EXPECT_EQ(r.dispatch(req("GET", "/ok")).status, 200);
  EXPECT_EQ(r.dispatch(req("HEAD", "/ok")).status, 200);
  EXPECT_EQ(r.dispatch(req("GET", "/items/abc")).body, "/items/abc");

  HttpResponse nf = r.dispatch(req("GET", "/missing"));
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(Json::parse(nf.body)["error"]["code"], 404);

  HttpResponse na = r.dispatch(req("POST", "/ok"));
  EXPECT_EQ(na.status, 405);
  EXPECT_EQ(Json::parse(na.body)["error"]["type"], "MethodNotAllowedError");

  HttpResponse bad = r.dispatch(req("POST", "/bad"));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(Json::parse(bad.body)["error"]["param"], "field");
  EXPECT_EQ(r.dispatch(req("POST", "/invalid")).status, 400);
  HttpResponse boom = r.dispatch(req("POST", "/boom"));
  EXPECT_EQ(boom.status, 500);
  EXPECT_EQ(Json::parse(boom.body)["error"]["type"], "InternalServerError");

  EXPECT_EQ(r.dispatch(req("OPTIONS", "/ok")).status, 204);
}

TEST(Router, ApiKey) {
  Router r = make_router();
  r.set_api_key("secret");
  EXPECT_EQ(r.dispatch(req("GET", "/ok")).status, 401);
  EXPECT_EQ(r.dispatch(req("GET", "/health")).status, 200);  // probes need no key
  HttpRequest authed = req("GET", "/ok");
  authed.headers.emplace_back("authorization", "Bearer secret");
  EXPECT_EQ(r.dispatch(authed).status, 200);
  // The scheme is case-insensitive (RFC 7235); the key is not.
  auto with_auth = [](const std::string& value) {
    HttpRequest q = req("GET", "/ok");
    q.headers.emplace_back("Authorization", value);
    return q;
  };
  EXPECT_EQ(r.dispatch(with_auth("bearer secret")).status, 200);
  EXPECT_EQ(r.dispatch(with_auth("BEARER secret")).status, 200);
  EXPECT_EQ(r.dispatch(with_auth("BeArEr secret")).status, 200);
  EXPECT_EQ(r.dispatch(with_auth("bearer SECRET")).status, 401);
  EXPECT_EQ(r.dispatch(with_auth("Bearer wrong")).status, 401);
  EXPECT_EQ(r.dispatch(with_auth("Bearer secret2")).status, 401);
  EXPECT_EQ(r.dispatch(with_auth("Bearer")).status, 401);
  EXPECT_EQ(r.dispatch(with_auth("Basic secret")).status, 401);
  EXPECT_EQ(r.dispatch(with_auth("Bearersecret")).status, 401);
}

}  // namespace
}  // namespace tandem::server
