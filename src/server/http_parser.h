// An incremental HTTP/1.0 and 1.1 request parser with bounded input: bytes go in as they arrive
// from the socket (any split, one byte at a time included), a whole request comes out. No
// sockets, no allocation beyond the request itself, so it is tested and fuzzed on its own.
//
// Bodies are framed by Content-Length or chunked transfer encoding (trailers read and dropped);
// a request with neither has no body. Everything a client controls is bounded: the request line
// and headers together, the header count, a chunk-size line, the body. A malformed request is an
// error with the status to answer (400, 413, 431, 501, 505) and a message; the connection is
// then closed, as the framing of anything after it is unknown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem::server {

struct HttpParserLimits {
  size_t max_header_bytes = 64 << 10;  // request line, headers and trailers together (431)
  size_t max_headers = 128;            // header fields (431)
  int64_t max_body_bytes = 32 << 20;   // 413
};

struct ParsedRequest {
  std::string method;     // as sent (methods are case-sensitive)
  std::string target;     // the request target as sent
  std::string path;       // the target's path, percent-decoded, without the query
  std::string query;      // after '?', as sent
  int minor_version = 1;  // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // values trimmed
  std::string body;
  bool keep_alive = true;        // HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive
  bool expect_continue = false;  // "Expect: 100-continue"
  bool chunked = false;          // the body came with chunked transfer encoding
  int64_t content_length = -1;   // -1: none given

  std::string header(std::string_view name) const;  // case-insensitive; "" when absent
};

class HttpRequestParser {
 public:
  enum class State {
    kStart,    // nothing of a request yet (empty lines at most)
    kHeaders,  // in the request line or headers
    kBody,     // headers complete, reading the body
    kDone,     // a whole request is ready: take() it
    kError,    // malformed: answer error_status() and close
  };

  explicit HttpRequestParser(HttpParserLimits limits = {}) : limits_(limits) {}

  // Consumes bytes of `data` and returns how many: all of them, unless the request completes
  // (or fails) before the end; the rest then belongs to the next request (pipelining).
  size_t feed(std::string_view data);

  State state() const { return state_; }
  // The headers are complete (the body, if any, may still be arriving); request() has them.
  bool headers_done() const { return state_ == State::kBody || state_ == State::kDone; }
  const ParsedRequest& request() const { return req_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_; }

  // The completed request; the parser is ready for the next one.
  ParsedRequest take();

 private:
  enum class Body { kNone, kLength, kChunkSize, kChunkData, kChunkDataEnd, kTrailers };
  // A chunk-size line with its extensions (the size itself is at most 16 hex digits).
  static constexpr size_t kMaxChunkLineBytes = 1024;

  bool fail(int status, std::string message);
  // Appends to line_ until '\n'; returns whether a whole line (without CR LF) is in line_.
  bool take_line(std::string_view data, size_t& i);
  bool on_request_line();
  bool on_header_line();
  bool on_headers_done();
  bool on_chunk_size_line();
  void finish();

  HttpParserLimits limits_;
  State state_ = State::kStart;
  Body body_ = Body::kNone;
  ParsedRequest req_;
  std::string line_;
  size_t header_bytes_ = 0;  // of the current budget (see take_line)
  int64_t remaining_ = 0;    // bytes left in the body (kLength) or the current chunk
  int error_status_ = 0;
  std::string error_;
};

// Percent-decodes a request path; false for a malformed escape or an encoded NUL.
bool percent_decode_path(std::string_view in, std::string& out);

}  // namespace tandem::server
