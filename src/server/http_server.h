// The HTTP transport (cpp-httplib): a thread pool sized for many concurrent streams, request
// body limits, TCP_NODELAY so small SSE events leave at once, and streamed bodies that notice a
// client that went away (the body's cancel() runs, which aborts its engine requests).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace tandem::server {

struct HttpOptions {
  int64_t threads = 64;
  int64_t max_request_bytes = 32 << 20;
  int64_t keep_alive_timeout_s = 5;
};

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
  // Waits until no request is in flight or the timeout passes; true if idle.
  bool wait_idle(std::chrono::milliseconds timeout) const;
  // Stops at once: open streams are cut (wait_idle first for a graceful stop).
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::server
