#include "server/http_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <strings.h>

#include "core/error.h"
#include "core/log.h"

namespace tandem::server {

std::string HttpRequest::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) return v;
  return {};
}

HttpResponse HttpResponse::json(const Json& j, int status) {
  HttpResponse r;
  r.status = status;
  r.body = dump_json(j);
  return r;
}

HttpResponse HttpResponse::text(std::string body, int status) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::error(int status, const std::string& message, const std::string& param) {
  return json(error_json(status, message, param), status);
}

void Router::add(const std::string& method, const std::string& path, Handler h) {
  routes_.push_back({method, path, std::move(h)});
}

bool Router::Route::matches(const std::string& p) const {
  if (!path.empty() && path.back() == '*')
    return p.compare(0, path.size() - 1, path, 0, path.size() - 1) == 0;
  return p == path;
}

HttpResponse Router::dispatch(const HttpRequest& req) const {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const Route* found = nullptr;
  std::vector<std::string> allowed;
  for (const Route& r : routes_) {
    if (!r.matches(req.path)) continue;
    allowed.push_back(r.method);
    if (r.method == method && !found) found = &r;
  }
  if (method == "OPTIONS" && !allowed.empty()) {
    // CORS preflight, as SGLang's permissive CORS middleware answers it.
    HttpResponse r = HttpResponse::text("", 204);
    r.headers.emplace_back("Access-Control-Allow-Methods",
                           fmt::format("{}", fmt::join(allowed, ", ")));
    r.headers.emplace_back("Access-Control-Allow-Headers", "*");
    return r;
  }
  if (!found) {
    if (allowed.empty())
      return HttpResponse::error(404, fmt::format("Route {} {} not found", req.method, req.path));
    HttpResponse r =
        HttpResponse::error(405, fmt::format("Method {} not allowed for {} (allowed: {})",
                                             req.method, req.path, fmt::join(allowed, ", ")));
    r.headers.emplace_back("Allow", fmt::format("{}", fmt::join(allowed, ", ")));
    return r;
  }
  if (!api_key_.empty() && req.path.rfind("/health", 0) != 0 && req.path != "/metrics" &&
      req.header("Authorization") != "Bearer " + api_key_)
    return HttpResponse::error(401, "Missing or invalid API key (Authorization: Bearer <key>)");
  try {
    return found->handler(req);
  } catch (const ApiError& e) {
    return HttpResponse::error(e.status(), e.what(), e.param());
  } catch (const InvalidArgument& e) {
    return HttpResponse::error(400, e.what());
  } catch (const std::exception& e) {
    log_error("{} {}: {}", req.method, req.path, e.what());
    return HttpResponse::error(500, fmt::format("Internal server error: {}", e.what()));
  }
}

}  // namespace tandem::server
