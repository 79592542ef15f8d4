#include "bench_client/http.h"

#include <httplib.h>

#include <cstdlib>

#include "core/error.h"

namespace tandem::bench {

namespace {

// Long enough for any generation: a read timeout would otherwise fail slow requests under load.
constexpr time_t kStreamTimeoutS = 6 * 3600;

std::unique_ptr<httplib::Client> make_client(const Endpoint& ep, double timeout_s) {
  auto cli = std::make_unique<httplib::Client>(ep.scheme_host_port);
  const auto sec = static_cast<time_t>(timeout_s);
  const auto usec = static_cast<time_t>((timeout_s - static_cast<double>(sec)) * 1e6);
  // Connecting can wait behind a full accept backlog when many requests start at once.
  cli->set_connection_timeout(std::max<time_t>(sec, 60), 0);
  cli->set_read_timeout(sec, usec);
  cli->set_write_timeout(sec, usec);
  return cli;
}

httplib::Headers auth_headers() {
  // As bench_serving: OPENAI_API_KEY as a bearer token, else API_KEY as given.
  httplib::Headers h;
  if (const char* k = std::getenv("OPENAI_API_KEY"); k && *k)
    h.emplace("Authorization", std::string("Bearer ") + k);
  else if (const char* k2 = std::getenv("API_KEY"); k2 && *k2)
    h.emplace("Authorization", k2);
  return h;
}

std::string transport_error(const Endpoint& ep, const std::string& path, httplib::Error e) {
  return fmt::format("{}{}{}: {} error", ep.scheme_host_port, ep.path_prefix, path,
                     httplib::to_string(e));
}

HttpResult from_result(const Endpoint& ep, const std::string& path, const httplib::Result& r) {
  HttpResult out;
  if (!r) {
    out.error = transport_error(ep, path, r.error());
    return out;
  }
  out.status = r->status;
  out.body = r->body;
  return out;
}

}  // namespace

std::string HttpResult::describe() const {
  if (!error.empty()) return error;
  std::string b = body.size() > 500 ? body.substr(0, 500) + "..." : body;
  return "HTTP " + std::to_string(status) + (b.empty() ? "" : ": " + b);
}

Endpoint parse_base_url(const std::string& url) {
  std::string rest = url;
  std::string scheme = "http";
  if (const size_t p = rest.find("://"); p != std::string::npos) {
    scheme = rest.substr(0, p);
    rest = rest.substr(p + 3);
  }
  if (scheme != "http" && scheme != "https")
    throw InvalidArgument("base URL '" + url + "': the scheme must be http or https");
  const size_t slash = rest.find('/');
  Endpoint ep;
  ep.scheme_host_port = scheme + "://" + rest.substr(0, slash);
  if (slash != std::string::npos) ep.path_prefix = rest.substr(slash);
  while (!ep.path_prefix.empty() && ep.path_prefix.back() == '/') ep.path_prefix.pop_back();
  if (rest.substr(0, slash).empty()) throw InvalidArgument("base URL '" + url + "' has no host");
  return ep;
}

HttpResult http_get(const Endpoint& ep, const std::string& path, double timeout_s) {
  auto cli = make_client(ep, timeout_s);
  return from_result(ep, path, cli->Get(ep.path_prefix + path, auth_headers()));
}

HttpResult http_post_json(const Endpoint& ep, const std::string& path, const std::string& body,
                          double timeout_s) {
  auto cli = make_client(ep, timeout_s);
  return from_result(ep, path,
                     cli->Post(ep.path_prefix + path, auth_headers(), body, "application/json"));
}

HttpResult http_post_stream(const Endpoint& ep, const std::string& path, const std::string& body,
                            const std::function<void(std::string_view)>& on_data) {
  // A fresh connection per request: connecting to a local server costs microseconds, and no
  // request can fail on a kept-alive socket the server has closed meanwhile.
  auto cli = make_client(ep, static_cast<double>(kStreamTimeoutS));
  httplib::Request req;
  req.method = "POST";
  req.path = ep.path_prefix + path;
  req.headers = auth_headers();
  req.headers.emplace("Content-Type", "application/json");
  req.headers.emplace("Accept", "text/event-stream, application/json");
  req.body = body;
  HttpResult out;
  req.response_handler = [&](const httplib::Response& r) {
    out.status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (out.status >= 200 && out.status < 300)
      on_data(std::string_view(data, n));
    else
      out.body.append(data, n);
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  if (!cli->send(req, res, err)) {
    out.error = transport_error(ep, path, err);
    if (out.status == 0) out.status = res.status > 0 ? res.status : 0;
  } else {
    out.status = res.status;
  }
  return out;
}

}  // namespace tandem::bench
