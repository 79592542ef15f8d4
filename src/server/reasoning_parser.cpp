#include "server/reasoning_parser.h"

#include <fmt/format.h>

#include "core/error.h"
#include "server/text_scan.h"

namespace tandem::server {

ReasoningParser::ReasoningParser(Options o)
    : o_(std::move(o)),
      state_(o_.in_reasoning ? State::kReasoning : State::kStart),
      strip_start_(o_.in_reasoning) {}

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
      skip_spaces(pending_);
      if (pending_.empty()) return;
      if (strip_start_) {
        if (!final && is_partial_marker(pending_, {o_.start})) return;  // undecided
        strip_start_ = false;
        if (consume(pending_, o_.start)) continue;  // whitespace after it is dropped too
      }
      skip_ws_ = false;
    }
    switch (state_) {
      case State::kStart: {
        // Reasoning only when the output opens with the start marker.
        if (consume(pending_, o_.start)) {
          state_ = State::kReasoning;
          skip_ws_ = true;
          continue;
        }
        if (!final && is_partial_marker(pending_, {o_.start})) return;  // undecided
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t end = pending_.find(o_.end);
        const size_t tool =
            o_.tool_start.empty() ? std::string::npos : pending_.find(o_.tool_start);
        if (end != std::string::npos && end <= tool) {
          d.reasoning += pending_.substr(0, end);
          pending_.erase(0, end + o_.end.size());
          state_ = State::kContent;
          skip_ws_ = true;
          continue;
        }
        if (tool != std::string::npos) {
          // A tool call without "</think>": reasoning ends, the call is content.
          d.reasoning += pending_.substr(0, tool);
          pending_.erase(0, tool);
          state_ = State::kContent;
          continue;
        }
        const size_t hold = final ? 0 : partial_suffix(pending_, {o_.end, o_.tool_start});
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

std::optional<ReasoningFormat> parse_reasoning_format(const std::string& name) {
  if (name.empty() || name == "none") return std::nullopt;
  if (name == "glm45") return ReasoningFormat::kGlm45;
  if (name == "deepseek-r1") return ReasoningFormat::kDeepSeekR1;
  if (name == "deepseek-v3") return ReasoningFormat::kDeepSeekV3;
  throw InvalidArgument(fmt::format(
      "--reasoning-parser: unknown parser '{}'; choose glm45, deepseek-r1, deepseek-v3 or none",
      name));
}

std::optional<ReasoningParser::Options> reasoning_options(ReasoningFormat f,
                                                          const Json& template_kwargs,
                                                          bool prompt_opens) {
  auto kwarg_is = [&](const char* key, bool value) {
    auto it = template_kwargs.find(key);
    return it != template_kwargs.end() && it->is_boolean() && it->get<bool>() == value;
  };
  ReasoningParser::Options o;
  switch (f) {
    case ReasoningFormat::kGlm45:
      if (kwarg_is("enable_thinking", false)) return std::nullopt;
      o.in_reasoning = prompt_opens;
      o.tool_start = "<tool_call>";
      return o;
    case ReasoningFormat::kDeepSeekR1:
      o.in_reasoning = true;
      return o;
    case ReasoningFormat::kDeepSeekV3:
      // SGLang turns it on only for thinking: true; a template that opened a think block by
      // itself (thinking on by default) is reasoning too.
      if (!kwarg_is("thinking", true) && !prompt_opens) return std::nullopt;
      o.in_reasoning = true;
      return o;
  }
  return std::nullopt;
}

}  // namespace tandem::server
