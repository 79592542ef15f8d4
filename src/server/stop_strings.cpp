#include "server/stop_strings.h"

#include <algorithm>

namespace tandem::server {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stops, bool no_stop_trim)
    : no_stop_trim_(no_stop_trim) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));  // "" would match before any output
}

StopStringMatcher::Result StopStringMatcher::push(std::string_view text) {
  Result r;
  if (stopped_) return r;
  if (stops_.empty()) {
    r.text = text;
    return r;
  }
  pending_ += text;
  // The earliest match wins; at equal positions the longer string (it contains the other).
  size_t best = std::string::npos;
  const std::string* which = nullptr;
  for (const std::string& s : stops_) {
    const size_t at = pending_.find(s);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && s.size() > which->size())) {
      best = at;
      which = &s;
    }
  }
  if (which) {
    stopped_ = true;
    r.stopped = true;
    r.matched = *which;
    r.text = pending_.substr(0, no_stop_trim_ ? best + which->size() : best);
    pending_.clear();
    return r;
  }
  // Hold back the longest tail that is a proper prefix of some stop string. Stop strings are
  // valid UTF-8 and never start with a continuation byte, so the cut is a character boundary.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len)
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        hold = len;
        break;
      }
  }
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopStringMatcher::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  return out;
}

}  // namespace tandem::server
