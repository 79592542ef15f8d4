// A thin layer over cpp-httplib's client: where the server is, plain GET/POST, and a POST whose
// body is handed over piece by piece as it arrives (for SSE streams).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tandem::bench {

struct Endpoint {
  std::string scheme_host_port;  // "http://127.0.0.1:30000" (Debian's cpp-httplib has TLS)
  std::string path_prefix;       // "" or e.g. "/sglang" when the base URL has a path
};

// "http[s]://host:port[/prefix]"; a missing scheme means http. Throws InvalidArgument otherwise.
Endpoint parse_base_url(const std::string& url);

struct HttpResult {
  int status = 0;     // 0: no response (error says why)
  std::string body;   // the whole body (for streamed POSTs: only a non-2xx body)
  std::string error;  // transport error, empty when a response arrived
  bool ok() const { return error.empty() && status >= 200 && status < 300; }
  std::string describe() const;  // "HTTP 400: <body>" or the transport error
};

HttpResult http_get(const Endpoint& ep, const std::string& path, double timeout_s = 30);
HttpResult http_post_json(const Endpoint& ep, const std::string& path, const std::string& body,
                          double timeout_s = 30);
// Hands each piece of a 2xx body to on_data as it arrives; a non-2xx body is collected into
// the result instead.
HttpResult http_post_stream(const Endpoint& ep, const std::string& path, const std::string& body,
                            const std::function<void(std::string_view)>& on_data);

}  // namespace tandem::bench
