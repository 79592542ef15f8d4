#include "server/http_server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "server/http_parser.h"
#include "server/http_wire.h"
#include "server/stream_pump.h"

namespace tandem::server {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long a streamed body waits for output before it checks that the client is still there.
constexpr milliseconds kPollInterval{100};
// How often the event thread looks for connections past their deadline.
constexpr milliseconds kTick{100};
// A connection closed after a refusal or an error keeps reading (and dropping) what the client
// still sends for this long, so its kernel does not answer with a reset that could destroy the
// response before the client read it.
constexpr milliseconds kLinger{2000};
constexpr size_t kMaxLingering = 256;
constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxReadPerEvent = 1 << 20;  // then the other connections get their turn
// File descriptors kept for everything but client connections (model files, logs, lingering
// closes) when the connection limit is derived from the open-file limit.
constexpr int64_t kFdReserve = 256 + kMaxLingering;

enum class Phase {
  kIdle,      // waiting for a request (idle timeout)
  kReading,   // a request is arriving (header, then body deadline)
  kHandling,  // a worker owns it
  kClosing,   // answered and shut down for writing; draining until the client closes
};

struct Conn {
  int fd = -1;
  Phase phase = Phase::kIdle;
  Clock::time_point deadline;
  HttpRequestParser parser;
  std::string in;  // bytes read but not yet parsed (a pipelined next request)
  bool body_started = false;
  ParsedRequest req;        // for the worker
  bool keep_alive = false;  // the worker's verdict: serve the next request
  bool answered = false;    // the worker sent the whole response
};

bool no_body_status(int status) {
  return (status >= 100 && status < 200) || status == 204 || status == 304;
}

// Sends without blocking as much of `data` as the socket takes (responses written by the event
// thread are small: they fit a fresh socket's buffer).
void send_now(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t k = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return;
    data.remove_prefix(static_cast<size_t>(k));
  }
}

