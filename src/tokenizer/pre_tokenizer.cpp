#include "tokenizer/pre_tokenizer.h"

#include <optional>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

void append_spans(std::string_view text, const std::vector<Span>& spans,
                  std::vector<std::string>& out) {
  for (const Span& s : spans) out.emplace_back(text.substr(s.start, s.end - s.start));
}

class Split : public PreTokenizer {
 public:
  Split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert)
      : pattern_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    append_spans(piece, split_by(pattern_, piece, behavior_, invert_), out);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space) {
    if (use_regex) split_pattern_.emplace(std::make_shared<const Regex>(kGpt2SplitPattern, false));
  }
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    std::string text;
    // HF adds the space to every piece it is given, not only to the start of the input.
    if (add_prefix_space_ && !piece.empty() && piece.front() != ' ') text = " ";
    text.append(piece);
    if (!split_pattern_) {
      if (!text.empty()) out.push_back(bytes_to_chars(text));
      return;
    }
    for (const Span& s : split_by(*split_pattern_, text, SplitBehavior::kIsolated, false)) {
      out.push_back(bytes_to_chars(std::string_view(text).substr(s.start, s.end - s.start)));
    }
  }

 private:
  bool add_prefix_space_;
  std::optional<Pattern> split_pattern_;  // GPT-2's regex when use_regex is set
};

class CharSplit : public PreTokenizer {
 public:
  CharSplit(bool (*predicate)(char32_t), SplitBehavior behavior)
      : pattern_(std::function<bool(char32_t)>(predicate)), behavior_(behavior) {}
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    append_spans(piece, split_by(pattern_, piece, behavior_, false), out);
  }

 private:
  Pattern pattern_;
  SplitBehavior behavior_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void split(std::string_view piece, std::vector<std::string>& out) const override {
    std::vector<std::string> cur{std::string(piece)}, next;
    for (const auto& p : parts_) {
      next.clear();
      for (const std::string& s : cur) p->split(s, next);
      cur.swap(next);
    }
    for (std::string& s : cur) {
      if (!s.empty()) out.push_back(std::move(s));
    }
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre_tokenizer(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevel>(add_prefix_space, use_regex);
}

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const Json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, path);
  if (type == "Split") {
    return std::make_unique<Split>(
        parse_pattern(json_required(j, path, "pattern"), json_path(path, "pattern")),
        parse_behavior(j, path), json_bool_or(j, path, "invert", false));
  }
  if (type == "ByteLevel") {
    // trim_offsets only changes offsets, which this tokenizer does not report.
    return make_byte_level_pre_tokenizer(json_bool_or(j, path, "add_prefix_space", true),
                                         json_bool_or(j, path, "use_regex", true));
  }
  if (type == "Digits") {
    const bool individual = json_bool_or(j, path, "individual_digits", false);
    return std::make_unique<CharSplit>(
        &is_numeric, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplit>(&is_whitespace, SplitBehavior::kRemoved);
  }
  if (type == "Sequence") {
    const std::string list_path = json_path(path, "pretokenizers");
    const Json& list = json_array(j, path, "pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = parse_pre_tokenizer(list[i], json_path(list_path, i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  json_fail(json_path(path, "type"), "unsupported pre-tokenizer '" + type + "'");
}

}  // namespace tandem::tok
