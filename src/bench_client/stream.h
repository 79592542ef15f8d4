// Turns one request's stream of events into its RequestOutput: TTFT, ITL samples, text and
// the server's token count, with sglang.bench_serving's definitions. Kept apart from HTTP so
// that the timing rules are testable with made-up timestamps.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bench_client/types.h"

namespace tandem::bench {

class StreamAccumulator {
 public:
  // requested_output_len: the output length reported when the server gives no token count.
  StreamAccumulator(Backend backend, int64_t requested_output_len);

  // One SSE data payload received t seconds after the request was sent. An error event
  // ({"error": ...}) or a payload that is not JSON marks the request failed.
  void on_event(std::string_view data, double t);
  // A non-streaming response body received t seconds after the request was sent.
  void on_body(std::string_view body, double t);
  // The request's output once the body has ended: success unless an error event was seen.
  // A stream that never carried text gets ttft = latency, as a non-streaming response does.
  RequestOutput finish() const;

 private:
  // A chunk carrying text (delta text, or sglang's cumulative text), with the server's running
  // completion-token count when the chunk has one.
  void on_content(double t, std::optional<int64_t> tokens);
  void fail(std::string message);

  Backend backend_;
  RequestOutput out_;
  bool failed_ = false;
  bool seen_content_ = false;
  double last_content_t_ = 0;
  int64_t last_tokens_ = -1;  // the count at the last content chunk; -1: not reported
};

}  // namespace tandem::bench
