#include "server/reasoning_parser.h"

#include <algorithm>

namespace tandem::server {

namespace {

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Length of the longest suffix of s that is a proper prefix of marker.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t len = std::min(s.size(), marker.size() - 1); len > 0; --len)
    if (s.substr(s.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

}  // namespace

ReasoningParser::ReasoningParser(bool in_reasoning, std::string start, std::string end)
    : state_(in_reasoning ? State::kReasoning : State::kStart),
      start_(std::move(start)),
      end_(std::move(end)),
      skip_ws_(true) {}

bool ReasoningParser::prompt_opens_reasoning(std::string_view prompt, std::string_view start,
                                             std::string_view end) {
  const size_t s = prompt.rfind(start);
  if (s == std::string_view::npos) return false;
  const size_t e = prompt.rfind(end);
  return e == std::string_view::npos || e < s;
}

ReasoningParser::Delta ReasoningParser::push(std::string_view text) {
  pending_ += text;
  Delta d;
  run(d, false);
  return d;
}

ReasoningParser::Delta ReasoningParser::flush() {
  Delta d;
  run(d, true);
  return d;
}

void ReasoningParser::run(Delta& d, bool final) {
  for (;;) {
    if (skip_ws_) {
      size_t i = 0;
      while (i < pending_.size() && is_space(pending_[i])) ++i;
      pending_.erase(0, i);
      if (pending_.empty()) return;
      skip_ws_ = false;
    }
    switch (state_) {
      case State::kStart: {
        // Reasoning only when the output opens with the start marker.
        if (pending_.compare(0, start_.size(), start_) == 0) {
          pending_.erase(0, start_.size());
          state_ = State::kReasoning;
          skip_ws_ = true;
          continue;
        }
        if (!final && start_.compare(0, pending_.size(), pending_) == 0) return;  // undecided
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t at = pending_.find(end_);
        if (at != std::string::npos) {
          d.reasoning += pending_.substr(0, at);
          pending_.erase(0, at + end_.size());
          state_ = State::kContent;
          skip_ws_ = true;
          continue;
        }
        const size_t hold = final ? 0 : partial_suffix(pending_, end_);
        d.reasoning += pending_.substr(0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::kContent:
        d.content += pending_;
        pending_.clear();
        return;
    }
  }
}

}  // namespace tandem::server
