// How responses look on the wire: the status line and headers, chunk framing, and the JSON error
// responses the transport writes by itself (malformed requests, deadlines, the connection
// limit). Pure functions; the sockets are http_server.cpp's.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::server {

// How a response body is delimited.
enum class BodyFraming {
  kLength,   // Content-Length
  kChunked,  // Transfer-Encoding: chunked (HTTP/1.1 clients)
  kClose,    // the connection's end (HTTP/1.0 clients: they do not know chunked encoding)
  kNone,     // no body at all (1xx, 204, 304)
};

struct ResponseHead {
  int status = 200;
  std::string content_type;  // none when empty
  std::vector<std::pair<std::string, std::string>> headers;
  BodyFraming framing = BodyFraming::kLength;
  size_t content_length = 0;  // kLength
  bool keep_alive = true;
  int keep_alive_timeout_s = 0;  // advertised in "Keep-Alive: timeout=N" when positive
};

const char* reason_phrase(int status);

// The status line and header block, ending with the empty line.
std::string format_head(const ResponseHead& h);

// One chunk of a chunked body; empty data gives nothing (an empty chunk would end the body).
void append_chunk(std::string& out, std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

// A whole response with a JSON error body and "Connection: close", plus extra headers.
std::string error_response(int status, const std::string& message,
                           std::vector<std::pair<std::string, std::string>> headers = {});

}  // namespace tandem::server
