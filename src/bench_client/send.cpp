#include "bench_client/send.h"

#include <exception>
#include <string>

#include "bench_client/sse.h"
#include "bench_client/stream.h"

namespace tandem::bench {

namespace {

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

RequestOutput send_request(const Endpoint& ep, Backend backend, const DatasetRow& row,
                           int64_t output_len, const RequestOptions& opts, Clock::time_point t0) {
  RequestOutput out;
  try {
    const HttpRequestSpec spec = build_request(backend, row, output_len, opts);
    // replace: a prompt cut mid-character must not abort the request.
    const std::string body =
        spec.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    StreamAccumulator acc(backend, output_len);
    std::string whole;  // the body of a non-streaming response
    const Clock::time_point st = Clock::now();
    SseParser sse([&](std::string_view data) { acc.on_event(data, seconds(Clock::now() - st)); });
    const HttpResult r = http_post_stream(ep, spec.path, body, [&](std::string_view piece) {
      if (opts.stream)
        sse.feed(piece);
      else
        whole.append(piece);
    });
    if (r.ok()) {
      if (opts.stream)
        sse.finish();
      else
        acc.on_body(whole, seconds(Clock::now() - st));
      out = acc.finish();
    } else {
      out.success = false;
      out.error = r.describe();
      out.latency = seconds(Clock::now() - st);
    }
    out.start_time = seconds(st - t0);
  } catch (const std::exception& e) {
    out.success = false;
    out.error = e.what();
  }
  out.prompt_len = row.prompt_len;
  return out;
}

}  // namespace tandem::bench
