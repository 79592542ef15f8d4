#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "tokenizer/pattern.h"
#include "tokenizer/unicode_catchup.h"
#include "tokenizer/utf8.h"

namespace tandem::tok {
namespace {

// Applies `fn` to each maximal run of characters that `keep` does not single out, and copies
// the singled-out characters as they are: invalid bytes (so that normalizing arbitrary bytes
// never fails) and characters the reference normalizer does not know.
template <typename Keep, typename Fn>
std::string map_runs(const std::string& text, Keep keep, Fn fn) {
  std::string out;
  size_t run = 0;
  for (size_t i = 0; i < text.size();) {
    const Utf8Char c = decode_utf8(text, i);
    if (keep(c.cp)) {
      out += fn(std::string_view(text).substr(run, i - run));
      out.append(text, i, c.len);
      run = i + c.len;
    }
    i += c.len;
  }
  out += fn(std::string_view(text).substr(run));
  return out;
}

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(int options) : options_(options) {}
  // HF's normalizer tables are Unicode 9.0: characters assigned later have no decomposition
  // and combining class 0 there, so they are kept as they are and nothing composes across them.
  std::string normalize(std::string text) const override {
    auto keep = [](char32_t cp) {
      return cp == kInvalidChar || (cp >= 0x80 && is_normalization_opaque(cp));
    };
    return map_runs(text, keep, [this](std::string_view run) {
      if (run.empty()) return std::string();
      utf8proc_uint8_t* dst = nullptr;
      const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                                              static_cast<utf8proc_ssize_t>(run.size()), &dst,
                                              static_cast<utf8proc_option_t>(options_));
      if (n < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(n));
      std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
      std::free(dst);
      return out;
    });
  }

 private:
  int options_;
};

class Lowercase : public Normalizer {
 public:
  // Rust's char::to_lowercase per character: the simple mapping, except that U+0130 lowercases
  // to "i" + U+0307 (its only unconditional multi-character mapping). No final-sigma rule.
  std::string normalize(std::string text) const override {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      const Utf8Char c = decode_utf8(text, i);
      if (c.cp == kInvalidChar) {
        out.append(text, i, c.len);
      } else if (c.cp == 0x130) {
        out += "i\xCC\x87";
      } else {
        const char32_t newer = catchup_lowercase(c.cp);  // mappings utf8proc does not have yet
        append_utf8(out, newer != c.cp
                             ? newer
                             : static_cast<char32_t>(utf8proc_tolower(static_cast<int32_t>(c.cp))));
      }
      i += c.len;
    }
    return out;
  }
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override {
    return text.empty() ? text : prefix_ + text;
  }

 private:
  std::string prefix_;
};

class Replace : public Normalizer {
 public:
  Replace(std::shared_ptr<const Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  std::string normalize(std::string text) const override {
    return replace_all(*pattern_, text, content_);
  }

 private:
  std::shared_ptr<const Regex> pattern_;
  std::string content_;
};

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        const Utf8Char c = decode_utf8(text, begin);
        if (!is_whitespace(c.cp)) break;
        begin += c.len;
      }
    }
    if (right_) {
      // Walk forward remembering where the trailing whitespace run starts.
      size_t trail = end;
      for (size_t i = begin; i < end;) {
        const Utf8Char c = decode_utf8(text, i);
        if (!is_whitespace(c.cp)) {
          trail = end;
        } else if (trail == end) {
          trail = i;
        }
        i += c.len;
      }
      end = trail;
    }
    return text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  std::string normalize(std::string text) const override {
    for (const auto& p : parts_) text = p->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> parse_normalizer(const Json& j, const std::string& path) {
  if (j.is_null()) return nullptr;
  const std::string type = json_type(j, path);
  if (type == "NFC") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "NFKD") {
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "Prepend") return std::make_unique<Prepend>(json_string(j, path, "prepend"));
  if (type == "Replace") {
    return std::make_unique<Replace>(
        parse_pattern(json_required(j, path, "pattern"), json_path(path, "pattern")),
        json_string(j, path, "content"));
  }
  if (type == "Strip") {
    return std::make_unique<Strip>(json_bool_or(j, path, "strip_left", false),
                                   json_bool_or(j, path, "strip_right", false));
  }
  if (type == "Sequence") {
    const std::string list_path = json_path(path, "normalizers");
    const Json& list = json_array(j, path, "normalizers");
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (size_t i = 0; i < list.size(); ++i) {
      auto p = parse_normalizer(list[i], json_path(list_path, i));
      if (p) parts.push_back(std::move(p));
    }
    return std::make_unique<Sequence>(std::move(parts));
  }
  json_fail(json_path(path, "type"), "unsupported normalizer '" + type + "'");
}

}  // namespace tandem::tok
