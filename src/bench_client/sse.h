// Server-sent events: splits a byte stream, delivered in arbitrary pieces, into the `data`
// payloads of its events (the WHATWG event-stream rules that matter for LLM servers).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace tandem::bench {

class SseParser {
 public:
  using OnData = std::function<void(std::string_view data)>;
  explicit SseParser(OnData on_data) : on_data_(std::move(on_data)) {}

  // Feeds the next piece of the body; complete events are delivered before it returns.
  void feed(std::string_view bytes);
  // End of body: delivers an event left without its terminating blank line.
  void finish();

 private:
  void line(std::string_view l);
  void dispatch();

  OnData on_data_;
  std::string partial_;  // an incomplete line carried to the next feed
  std::string data_;     // the data lines of the event being read, joined by '\n'
  bool has_data_ = false;
  bool last_was_cr_ = false;  // a piece ended in '\r'; a leading '\n' next belongs to it
};

}  // namespace tandem::bench
