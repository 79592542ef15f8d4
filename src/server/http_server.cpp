#include "server/http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace tandem::server {

namespace {

// httplib listens with a backlog of 5, which drops connections when dozens of clients connect
// at once; listen() again on the bound socket raises it.
class Server : public httplib::Server {
 public:
  void raise_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

// How long a streamed body waits for output before it checks that the client is still there.
constexpr std::chrono::milliseconds kPollInterval{100};

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<const Router> router;
  HttpOptions opt;
  Server svr;
  std::shared_ptr<std::atomic<int64_t>> in_flight = std::make_shared<std::atomic<int64_t>>(0);

  // Counts the request while it is handled; a streamed body keeps it counted until httplib
  // releases the body (sent, or the client went away).
  void handle(const httplib::Request& req, std::string body, httplib::Response& res) {
    ++*in_flight;
    bool streamed = false;
    try {
      streamed = dispatch(req, std::move(body), res);
    } catch (...) {
      --*in_flight;
      throw;
    }
    if (!streamed) --*in_flight;
  }

  // Returns whether the response is a streamed body (which then owns one in_flight count).
  bool dispatch(const httplib::Request& req, std::string body, httplib::Response& res) {
    HttpRequest r;
    r.method = req.method;
    r.path = req.path;
    r.body = std::move(body);
    for (const auto& [k, v] : req.headers) r.headers.emplace_back(k, v);
    HttpResponse out = router->dispatch(r);
    res.status = out.status;  // CORS headers, when the origin is allowed, come from the router
    for (const auto& [k, v] : out.headers) res.set_header(k, v);
    if (!out.stream) {
      res.set_content(out.body, out.content_type);
      return false;
    }
    if (out.content_type == kEventStream) {
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");  // tell proxies not to buffer the stream
    }
    std::shared_ptr<BodyStream> stream = out.stream;
    auto complete = std::make_shared<bool>(false);
    auto counter = in_flight;
    res.set_chunked_content_provider(
        out.content_type,
        [stream, complete](size_t, httplib::DataSink& sink) {
          std::string chunk;
          const bool more = stream->next(chunk, kPollInterval);
          if (!chunk.empty() && !sink.write(chunk.data(), chunk.size())) return false;
          if (!more) {
            *complete = true;
            sink.done();
            return true;
          }
          // is_writable() also peeks the socket, so a closed connection shows up while the
          // request is still queued or between tokens.
          return sink.is_writable();
        },
        [stream, complete, counter](bool success) {
          if (!success || !*complete) stream->cancel();
          --*counter;
        });
    return true;
  }
};

HttpServer::HttpServer(std::shared_ptr<const Router> router, HttpOptions opt)
    : impl_(std::make_unique<Impl>()) {
  impl_->router = std::move(router);
  impl_->opt = opt;
  Server& s = impl_->svr;
  const size_t threads = static_cast<size_t>(std::max<int64_t>(opt.threads, 4));
  s.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.set_payload_max_length(static_cast<size_t>(opt.max_request_bytes));
  s.set_tcp_nodelay(true);
  s.set_keep_alive_timeout(opt.keep_alive_timeout_s);
  s.set_keep_alive_max_count(1000);
  Impl* impl = impl_.get();
  auto no_body = [impl](const httplib::Request& req, httplib::Response& res) {
    impl->handle(req, std::string(), res);
  };
  // Bodies are read here rather than by httplib, which would parse form-encoded bodies (what
  // `curl -d` sends without a Content-Type) and refuse those over 8 KiB, and would wait for
  // the connection to close to find the end of a POST without Content-Length (`curl -X POST
  // .../flush_cache`), which has no body.
  auto with_body = [impl](const httplib::Request& req, httplib::Response& res,
                          const httplib::ContentReader& reader) {
    const bool chunked =
        req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    std::string body;
    if (req.is_multipart_form_data()) {  // refused before httplib's multipart reader runs
      res.status = 415;
      res.set_content(
          dump_json(error_json(415, content_type_error(req.get_header_value("Content-Type"))
                                        .value_or("multipart bodies are not supported"))),
          "application/json");
      return;
    }
    if (req.has_header("Content-Length") || chunked) {
      const size_t limit = static_cast<size_t>(impl->opt.max_request_bytes);
      bool too_large = false;
      const bool ok = reader([&](const char* data, size_t n) {
        too_large = body.size() + n > limit;
        if (!too_large) body.append(data, n);
        return !too_large;
      });
      if (!ok) {
        const int status = too_large || res.status == 413 ? 413 : 400;
        res.status = status;
        res.set_content(
            dump_json(error_json(status, status == 413
                                             ? fmt::format("Request body over {} bytes", limit)
                                             : std::string("Could not read the request body"))),
            "application/json");
        return;
      }
    }
    impl->handle(req, std::move(body), res);
  };
  s.Get(".*", no_body);
  s.Options(".*", no_body);
  s.Post(".*", with_body);
  s.Put(".*", with_body);
  s.Patch(".*", with_body);
  s.Delete(".*", with_body);
  // Errors httplib produces itself (unparsable request line, body over the limit) get the same
  // JSON shape as ours.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.content_provider_)
          return httplib::Server::HandlerResponse::Unhandled;
        std::string msg = res.status == 413 ? "Request body too large" : "Bad request";
        res.set_content(dump_json(error_json(res.status, msg)), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string msg = "unknown error";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          msg = e.what();
        } catch (...) {
        }
        log_error("{} {}: {}", req.method, req.path, msg);
        res.status = 500;
        res.set_content(dump_json(error_json(500, "Internal server error: " + msg)),
                        "application/json");
      });
  s.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    log_debug("{} {} -> {}", req.method, req.path, res.status);
  });
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind(const std::string& host, int port) {
  Server& s = impl_->svr;
  int bound = port;
  if (port == 0) {
    bound = s.bind_to_any_port(host);
    if (bound < 0) bound = 0;
  } else if (!s.bind_to_port(host, port)) {
    bound = 0;
  }
  if (bound <= 0) fail("cannot listen on {}:{} (address in use or not available)", host, port);
  s.raise_backlog(1024);
  return bound;
}

bool HttpServer::run() {
  return impl_->svr.listen_after_bind();
}

bool HttpServer::running() const {
  return impl_->svr.is_running();
}

int64_t HttpServer::in_flight() const {
  return impl_->in_flight->load();
}

bool HttpServer::wait_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (in_flight() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void HttpServer::stop() {
  if (impl_->svr.is_running()) impl_->svr.stop();
}

}  // namespace tandem::server
