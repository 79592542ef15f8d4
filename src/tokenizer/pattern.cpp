#include "tokenizer/pattern.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace tandem::tok {

std::vector<MarkedSpan> Pattern::find_matches(std::string_view text) const {
  std::vector<MarkedSpan> out;
  if (text.empty()) {
    out.push_back({{0, 0}, false});
    return out;
  }
  size_t prev = 0;
  if (regex_) {
    std::vector<Span> matches;
    regex_->find_all(text, matches);
    for (const Span& m : matches) {
      if (prev != m.start) out.push_back({{prev, m.start}, false});
      out.push_back({m, true});
      prev = m.end;
    }
  } else {
    for (size_t i = 0; i < text.size();) {
      const Utf8Char c = decode_utf8(text, i);
      if (predicate_(c.cp)) {
        if (prev < i) out.push_back({{prev, i}, false});
        out.push_back({{i, i + c.len}, true});
        prev = i + c.len;
      }
      i += c.len;
    }
  }
  if (prev != text.size()) out.push_back({{prev, text.size()}, false});
  return out;
}

std::shared_ptr<const Regex> parse_pattern(const Json& j, const std::string& path) {
  if (!j.is_object() || j.size() != 1) {
    json_fail(path, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  const bool literal = j.contains("String");
  if (!literal && !j.contains("Regex")) {
    json_fail(path, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  const char* key = literal ? "String" : "Regex";
  const std::string text = json_string(j, path, key);
  try {
    return std::make_shared<const Regex>(text, literal);
  } catch (const std::exception& e) {
    json_fail(json_path(path, key), e.what());
  }
}

SplitBehavior parse_behavior(const Json& j, const std::string& path) {
  const std::string b = json_string(j, path, "behavior");
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  json_fail(json_path(path, "behavior"), "unknown split behavior '" + b + "'");
}

std::vector<Span> split_by(const Pattern& pattern, std::string_view text, SplitBehavior behavior,
                           bool invert) {
  std::vector<MarkedSpan> marks = pattern.find_matches(text);
  if (invert) {
    for (MarkedSpan& m : marks) m.is_match = !m.is_match;
  }
  std::vector<MarkedSpan> pieces;  // is_match now means "drop this piece"
  pieces.reserve(marks.size());
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const MarkedSpan& m : marks) pieces.push_back({m.span, false});
      break;
    case SplitBehavior::kRemoved:
      pieces = marks;
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const MarkedSpan& m : marks) {
        if (m.is_match && !previous_match && !pieces.empty()) {
          pieces.back().span.end = m.span.end;
        } else {
          pieces.push_back({m.span, false});
        }
        previous_match = m.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // The mirror image of kMergedWithPrevious: walk from the end.
      bool previous_match = false;
      for (auto it = marks.rbegin(); it != marks.rend(); ++it) {
        if (it->is_match && !previous_match && !pieces.empty()) {
          pieces.back().span.start = it->span.start;
        } else {
          pieces.push_back({it->span, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const MarkedSpan& m : marks) {
        if (m.is_match == previous_match && !pieces.empty()) {
          pieces.back().span.end = m.span.end;
        } else {
          pieces.push_back({m.span, false});
        }
        previous_match = m.is_match;
      }
      break;
    }
  }
  std::vector<Span> out;
  out.reserve(pieces.size());
  for (const MarkedSpan& p : pieces) {
    if (!p.is_match && p.span.end > p.span.start) out.push_back(p.span);
  }
  return out;
}

std::string replace_all(const Regex& pattern, std::string_view text, std::string_view content) {
  std::vector<Span> matches;
  pattern.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  size_t prev = 0;
  for (const Span& m : matches) {
    out.append(text.substr(prev, m.start - prev));
    out.append(content);
    prev = m.end;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace tandem::tok
