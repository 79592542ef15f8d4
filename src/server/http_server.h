// The HTTP/1.1 transport: one event-driven thread (epoll) owns every connection while it is idle
// or while its request arrives, and hands only complete requests to a pool of worker threads,
// which run the router and write the response. A streamed body whose source can notify (every
// generation) is then handed to the stream pump, a few threads that write all streams as tokens
// arrive; other streamed bodies hold their worker until they end.
// So an idle keep-alive connection or a client that sends slowly costs a socket and a few hundred
// bytes, never a thread, and each is cut off by a deadline:
//   - idle: no byte of a request for idle_timeout (after accept or after the last response),
//     closed quietly;
//   - header deadline: the request line and headers must be complete within header_timeout of
//     their first byte, and the body within body_timeout of the headers, whatever the pace of
//     the bytes; past either the client gets 408 and the connection closes.
// Beyond max_connections open connections a new one gets a 503 JSON error with Retry-After and
// "Connection: close", written by the event thread without waiting for its request.
//
// Requests are framed by http_parser.h (bounded headers, Content-Length or chunked bodies up to
// max_request_bytes, 413 beyond); "Expect: 100-continue" is answered. Responses to HTTP/1.1
// clients stream with chunked encoding; HTTP/1.0 clients get a body delimited by the connection's
// close instead. Streamed bodies notice a client that went away (the body's cancel() runs, which
// aborts its engine requests). TCP_NODELAY is on so small SSE events leave at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace tandem::server {

struct HttpOptions {
  int64_t threads = 64;  // workers: requests being handled (streams only until the pump takes them)
  // Threads that write streamed bodies for every connection (stream_pump.h); 0: one.
  int64_t stream_threads = 0;
  int64_t max_request_bytes = 32 << 20;
  int64_t max_connections = 1024;
  std::chrono::milliseconds idle_timeout{5000};
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};
  // A response write that makes no progress for this long (a client that stopped reading)
  // ends the response and the connection.
  std::chrono::milliseconds write_timeout{30000};
};

// The connection limit for `--max-connections 0`: 8192, or less when the process's open-file
// limit is lower (the limit minus a reserve for the model's files, logs and refusals). Raises the
// soft open-file limit to the hard one first.
int64_t default_max_connections();

class HttpServer {
 public:
  HttpServer(std::shared_ptr<const Router> router, HttpOptions opt);
  ~HttpServer();

  // Binds the listening socket (port 0: any free port). Throws tandem::Error when it cannot.
  int bind(const std::string& host, int port);
  // Serves until stop(); returns false if the server failed.
  bool run();
  bool running() const;  // run() has started accepting connections
  // Requests being handled, streamed bodies included until their last byte is sent.
  int64_t in_flight() const;
  // Open connections (idle, reading, or being answered).
  int64_t connections() const;
  // Waits until no request is in flight or the timeout passes; true if idle.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  // Stops at once: open streams are cut (wait_idle first for a graceful stop).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
