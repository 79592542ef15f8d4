#include "bench_client/sse.h"

namespace tandem::bench {

void SseParser::feed(std::string_view bytes) {
  size_t i = 0;
  if (last_was_cr_ && !bytes.empty() && bytes[0] == '\n') i = 1;
  last_was_cr_ = false;
  while (i < bytes.size()) {
    const size_t end = bytes.find_first_of("\r\n", i);
    if (end == std::string_view::npos) {
      partial_.append(bytes.substr(i));
      return;
    }
    if (partial_.empty()) {
      line(bytes.substr(i, end - i));
    } else {
      partial_.append(bytes.substr(i, end - i));
      line(partial_);
      partial_.clear();
    }
    i = end + 1;
    if (bytes[end] == '\r') {
      if (i < bytes.size()) {
        if (bytes[i] == '\n') ++i;
      } else {
        last_was_cr_ = true;
      }
    }
  }
}

void SseParser::finish() {
  if (!partial_.empty()) {
    line(partial_);
    partial_.clear();
  }
  dispatch();
}

void SseParser::line(std::string_view l) {
  if (l.empty()) {
    dispatch();
    return;
  }
  if (l[0] == ':') return;  // comment (keep-alive pings)
  const size_t colon = l.find(':');
  const std::string_view field = l.substr(0, colon);
  if (field != "data") return;  // event, id, retry: not used by LLM servers' streams
  std::string_view value =
      colon == std::string_view::npos ? std::string_view{} : l.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

void SseParser::dispatch() {
  if (!has_data_) return;
  // Reset before the callback so a throwing callback leaves the parser usable.
  std::string data = std::move(data_);
  data_.clear();
  has_data_ = false;
  on_data_(data);
}

}  // namespace tandem::bench
