// Writes streamed response bodies (SSE, long generations) for many connections from a few
// threads, driven by the bodies themselves: a body that can say when it has more
// (BodyStream::set_ready_callback) is served by one of `threads` pump threads, each with its
// own epoll set, instead of holding a worker thread that blocks in next() for its whole life.
//
// Why: with one blocked thread per stream, every decode step woke one thread per running
// request (a futex wake from the engine's thread, a context switch, then a send), and on the
// H200 host that per-token cost slowed the engine's own step by up to 2x at 64 streams
// (docs/benchmarks.md, "HTTP against in-process"). Here the engine's per-step notifications only
// queue stream ids; a pump thread wakes once per step, drains every ready body without waiting,
// and writes without blocking. A socket that cannot take more keeps its bytes pending (the body
// is not read further until they leave: backpressure) and is watched for EPOLLOUT; one that
// makes no progress for write_timeout, a client that hangs up (EPOLLRDHUP, EPOLLHUP, a send
// error) or stop() cancel the body.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/http_types.h"

namespace tandem::server {

class StreamPump {
 public:
  // Called once per adopted stream, on a pump thread, after the pump let go of the socket:
  // sent_all is whether the whole body was written (false: cancelled or failed).
  using Done = std::function<void(bool sent_all)>;

  StreamPump(int threads, std::chrono::milliseconds write_timeout);
  ~StreamPump();  // stop()
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // Takes over writing `head`, then `body` (chunked framing, or raw until the close), to the
  // non-blocking socket fd. False when the body cannot notify: nothing was taken, and the caller
  // streams it itself.
  bool adopt(int fd, std::string head, std::shared_ptr<BodyStream> body, bool chunked, Done done);
  // Cancels every stream (their Done(false)) and joins the threads. Idempotent.
  void stop();

 private:
  class Shard;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace tandem::server
