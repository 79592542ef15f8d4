// The HTTP transport over real sockets, with a test router (no model): keep-alive and
// pipelining, chunked request bodies, 100-continue, HEAD, streamed bodies (chunked for HTTP/1.1,
// close-delimited for HTTP/1.0), the refusals (400, 413), the idle, header and body deadlines,
// the connection limit, clients that disconnect or stop reading, stop(), and the key property:
// idle and slow connections hold no worker, so a server with 4 workers still answers at once;
// nor do streamed bodies that notify (the stream pump writes them).
#include "server/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tandem::server {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A body of `pieces` pieces, one every `gap`; -1 pieces: endless. Records its cancellation.
// With notify, a producer thread makes the pieces and calls the ready callback, so the server's
// stream pump writes it (next() never waits then); without, next() sleeps (a worker writes it).
class TestStream : public BodyStream {
 public:
  TestStream(int pieces, milliseconds gap, size_t piece_bytes,
             std::shared_ptr<std::atomic<int>> cancels, bool notify = false)
      : pieces_(pieces),
        gap_(gap),
        piece_bytes_(piece_bytes),
        cancels_(std::move(cancels)),
        notify_(notify) {
    if (notify_) producer_ = std::thread([this] { produce(); });
  }
  ~TestStream() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (producer_.joinable()) producer_.join();
  }
  bool next(std::string& out, milliseconds wait) override {
    if (!notify_) {
      std::this_thread::sleep_for(std::min(wait, gap_));
      if (pieces_ >= 0 && sent_ >= pieces_) return false;
      out += piece(sent_);
      ++sent_;
      return pieces_ < 0 || sent_ < pieces_;
    }
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, wait, [&] { return !ready_.empty() || produced_all_; });
    out += ready_;
    ready_.clear();
    return !produced_all_;
  }
  void cancel() override {
    ++*cancels_;
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  bool set_ready_callback(std::function<void()> ready) override {
    if (!notify_) return false;
    std::lock_guard<std::mutex> g(mu_);
    callback_ = std::move(ready);
    return true;
  }

 private:
  std::string piece(int i) const {
    return piece_bytes_ ? std::string(piece_bytes_, 'x') : "piece " + std::to_string(i) + "\n";
  }
  void produce() {
    for (int i = 0; pieces_ < 0 || i < pieces_; ++i) {
      std::function<void()> call;
      {
        std::unique_lock<std::mutex> lk(mu_);
        // A flood keeps at most 4 pieces waiting (a body's own backpressure).
        cv_.wait_for(lk, gap_, [&] { return stop_; });
        if (stop_) return;
        if (ready_.size() > 4 * piece(0).size()) {
          --i;
          continue;
        }
        ready_ += piece(i);
        produced_all_ = pieces_ >= 0 && i + 1 == pieces_;
        call = callback_;
      }
      cv_.notify_all();
      if (call) call();
    }
  }

  int pieces_;
  milliseconds gap_;
  size_t piece_bytes_;
  int sent_ = 0;
  std::shared_ptr<std::atomic<int>> cancels_;
  bool notify_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string ready_;
  bool produced_all_ = false, stop_ = false;
  std::function<void()> callback_;
  std::thread producer_;
};

struct TestServer {
  std::shared_ptr<std::atomic<int>> cancels = std::make_shared<std::atomic<int>>(0);
  std::unique_ptr<HttpServer> http;
  std::thread thread;
  int port = 0;

