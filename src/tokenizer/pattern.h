// What Split, Replace, Digits and WhitespaceSplit share: finding a pattern's matches so that
// they tile the text, and cutting the text by a split behavior (HF's SplitDelimiterBehavior).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace tandem::tok {

struct MarkedSpan {
  Span span;
  bool is_match;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Either a regex (String or Regex pattern of tokenizer.json) or a per-character predicate.
class Pattern {
 public:
  explicit Pattern(std::shared_ptr<const Regex> regex) : regex_(std::move(regex)) {}
  explicit Pattern(std::function<bool(char32_t)> predicate) : predicate_(std::move(predicate)) {}

  // Spans covering all of `text` in order, each a match or the text between matches. A regex
  // match is one span; with a predicate, every matching character is its own span.
  std::vector<MarkedSpan> find_matches(std::string_view text) const;

 private:
  std::shared_ptr<const Regex> regex_;
  std::function<bool(char32_t)> predicate_;
};

// {"String": "..."} or {"Regex": "..."} at `path`.
std::shared_ptr<const Regex> parse_pattern(const Json& j, const std::string& path);
SplitBehavior parse_behavior(const Json& j, const std::string& path);

// Cuts `text` into the non-empty pieces that `behavior` keeps. `invert` swaps matches and gaps.
std::vector<Span> split_by(const Pattern& pattern, std::string_view text, SplitBehavior behavior,
                           bool invert);

// Every match of `pattern` in `text` replaced by `content`.
std::string replace_all(const Regex& pattern, std::string_view text, std::string_view content);

}  // namespace tandem::tok