// Whether the peer is still there: a closed or reset connection reads as end of file or an
// error; pending bytes (a pipelined request) or nothing to read mean it is.
bool client_alive(int fd) {
  char b;
  const ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return true;
  if (n == 0) return false;
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

std::string seconds(milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

int64_t default_max_connections() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  if (rl.rlim_cur != rl.rlim_max) {
    rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  const int64_t files =
      rl.rlim_cur == RLIM_INFINITY ? int64_t{1} << 20 : static_cast<int64_t>(rl.rlim_cur);
  return std::clamp<int64_t>(files - kFdReserve, 16, 8192);
}

struct HttpServer::Impl {
  std::shared_ptr<const Router> router;
  HttpOptions opt;
  HttpParserLimits limits;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;     // for the HttpServer's lifetime, so stop() may write it at any time
  int reserve_fd = -1;  // given up to accept-and-refuse when out of file descriptors
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> is_running{false};
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> open{0};  // connections not closing

  // The event thread's.
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  size_t lingering = 0;
  bool accept_paused = false;
  Clock::time_point accept_resume;
  std::vector<char> rbuf = std::vector<char>(kReadChunk);

  // Complete requests for the workers, and connections they are done with.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Conn*> ready;
  std::mutex back_mu;
  std::vector<Conn*> back;
  std::vector<std::thread> workers;
  std::unique_ptr<StreamPump> pump;

  // --- the event thread ------------------------------------------------------------------------

  bool loop() {
    std::vector<epoll_event> evs(256);
    Clock::time_point next_scan = Clock::now() + kTick;
    while (!stop_requested) {
      const int n = epoll_wait(epoll_fd, evs.data(), static_cast<int>(evs.size()),
                               static_cast<int>(kTick.count()));
      if (n < 0 && errno != EINTR) {
        log_error("HTTP server: epoll_wait: {}", std::strerror(errno));
        return false;
      }
      for (int i = 0; i < n; ++i) {
        const int fd = evs[i].data.fd;
        if (fd == listen_fd) {
          accept_all();
        } else if (fd == wake_fd) {
          take_back();
        } else if (auto it = conns.find(fd); it != conns.end()) {
          on_readable(*it->second);
        }
      }
      const Clock::time_point now = Clock::now();
      if (now >= next_scan) {
        expire(now);
        next_scan = now + kTick;
      }
    }
    return true;
  }

  void watch(int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
  }

  void accept_all() {
    for (;;) {
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) out_of_files();
        return;
      }
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (open >= opt.max_connections) {
        send_now(fd, error_response(503,
                                    fmt::format("Too many open connections (the limit is {}); "
                                                "retry shortly",
                                                opt.max_connections),
                                    {{"Retry-After", "1"}}));
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->phase = Phase::kReading;  // counted as open until close_gracefully moves it
        ++open;
        watch(fd);
        Conn& ref = *c;
        conns.emplace(fd, std::move(c));
        close_gracefully(ref);
        continue;
      }
      auto c = std::make_unique<Conn>();
      c->fd = fd;
      c->parser = HttpRequestParser(limits);
      c->deadline = Clock::now() + opt.idle_timeout;
      ++open;
      watch(fd);
      conns.emplace(fd, std::move(c));
    }
  }

  // No file descriptor left for accept: refuse one waiting client with the reserve descriptor,
  // and stop accepting for a moment (the listening socket would otherwise wake us in a loop).
  void out_of_files() {
    if (reserve_fd >= 0) {
      ::close(reserve_fd);
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        send_now(fd, error_response(503, "Out of file descriptors; retry shortly",
                                    {{"Retry-After", "1"}}));
        ::close(fd);
      }
      reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    log_warn("HTTP server: out of file descriptors with {} connections open (see ulimit -n)",
             open.load());
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    accept_paused = true;
    accept_resume = Clock::now() + kTick;
  }

  void on_readable(Conn& c) {
    if (c.phase == Phase::kHandling) return;  // a stale event: a worker owns it now
    bool eof = false;
    for (size_t total = 0; total < kMaxReadPerEvent;) {
      const ssize_t k = ::recv(c.fd, rbuf.data(), rbuf.size(), 0);
      if (k > 0) {
        total += static_cast<size_t>(k);
        if (c.phase != Phase::kClosing) c.in.append(rbuf.data(), static_cast<size_t>(k));
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      eof = true;  // closed or reset
      break;
    }
    if (c.phase != Phase::kClosing && !c.in.empty() && parse(c)) return;  // dispatched or closed
    if (eof) close_now(c);
  }

  // Feeds what arrived to the parser. Returns true when the connection left the event thread's
  // hands (dispatched to a worker, or closed).
  bool parse(Conn& c) {
    const Clock::time_point now = Clock::now();
    c.in.erase(0, c.parser.feed(c.in));
    // Empty lines between requests (some clients send one after a body) leave it idle; the
    // first byte of a request starts the header deadline.
    if (c.phase == Phase::kIdle && c.parser.state() != HttpRequestParser::State::kStart) {
      c.phase = Phase::kReading;
      c.deadline = now + opt.header_timeout;
    }
    switch (c.parser.state()) {
      case HttpRequestParser::State::kError:
        reject(c, c.parser.error_status(), c.parser.error_message());
        return true;
      case HttpRequestParser::State::kDone:
        dispatch(c);
        return true;
      case HttpRequestParser::State::kBody:
        if (!c.body_started) {
          c.body_started = true;
          c.deadline = now + opt.body_timeout;
          const ParsedRequest& r = c.parser.request();
          if (r.expect_continue && r.minor_version >= 1)
            send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
        }
        return false;
      default:
        return false;
    }
  }

  void dispatch(Conn& c) {
    c.req = c.parser.take();
    c.body_started = false;
    c.phase = Phase::kHandling;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
    {
      std::lock_guard<std::mutex> l(mu);
      ready.push_back(&c);
    }
    cv.notify_one();
  }

  // A JSON error, then the connection closes.
  void reject(Conn& c, int status, const std::string& message) {
    send_now(c.fd, error_response(status, message));
    close_gracefully(c);
  }

  // Shuts the connection down for writing and drains it until the client closes (or kLinger
  // passes), so that what was sent reaches the client.
  void close_gracefully(Conn& c) {
    if (c.phase == Phase::kClosing) return;
    ::shutdown(c.fd, SHUT_WR);
    if (lingering >= kMaxLingering) {
      close_now(c);
      return;
    }
    --open;
    ++lingering;
    c.phase = Phase::kClosing;
    c.deadline = Clock::now() + kLinger;
    c.in.clear();
    c.in.shrink_to_fit();
  }

  void close_now(Conn& c) {
    if (c.phase == Phase::kClosing) {
      --lingering;
    } else {
      --open;
    }
    ::close(c.fd);  // also leaves the epoll set
    conns.erase(c.fd);
  }

  void expire(Clock::time_point now) {
    if (accept_paused && now >= accept_resume) {
      accept_paused = false;
      watch(listen_fd);
    }
    std::vector<Conn*> late;
    for (auto& [fd, c] : conns)
      if (c->phase != Phase::kHandling && now >= c->deadline) late.push_back(c.get());
    for (Conn* c : late) {
      if (c->phase == Phase::kReading) {
        reject(*c, 408,
               c->body_started
                   ? fmt::format("Request body not received within {}", seconds(opt.body_timeout))
                   : fmt::format("Request headers not received within {}",
                                 seconds(opt.header_timeout)));
      } else {
        close_now(*c);  // idle, or done lingering
      }
    }
  }

  // Connections whose response the workers finished: the next request, or the close.
  void take_back() {
    uint64_t n;
    while (::read(wake_fd, &n, sizeof n) > 0) {
    }
    std::vector<Conn*> done;
    {
      std::lock_guard<std::mutex> l(back_mu);
      done.swap(back);
    }
    for (Conn* c : done) {
      watch(c->fd);
      if (!c->answered) {
        close_now(*c);
      } else if (!c->keep_alive) {
        c->phase = Phase::kReading;
        close_gracefully(*c);
      } else {
        c->phase = Phase::kIdle;
        c->deadline = Clock::now() + opt.idle_timeout;
        if (!c->in.empty()) parse(*c);  // a pipelined request already arrived
      }
    }
  }

  // --- the workers -----------------------------------------------------------------------------

  void worker() {
    for (;;) {
      Conn* c = nullptr;
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return stop_requested || !ready.empty(); });
        if (stop_requested) return;
        c = ready.front();
        ready.pop_front();
      }
      if (respond(*c)) hand_back(*c);
    }
  }

  // The response is complete (or failed): the event thread takes the connection back.
  void hand_back(Conn& c) {
    {
      std::lock_guard<std::mutex> l(back_mu);
      back.push_back(&c);
    }
    wake();
  }

  // Answers the request. Returns false when the stream pump took over the body (it hands the
  // connection back when the body ends).
  bool respond(Conn& c) {
    ParsedRequest& pr = c.req;
    HttpRequest r;
    r.method = std::move(pr.method);
    r.path = std::move(pr.path);
    r.body = std::move(pr.body);
    r.headers = std::move(pr.headers);
    const bool head_only = r.method == "HEAD";
    ++in_flight;
    HttpResponse out;
    try {
      out = router->dispatch(r);
    } catch (const std::exception& e) {  // dispatch answers errors itself; this is a last resort
      log_error("{} {}: {}", r.method, r.path, e.what());
      out = HttpResponse::error(500, fmt::format("Internal server error: {}", e.what()));
    }
    log_debug("{} {} -> {}", r.method, r.path, out.status);
    ResponseHead h;
    h.status = out.status;
    h.content_type = out.content_type;
    h.headers = std::move(out.headers);
    h.keep_alive = pr.keep_alive && !stop_requested;
    h.keep_alive_timeout_s = static_cast<int>(opt.idle_timeout.count() / 1000);
    bool answered = false;
    if (!out.stream) {
      h.framing = no_body_status(h.status) ? BodyFraming::kNone : BodyFraming::kLength;
      h.content_length = out.body.size();
      std::string msg = format_head(h);
      if (!head_only && h.framing == BodyFraming::kLength) msg += out.body;
      answered = write_all(c.fd, msg);
    } else {
      if (out.content_type == kEventStream) {
        h.headers.emplace_back("Cache-Control", "no-cache");
        h.headers.emplace_back("X-Accel-Buffering", "no");  // tell proxies not to buffer it
      }
      // HTTP/1.0 clients know no chunked encoding: the body ends with the connection.
      h.framing = pr.minor_version >= 1 ? BodyFraming::kChunked : BodyFraming::kClose;
      const bool chunked = h.framing == BodyFraming::kChunked;
      if (head_only) {
        out.stream->cancel();
        answered = write_all(c.fd, format_head(h));
      } else if (pump && !stop_requested) {
        const bool keep = h.keep_alive && chunked;
        if (pump->adopt(c.fd, format_head(h), out.stream, chunked, [this, &c, keep](bool sent) {
              --in_flight;
              c.answered = sent;
              c.keep_alive = sent && keep;
              hand_back(c);
            }))
          return false;
        answered = stream(c.fd, format_head(h), *out.stream, chunked);
      } else {
        answered = stream(c.fd, format_head(h), *out.stream, chunked);
      }
    }
    --in_flight;
    c.answered = answered;
    c.keep_alive = answered && h.keep_alive && h.framing != BodyFraming::kClose;
    return true;
  }

  // Writes the head, then the body as it is produced. Returns whether all of it was sent; if
  // not (the client went away, stopped reading, or the server stops), the body is cancelled.
  bool stream(int fd, std::string head, BodyStream& body, bool chunked) {
    std::string out = std::move(head);
    Clock::time_point checked = Clock::now();
    try {
      for (;;) {
        if (stop_requested) break;
        std::string piece;
        const bool more = body.next(piece, kPollInterval);
        if (chunked) {
          append_chunk(out, piece);
          if (!more) out += kLastChunk;
        } else {
          out += piece;
        }
        if (!out.empty() && !write_all(fd, out)) break;
        out.clear();
        if (!more) return true;
        // A client that left shows up as end of file while its request waits for the engine
        // or between tokens; a busy stream checks at most every poll interval.
        const Clock::time_point now = Clock::now();
        if (piece.empty() || now - checked >= kPollInterval) {
          if (!client_alive(fd)) break;
          checked = now;
        }
      }
    } catch (const std::exception& e) {
      log_error("streamed response: {}", e.what());
    }
    body.cancel();
    return false;
  }

  // Blocking write with a stall timeout; false if the client stopped reading, went away, or the
  // server stops.
  bool write_all(int fd, std::string_view data) {
    Clock::time_point stall_deadline = Clock::now() + opt.write_timeout;
    while (!data.empty()) {
      const ssize_t k = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
      if (k > 0) {
        data.remove_prefix(static_cast<size_t>(k));
        stall_deadline = Clock::now() + opt.write_timeout;
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (stop_requested || Clock::now() >= stall_deadline) return false;
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, static_cast<int>(kPollInterval.count()));
        continue;
      }
      return false;
    }
    return true;
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(wake_fd, &one, sizeof one);
  }
};

