#include "server/http_types.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <strings.h>

#include <cctype>
#include <string_view>

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

void Router::add(const std::string& method, const std::string& path, Handler h,
                 bool needs_api_key) {
  routes_.push_back({method, path, std::move(h), needs_api_key});
}

bool Router::Route::matches(const std::string& p) const {
  if (!path.empty() && path.back() == '*')
    return p.compare(0, path.size() - 1, path, 0, path.size() - 1) == 0;
  return p == path;
}

namespace {

std::string lower_trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Header values quoted in messages are cut short; they come from the client.
std::string quote_header(const std::string& v) {
  return v.size() > kMaxQuotedValueChars ? v.substr(0, kMaxQuotedValueChars) + "..." : v;
}

// `Authorization: Bearer <key>`: the scheme is case-insensitive (RFC 7235 section 2.1), the
// key is compared exactly.
bool bearer_matches(const std::string& authorization, const std::string& key) {
  constexpr std::string_view kScheme = "bearer ";
  return authorization.size() == kScheme.size() + key.size() &&
         strncasecmp(authorization.c_str(), kScheme.data(), kScheme.size()) == 0 &&
         authorization.compare(kScheme.size(), std::string::npos, key) == 0;
}

}  // namespace

std::optional<std::string> content_type_error(const std::string& content_type) {
  const std::string_view ct(content_type);
  if (lower_trimmed(ct.substr(0, ct.find(';'))) == "application/json") return std::nullopt;
  if (content_type.empty())
    return std::string(
        "Unsupported Content-Type: none given; send the body as JSON with 'Content-Type: "
        "application/json'");
  return fmt::format(
      "Unsupported Content-Type '{}'; send the body as JSON with 'Content-Type: "
      "application/json'",
      quote_header(content_type));
}

bool Router::origin_allowed(const std::string& origin) const {
  if (origin.empty()) return false;
  for (const std::string& o : allowed_origins_)
    if (o == "*" || o == origin) return true;
  return false;
}

HttpResponse Router::dispatch(const HttpRequest& req) const {
  HttpResponse r = route(req);
  const std::string origin = req.header("Origin");
  if (origin_allowed(origin)) r.headers.emplace_back("Access-Control-Allow-Origin", origin);
  // With an allow-list the answer depends on the Origin header; caches must know.
  if (!allowed_origins_.empty()) r.headers.emplace_back("Vary", "Origin");
  return r;
}

HttpResponse Router::route(const HttpRequest& req) const {
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const Route* found = nullptr;
  std::vector<std::string> allowed;
  for (const Route& r : routes_) {
    if (!r.matches(req.path)) continue;
    allowed.push_back(r.method);
    if (r.method == method && !found) found = &r;
  }
  if (method == "OPTIONS" && !allowed.empty()) {
    // A CORS preflight gets the Access-Control-Allow-* headers only from an allowed origin
    // (dispatch adds Allow-Origin); a browser refuses the cross-origin request otherwise.
    HttpResponse r = HttpResponse::text("", 204);
    const std::string methods = fmt::format("{}", fmt::join(allowed, ", "));
    r.headers.emplace_back("Allow", methods);
    if (origin_allowed(req.header("Origin"))) {
      r.headers.emplace_back("Access-Control-Allow-Methods", methods);
      const std::string asked = req.header("Access-Control-Request-Headers");
      r.headers.emplace_back("Access-Control-Allow-Headers", asked.empty() ? "*" : asked);
      r.headers.emplace_back("Access-Control-Max-Age", "600");
    }
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
  if (!api_key_.empty() && found->needs_api_key && req.path.rfind("/health", 0) != 0 &&
      req.path != "/metrics" && !bearer_matches(req.header("Authorization"), api_key_))
    return HttpResponse::error(401, "Missing or invalid API key (Authorization: Bearer <key>)");
  // Bodies are JSON. Requiring the type keeps browsers from sending one cross-origin without a
  // preflight (text/plain and form bodies are "simple" requests); an empty body (`curl -X POST
  // .../flush_cache`) needs none.
  if (!req.body.empty()) {
    if (auto err = content_type_error(req.header("Content-Type")))
      return HttpResponse::error(415, *err);
  }
  try {
    return found->handler(req);
  } catch (const ApiError& e) {
    HttpResponse r = HttpResponse::error(e.status(), e.what(), e.param());
    // 503s (loading, shutting down, queue full) are temporary: say when to come back.
    if (e.status() == 503) r.headers.emplace_back("Retry-After", "1");
    return r;
  } catch (const InvalidArgument& e) {
    return HttpResponse::error(400, e.what());
  } catch (const std::exception& e) {
    log_error("{} {}: {}", req.method, req.path, e.what());
    return HttpResponse::error(500, fmt::format("Internal server error: {}", e.what()));
  }
}

}  // namespace tandem::server