  explicit TestServer(HttpOptions opt, bool notify = false) {
    auto r = std::make_shared<Router>();
    r->add("GET", "/hello", [](const HttpRequest&) { return HttpResponse::text("hi"); });
    r->add("POST", "/echo", [](const HttpRequest& q) { return HttpResponse::text(q.body); });
    auto c = cancels;
    r->add("GET", "/stream", [c, notify](const HttpRequest&) {
      HttpResponse res;
      res.content_type = kEventStream;
      res.stream = std::make_shared<TestStream>(3, milliseconds(5), 0, c, notify);
      return res;
    });
    r->add("GET", "/endless", [c, notify](const HttpRequest&) {
      HttpResponse res;
      res.content_type = kEventStream;
      res.stream = std::make_shared<TestStream>(-1, milliseconds(20), 0, c, notify);
      return res;
    });
    r->add("GET", "/flood", [c, notify](const HttpRequest&) {  // 1 MiB pieces, fast
      HttpResponse res;
      res.content_type = "application/octet-stream";
      res.stream = std::make_shared<TestStream>(-1, milliseconds(0), 1 << 20, c, notify);
      return res;
    });
    http = std::make_unique<HttpServer>(r, opt);
    port = http->bind("127.0.0.1", 0);
    thread = std::thread([this] { http->run(); });
    while (!http->running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~TestServer() {
    http->stop();
    thread.join();
  }
};

HttpOptions options() {
  HttpOptions o;
  o.threads = 4;
  o.max_request_bytes = 1000;
  return o;
}

// A raw client socket.
struct Client {
  int fd = -1;
  explicit Client(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~Client() {
    if (fd >= 0) ::close(fd);
  }
  void send(const std::string& s) const {
    ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  // Reads what arrives within `timeout`; stops early once `until` appears, or at end of file
  // (then closed is set).
  std::string read(milliseconds timeout, const std::string& until = "") {
    std::string out;
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (!until.empty() && out.find(until) != std::string::npos) break;
      pollfd p{fd, POLLIN, 0};
      const int left =
          static_cast<int>(std::chrono::duration_cast<milliseconds>(end - Clock::now()).count());
      if (::poll(&p, 1, std::max(left, 0)) <= 0) break;
      char buf[65536];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) {
        closed = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // One whole response of a keep-alive exchange: the head and a Content-Length body.
  std::string response(milliseconds timeout = milliseconds(5000)) {
    std::string r = read(timeout, "\r\n\r\n");
    const size_t head_end = r.find("\r\n\r\n");
    if (head_end == std::string::npos) return r;
    const size_t cl = r.find("Content-Length: ");
    if (cl == std::string::npos || cl > head_end) return r;
    const size_t want = head_end + 4 + std::stoul(r.substr(cl + 16));
    while (r.size() < want && !closed) {
      const std::string more = read(timeout, "");
      if (more.empty()) break;
      r += more;
    }
    return r;
  }
  bool closed = false;
};

std::string get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n";
}

TEST(HttpServer, KeepAliveAndPipelining) {
  TestServer s(options());
  Client c(s.port);
  c.send(get("/hello"));
  const std::string r1 = c.response();
  EXPECT_EQ(r1.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r1;
  EXPECT_NE(r1.find("Content-Length: 2\r\n"), std::string::npos);
  EXPECT_NE(r1.find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_NE(r1.find("Keep-Alive: timeout=5\r\n"), std::string::npos);
  EXPECT_EQ(r1.substr(r1.size() - 2), "hi");
  // Two requests in one write: two responses, in order, on the same connection.
  c.send(
      "POST /echo HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n"
      "firstGET /hello HTTP/1.1\r\n\r\n");
  std::string both = c.read(milliseconds(3000), "\r\n\r\nhi");
  EXPECT_NE(both.find("\r\n\r\nfirst"), std::string::npos) << both;
  EXPECT_NE(both.find("\r\n\r\nhi"), std::string::npos) << both;
  c.send(get("/hello", "Connection: close\r\n"));
  const std::string last = c.read(milliseconds(3000));
  EXPECT_NE(last.find("Connection: close\r\n"), std::string::npos) << last;
  EXPECT_TRUE(c.closed);
}

TEST(HttpServer, ChunkedRequestBodyAndExpectContinue) {
  TestServer s(options());
  Client c(s.port);
  c.send(
      "POST /echo HTTP/1.1\r\nContent-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4;x=y\r\n\": 1\r\n1\r\n}\r\n0\r\n\r\n");
  const std::string r = c.response();
  EXPECT_EQ(r.substr(r.size() - 8), "{\"a\": 1}") << r;

  Client e(s.port);
  e.send(
      "POST /echo HTTP/1.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
      "Content-Length: 2\r\n\r\n");
  EXPECT_EQ(e.read(milliseconds(3000), "\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  e.send("{}");
  const std::string r2 = e.response();
  EXPECT_EQ(r2.rfind("HTTP/1.1 200 OK", 0), 0u) << r2;
  EXPECT_EQ(r2.substr(r2.size() - 2), "{}");
}

TEST(HttpServer, RefusalsAreJsonAndClose) {
  TestServer s(options());
  {
    Client c(s.port);  // over max_request_bytes (1000): refused before the body is sent
    c.send(
        "POST /echo HTTP/1.1\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
        "Content-Length: 5000\r\n\r\n");
    const std::string r = c.read(milliseconds(3000));
    EXPECT_EQ(r.rfind("HTTP/1.1 413 ", 0), 0u) << r;
    EXPECT_NE(r.find("\"code\":413"), std::string::npos) << r;
    EXPECT_NE(r.find("Connection: close"), std::string::npos);
    EXPECT_TRUE(c.closed);
  }
  {
    Client c(s.port);  // chunked, over the limit
    c.send(
        "POST /echo HTTP/1.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked"
        "\r\n\r\n400\r\n" +
        std::string(1024, 'a') + "\r\n400\r\n");
    const std::string r = c.read(milliseconds(3000));
    EXPECT_EQ(r.rfind("HTTP/1.1 413 ", 0), 0u) << r;
    EXPECT_TRUE(c.closed);
  }
  {
    Client c(s.port);
    c.send("NOT A REQUEST\r\n\r\n");
    const std::string r = c.read(milliseconds(3000));
    EXPECT_EQ(r.rfind("HTTP/1.1 400 ", 0), 0u) << r;
    EXPECT_NE(r.find("Malformed HTTP version"), std::string::npos) << r;
    EXPECT_TRUE(c.closed);
  }
  {
    Client c(s.port);  // the router still answers unknown routes
    c.send(get("/nope"));
    EXPECT_EQ(c.response().rfind("HTTP/1.1 404 ", 0), 0u);
  }
}

TEST(HttpServer, HeadHasNoBody) {
  TestServer s(options());
  Client c(s.port);
  c.send("HEAD /hello HTTP/1.1\r\n\r\n");
  const std::string r = c.read(milliseconds(500));
  EXPECT_NE(r.find("Content-Length: 2\r\n"), std::string::npos) << r;
  EXPECT_EQ(r.substr(r.size() - 4), "\r\n\r\n") << r;
  c.send(get("/hello"));  // and the connection goes on
  EXPECT_EQ(c.response().substr(0, 15), "HTTP/1.1 200 OK");
}

TEST(HttpServer, StreamsAreChunkedForHttp11AndCloseDelimitedForHttp10) {
  for (bool notify : {false, true}) {  // a worker writes it; the stream pump does
    SCOPED_TRACE(notify ? "stream pump" : "worker");
    TestServer s(options(), notify);
    {
      Client c(s.port);
      c.send(get("/stream"));
      const std::string r = c.read(milliseconds(3000), "0\r\n\r\n");
      EXPECT_NE(r.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << r;
      EXPECT_NE(r.find("Content-Type: text/event-stream\r\n"), std::string::npos);
      EXPECT_NE(r.find("Cache-Control: no-cache\r\n"), std::string::npos);
      EXPECT_NE(r.find("8\r\npiece 0\n\r\n"), std::string::npos) << r;
      EXPECT_EQ(r.substr(r.size() - 5), "0\r\n\r\n");
      EXPECT_FALSE(c.closed);  // keep-alive after a chunked body
    }
    {
      Client c(s.port);
      c.send("GET /stream HTTP/1.0\r\n\r\n");
      const std::string r = c.read(milliseconds(3000));
      EXPECT_TRUE(c.closed);
      EXPECT_EQ(r.find("Transfer-Encoding"), std::string::npos) << r;
      EXPECT_EQ(r.find("Content-Length"), std::string::npos) << r;
      EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos) << r;
      EXPECT_EQ(r.substr(r.find("\r\n\r\n") + 4), "piece 0\npiece 1\npiece 2\n");
    }
    {
      Client c(s.port);  // HTTP/1.0 with keep-alive still gets a close-delimited stream
      c.send("GET /stream HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
      const std::string r = c.read(milliseconds(3000));
      EXPECT_TRUE(c.closed);
      EXPECT_EQ(r.find("Transfer-Encoding"), std::string::npos) << r;
    }
    EXPECT_EQ(*s.cancels, 0);
  }
}

TEST(HttpServer, ClientThatLeavesCancelsItsStream) {
  for (bool notify : {false, true}) {  // a worker writes it; the stream pump does
    SCOPED_TRACE(notify ? "stream pump" : "worker");
    TestServer s(options(), notify);
    {
      Client c(s.port);
      c.send(get("/endless"));
      EXPECT_NE(c.read(milliseconds(3000), "piece 2").find("piece 2"), std::string::npos);
    }
    const auto t0 = Clock::now();
    while (*s.cancels == 0 && ms_since(t0) < 3000) std::this_thread::sleep_for(milliseconds(10));
    EXPECT_EQ(*s.cancels, 1);
    EXPECT_TRUE(s.http->wait_idle(milliseconds(2000)));
  }
}

TEST(HttpServer, ClientThatStopsReadingIsDroppedAfterTheWriteTimeout) {
  for (bool notify : {false, true}) {  // a worker writes it; the stream pump does
    SCOPED_TRACE(notify ? "stream pump" : "worker");
    HttpOptions o = options();
    o.write_timeout = milliseconds(300);
    TestServer s(o, notify);
    Client c(s.port);
    c.send(get("/flood"));  // never read
    const auto t0 = Clock::now();
    while (*s.cancels == 0 && ms_since(t0) < 10000) std::this_thread::sleep_for(milliseconds(20));
    EXPECT_EQ(*s.cancels, 1);
    EXPECT_TRUE(s.http->wait_idle(milliseconds(2000)));
  }
}

TEST(HttpServer, StopCutsOpenStreams) {
  for (bool notify : {false, true}) {  // a worker writes it; the stream pump does
    SCOPED_TRACE(notify ? "stream pump" : "worker");
    auto s = std::make_unique<TestServer>(options(), notify);
    Client c(s->port);
    c.send(get("/endless"));
    c.read(milliseconds(3000), "piece 1");
    auto cancels = s->cancels;
    const auto t0 = Clock::now();
    s.reset();  // stop() and join
    EXPECT_LT(ms_since(t0), 2000);
    EXPECT_EQ(*cancels, 1);
  }
}

TEST(HttpServer, IdleConnectionsCloseAfterTheIdleTimeout) {
  HttpOptions o = options();
  o.idle_timeout = milliseconds(300);
  TestServer s(o);
  Client fresh(s.port), used(s.port);
  used.send(get("/hello"));
  used.response();
  const auto t0 = Clock::now();
  EXPECT_EQ(fresh.read(milliseconds(3000)), "");
  EXPECT_TRUE(fresh.closed);
  EXPECT_EQ(used.read(milliseconds(3000)), "");
  EXPECT_TRUE(used.closed);
  EXPECT_GT(ms_since(t0), 150);
  EXPECT_LT(ms_since(t0), 1500);
}

// An empty line after a request (some clients send one after a body) is not the start of a
// request: no 408 at the header deadline, the idle timeout still applies.
TEST(HttpServer, EmptyLinesBetweenRequestsKeepTheConnectionIdle) {
  HttpOptions o = options();
  o.header_timeout = milliseconds(200);
  o.idle_timeout = milliseconds(800);
  TestServer s(o);
  Client c(s.port);
  c.send(get("/hello") + "\r\n");
  EXPECT_EQ(c.response().rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_EQ(c.read(milliseconds(400)), "");
  EXPECT_FALSE(c.closed);
  c.send(get("/hello"));
  EXPECT_EQ(c.response().rfind("HTTP/1.1 200 OK", 0), 0u);
}

// One byte every 50 ms never trips a per-read timeout; the deadlines bound the whole.
TEST(HttpServer, SlowSendersGet408AtTheHeaderAndBodyDeadlines) {
  HttpOptions o = options();
  o.header_timeout = milliseconds(400);
  o.body_timeout = milliseconds(600);
  TestServer s(o);
  auto drip = [](Client& c, const std::string& text, milliseconds limit) {
    const auto t0 = Clock::now();
    std::string got;
    for (size_t i = 0; i < text.size() && ms_since(t0) < limit.count(); ++i) {
      if (::send(c.fd, &text[i], 1, MSG_NOSIGNAL) != 1) break;
      got += c.read(milliseconds(50));
      if (c.closed) break;
    }
    return got + c.read(milliseconds(1000));
  };
  {
    Client c(s.port);
    const auto t0 = Clock::now();
    const std::string r =
        drip(c, get("/hello", "X-Long: " + std::string(500, 'a') + "\r\n"), milliseconds(5000));
    EXPECT_EQ(r.rfind("HTTP/1.1 408 ", 0), 0u) << r;
    EXPECT_NE(r.find("headers not received within 0.4 s"), std::string::npos) << r;
    EXPECT_TRUE(c.closed);
    EXPECT_LT(ms_since(t0), 1500);
  }
  {
    Client c(s.port);
    c.send("POST /echo HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n");
    const auto t0 = Clock::now();
    const std::string r = drip(c, std::string(500, ' '), milliseconds(5000));
    EXPECT_EQ(r.rfind("HTTP/1.1 408 ", 0), 0u) << r;
    EXPECT_NE(r.find("body not received within 0.6 s"), std::string::npos) << r;
    EXPECT_GT(ms_since(t0), 400);
    EXPECT_LT(ms_since(t0), 1800);
  }
}

TEST(HttpServer, ConnectionLimitRefusesWith503) {
  HttpOptions o = options();
  o.max_connections = 5;
  TestServer s(o);
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 5; ++i) held.push_back(std::make_unique<Client>(s.port));
  const auto t0 = Clock::now();
  while (s.http->connections() < 5 && ms_since(t0) < 2000)
    std::this_thread::sleep_for(milliseconds(5));
  Client extra(s.port);
  extra.send(get("/hello"));
  const std::string r = extra.read(milliseconds(3000));
  EXPECT_EQ(r.rfind("HTTP/1.1 503 ", 0), 0u) << r;
  EXPECT_NE(r.find("Retry-After: 1\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: close\r\n"), std::string::npos) << r;
  EXPECT_NE(r.find("Too many open connections (the limit is 5)"), std::string::npos) << r;
  EXPECT_TRUE(extra.closed);
  held.pop_back();
  const auto t1 = Clock::now();
  while (s.http->connections() > 4 && ms_since(t1) < 2000)
    std::this_thread::sleep_for(milliseconds(5));
  Client again(s.port);
  again.send(get("/hello"));
  EXPECT_EQ(again.response().rfind("HTTP/1.1 200 OK", 0), 0u);
}

// Four workers, 200 idle and 50 half-sent requests: none of them holds a worker. (Were they held,
// no answer would come at all; the bound is loose for sanitizer builds on a busy machine. The
// 100 ms goal is checked end to end by tests/e2e/connections.mjs.)
TEST(HttpServer, IdleAndSlowConnectionsHoldNoWorker) {
  TestServer s(options());
  std::vector<std::unique_ptr<Client>> idle, slow;
  for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<Client>(s.port));
  for (int i = 0; i < 50; ++i) {
    slow.push_back(std::make_unique<Client>(s.port));
    slow.back()->send(i % 2 ? "GET /hello HTTP/1.1\r\nX-Slow: a"
                            : "POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\n{");
  }
  const auto t0 = Clock::now();
  while (s.http->connections() < 250 && ms_since(t0) < 3000)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_EQ(s.http->connections(), 250);
  for (int i = 0; i < 5; ++i) {
    Client c(s.port);
    const auto t = Clock::now();
    c.send(get("/hello"));
    const std::string r = c.response();
    EXPECT_EQ(r.rfind("HTTP/1.1 200 OK", 0), 0u) << r;
    EXPECT_LT(ms_since(t), 1000);
  }
}

// Streams whose body notifies are written by the stream pump: 32 endless streams on a server with
// 4 workers all make progress, and a plain request is still answered at once (with a worker
// per stream, 4 streams would hold every worker and the rest would wait forever).
TEST(HttpServer, PumpedStreamsHoldNoWorker) {
  TestServer s(options(), /*notify=*/true);
  std::vector<std::unique_ptr<Client>> streams;
  for (int i = 0; i < 32; ++i) {
    streams.push_back(std::make_unique<Client>(s.port));
    streams.back()->send(get("/endless"));
  }
  for (auto& c : streams)
    EXPECT_NE(c->read(milliseconds(3000), "piece 2").find("piece 2"), std::string::npos);
  EXPECT_EQ(s.http->in_flight(), 32);
  Client c(s.port);
  const auto t = Clock::now();
  c.send(get("/hello"));
  EXPECT_EQ(c.response().rfind("HTTP/1.1 200 OK", 0), 0u);
  EXPECT_LT(ms_since(t), 1000);
  streams.clear();  // every client leaves: every body is cancelled, nothing stays in flight
  const auto t0 = Clock::now();
  while (*s.cancels < 32 && ms_since(t0) < 5000) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(*s.cancels, 32);
  EXPECT_TRUE(s.http->wait_idle(milliseconds(2000)));
}

// Many short pumped streams from many keep-alive clients at once: every one ends, and no
// connection is left without its response. (An adoption that came between the pump taking its
// new streams and consuming the wake-up lost that wake-up, and its client waited forever; seen
// with one pump thread under CPU contention, a few times in 10,000 streams.)
TEST(HttpServer, ManyShortPumpedStreamsAllEnd) {
  HttpOptions o = options();
  o.threads = 8;
  o.stream_threads = 1;
  TestServer s(o, /*notify=*/true);
  std::atomic<int> done{0}, stuck{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t)
    clients.emplace_back([&] {
      Client c(s.port);
      for (int i = 0; i < 100; ++i) {
        c.send(get("/stream"));
        const std::string r = c.read(milliseconds(3000), "0\r\n\r\n");
        if (r.size() < 5 || r.substr(r.size() - 5) != "0\r\n\r\n") {
          ++stuck;
          return;
        }
        ++done;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(stuck.load(), 0);
  EXPECT_EQ(done.load(), 800);
  EXPECT_TRUE(s.http->wait_idle(milliseconds(2000)));
}

}  // namespace
}  // namespace tandem::server
