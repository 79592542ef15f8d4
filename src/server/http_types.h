// The HTTP surface the routes are written against, independent of the HTTP library: a request,
// a response whose body is either a string or a BodyStream that produces it piece by piece
// (SSE, and long non-streamed generations, so a client that leaves can be noticed), and a
// router that answers 404/405/401 with OpenAI-style JSON errors.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/json_fields.h"

namespace tandem::server {

// The SSE content type; such responses also get "Cache-Control: no-cache" and
// "X-Accel-Buffering: no" so proxies pass events on at once.
inline constexpr const char* kEventStream = "text/event-stream";

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string header(const std::string& name) const;  // case-insensitive; "" when absent
};

class BodyStream {
 public:
  virtual ~BodyStream() = default;
  // Appends the next bytes of the body to `out`, waiting at most `wait` for them. Returns false
  // once the body is complete (the last bytes may come with that call).
  virtual bool next(std::string& out, std::chrono::milliseconds wait) = 0;
  // The client went away before the body was complete.
  virtual void cancel() = 0;
  // A body that can tell when next() has more calls `ready` then (from any thread; it must only
  // queue work) and returns true; an empty function stops the calls. Such bodies are written by
  // the stream pump (stream_pump.h) with next(out, 0); others (false) by a worker that waits in
  // next().
  virtual bool set_ready_callback(std::function<void()> ready) {
    (void)ready;
    return false;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::shared_ptr<BodyStream> stream;  // when set, replaces body (chunked; HTTP/1.0: until close)
  std::vector<std::pair<std::string, std::string>> headers;

  static HttpResponse json(const Json& j, int status = 200);
  static HttpResponse text(std::string body, int status = 200);
  static HttpResponse error(int status, const std::string& message, const std::string& param = "");
};

using Handler = std::function<HttpResponse(const HttpRequest&)>;

class Router {
 public:
  // A path ending in '*' matches every path with that prefix. needs_api_key false: the route
  // answers without the API key (the web page, which holds no data).
  void add(const std::string& method, const std::string& path, Handler h,
           bool needs_api_key = true);
  // Routes except /health*, /metrics and those added without needs_api_key need
  // "Authorization: Bearer <key>" (SGLang's --api-key).
  void set_api_key(std::string key) { api_key_ = std::move(key); }
  // Origins that browsers may call from (CORS); empty (the default): none. "*" allows any.
  // An allowed Origin is echoed in Access-Control-Allow-Origin with "Vary: Origin".
  void set_allowed_origins(std::vector<std::string> origins) {
    allowed_origins_ = std::move(origins);
  }
  bool origin_allowed(const std::string& origin) const;
  // Never throws: handler exceptions become JSON errors (ApiError keeps its status,
  // tandem::InvalidArgument is a 400, anything else a 500). A non-empty body must be sent as
  // "Content-Type: application/json" (415 otherwise).
  HttpResponse dispatch(const HttpRequest& req) const;

 private:
  struct Route {
    std::string method, path;
    Handler handler;
    bool needs_api_key = true;
    bool matches(const std::string& p) const;
  };
  HttpResponse route(const HttpRequest& req) const;
  std::vector<Route> routes_;
  std::string api_key_;
  std::vector<std::string> allowed_origins_;
};

// The 415 message for a request body whose Content-Type is not application/json (parameters
// such as "; charset=utf-8" allowed, case-insensitive); nullopt when the type is acceptable.
std::optional<std::string> content_type_error(const std::string& content_type);

}  // namespace tandem::server
