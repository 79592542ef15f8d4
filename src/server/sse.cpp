#include "server/sse.h"

namespace tandem::server {

std::string sse_event(const Json& data) {
  // dump_json never emits a raw newline (they are escaped inside strings), so one data line
  // always carries the whole JSON value.
  return "data: " + dump_json(data) + "\n\n";
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

std::string sse_error(int status, const std::string& message) {
  Json e = error_json(status, message);
  return sse_event(Json{{"error", e["error"]}}) + sse_done();
}

std::vector<std::string> sse_data_payloads(std::string_view stream) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t end = stream.find("\n\n", pos);
    if (end == std::string_view::npos) break;
    std::string_view event = stream.substr(pos, end - pos);
    pos = end + 2;
    std::string data;
    bool has_data = false;
    size_t line_start = 0;
    while (line_start <= event.size()) {
      size_t nl = event.find('\n', line_start);
      if (nl == std::string_view::npos) nl = event.size();
      std::string_view line = event.substr(line_start, nl - line_start);
      line_start = nl + 1;
      if (line.substr(0, 5) == "data:") {
        line.remove_prefix(5);
        if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        if (has_data) data += '\n';
        data += line;
        has_data = true;
      }
    }
    if (has_data) out.push_back(std::move(data));
  }
  return out;
}

}  // namespace tandem::server