HttpServer::HttpServer(std::shared_ptr<const Router> router, HttpOptions opt)
    : impl_(std::make_unique<Impl>()) {
  impl_->router = std::move(router);
  impl_->opt = opt;
  impl_->opt.threads = std::max<int64_t>(opt.threads, 4);
  impl_->opt.max_connections = std::max<int64_t>(opt.max_connections, 1);
  impl_->limits.max_body_bytes = opt.max_request_bytes;
  impl_->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl_->wake_fd < 0) fail("HTTP server: cannot create an eventfd");
}

HttpServer::~HttpServer() {
  stop();
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  ::close(impl_->wake_fd);
}

int HttpServer::bind(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &found) != 0 || !found)
    fail("cannot listen on {}:{} (cannot resolve the host)", host, port);
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // A backlog of 1024: dozens of clients connecting at once must not be dropped.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) fail("cannot listen on {}:{} (address in use or not available)", host, port);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound =
      ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                       : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (impl_->listen_fd >= 0) ::close(impl_->listen_fd);
  impl_->listen_fd = fd;
  return bound;
}

bool HttpServer::run() {
  Impl& m = *impl_;
  if (m.listen_fd < 0) fail("HttpServer::run: bind() first");
  m.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (m.epoll_fd < 0) fail("HTTP server: cannot create its event loop");
  m.reserve_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  m.watch(m.listen_fd);
  m.watch(m.wake_fd);
  // One pump by default: on the H200 with the default model at 64 streams (~95k tokens/s) one
  // thread spends ~3 us per token and leaves the engine's decode steps as fast as in-process,
  // while four spent ~11 us per token (they contend in the kernel's socket wakeups) and made
  // each step ~40 us slower (docs/benchmarks.md, "HTTP against in-process").
  const int64_t pumps = m.opt.stream_threads > 0 ? m.opt.stream_threads : 1;
  m.pump = std::make_unique<StreamPump>(static_cast<int>(pumps), m.opt.write_timeout);
  for (int64_t i = 0; i < m.opt.threads; ++i)
    m.workers.emplace_back([&m] {
      name_this_thread("http-worker");
      m.worker();
    });
  m.is_running = true;
  const bool ok = m.loop();
  m.is_running = false;
  m.stop_requested = true;
  { std::lock_guard<std::mutex> l(m.mu); }
  m.cv.notify_all();
  for (std::thread& t : m.workers) t.join();
  m.workers.clear();
  m.pump->stop();  // cancels the streams still being written
  m.pump.reset();
  for (auto& [fd, c] : m.conns) ::close(fd);
  m.conns.clear();
  m.ready.clear();
  m.back.clear();
  m.open = 0;
  m.lingering = 0;
  ::close(m.listen_fd);
  m.listen_fd = -1;
  ::close(m.epoll_fd);
  m.epoll_fd = -1;
  if (m.reserve_fd >= 0) ::close(m.reserve_fd);
  m.reserve_fd = -1;
  return ok;
}

bool HttpServer::running() const {
  return impl_->is_running;
}

int64_t HttpServer::in_flight() const {
  return impl_->in_flight.load();
}

int64_t HttpServer::connections() const {
  return impl_->open.load();
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = Clock::now() + timeout;
  while (in_flight() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return true;
}

void HttpServer::stop() {
  impl_->stop_requested = true;
  { std::lock_guard<std::mutex> l(impl_->mu); }
  impl_->cv.notify_all();
  impl_->wake();
}

}  // namespace tandem::server
