#include "server/http_wire.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace tandem::server {

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

std::string format_head(const ResponseHead& h) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", h.status, reason_phrase(h.status));
  if (h.framing != BodyFraming::kNone && !h.content_type.empty())
    out += fmt::format("Content-Type: {}\r\n", h.content_type);
  if (h.framing == BodyFraming::kLength)
    out += fmt::format("Content-Length: {}\r\n", h.content_length);
  else if (h.framing == BodyFraming::kChunked)
    out += "Transfer-Encoding: chunked\r\n";
  const bool keep = h.keep_alive && h.framing != BodyFraming::kClose;
  out += keep ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  // Clients that pool connections (Node's agents, undici) stop reusing one a little before this,
  // so they do not send on a connection the server is closing.
  if (keep && h.keep_alive_timeout_s > 0)
    out += fmt::format("Keep-Alive: timeout={}\r\n", h.keep_alive_timeout_s);
  for (const auto& [k, v] : h.headers) out += fmt::format("{}: {}\r\n", k, v);
  out += "\r\n";
  return out;
}

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  out += fmt::format("{:x}\r\n", data.size());
  out += data;
  out += "\r\n";
}

std::string error_response(int status, const std::string& message,
                           std::vector<std::pair<std::string, std::string>> headers) {
  const std::string body = dump_json(error_json(status, message));
  ResponseHead h;
  h.status = status;
  h.content_type = "application/json";
  h.headers = std::move(headers);
  h.content_length = body.size();
  h.keep_alive = false;
  return format_head(h) + body;
}

}  // namespace tandem::server
