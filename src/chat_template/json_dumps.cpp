#include "chat_template/json_dumps.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat_template/errors.h"
#include "chat_template/py_repr.h"
#include "chat_template/unicode.h"

namespace tandem::jinja {
namespace {

class Dumper {
 public:
  explicit Dumper(const JsonDumpsOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void value(const Value& v, int depth) {
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return;
      case Value::Kind::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out_ += fmt::format("{}", v.as_int());
        return;
      case Value::Kind::kFloat:
        out_ += float_text(v.as_double());
        return;
      case Value::Kind::kString:
        string(v.str());
        return;
      case Value::Kind::kList:
        list(v.items(), depth);
        return;
      case Value::Kind::kDict:
        dict(v.dict(), depth);
        return;
      default:
        render_fail("Object of type {} is not JSON serializable", type_name(v));
    }
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return float_repr(d);
  }

  void string(std::string_view s) {
    out_ += '"';
    for (char32_t c : unicode::decode(s)) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          continue;
        case '\\':
          out_ += "\\\\";
          continue;
        case '\n':
          out_ += "\\n";
          continue;
        case '\r':
          out_ += "\\r";
          continue;
        case '\t':
          out_ += "\\t";
          continue;
        case '\b':
          out_ += "\\b";
          continue;
        case '\f':
          out_ += "\\f";
          continue;
        default:
          break;
      }
      if (c < 0x20 || (o_.ensure_ascii && c > 0x7E)) {
        if (c > 0xFFFF) {  // a surrogate pair, as Python writes it
          char32_t v = c - 0x10000;
          out_ += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        } else {
          out_ += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        }
      } else {
        unicode::append_utf8(out_, c);
      }
    }
    out_ += '"';
  }

  void newline(int depth) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < depth; ++i) out_ += *o_.indent;
  }

  void list(const std::vector<Value>& items, int depth) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_sep_;
      newline(depth + 1);
      value(items[i], depth + 1);
    }
    newline(depth);
    out_ += ']';
  }

  // json.dumps turns int, float, bool and None keys into their JSON text; others are errors.
  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString:
        return k.str();
      case Value::Kind::kNone:
        return "null";
      case Value::Kind::kBool:
        return k.as_bool() ? "true" : "false";
      case Value::Kind::kInt:
        return fmt::format("{}", k.as_int());
      case Value::Kind::kFloat:
        return float_text(k.as_double());
      default:
        render_fail("keys must be str, int, float, bool or None, not {}", type_name(k));
    }
  }

  void dict(const DictData& d, int depth) {
    if (d.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries) entries.push_back(&e);
    if (o_.sort_keys) {
      for (const auto* e : entries) {
        if (!e->first.is_string()) render_fail("sort_keys needs str keys in this engine");
      }
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return a->first.str() < b->first.str();
      });
    }
    out_ += '{';
    bool first = true;
    for (const auto* e : entries) {
      if (!first) out_ += item_sep_;
      first = false;
      newline(depth + 1);
      string(key_text(e->first));
      out_ += key_sep_;
      value(e->second, depth + 1);
    }
    newline(depth);
    out_ += '}';
  }

  const JsonDumpsOptions& o_;
  std::string item_sep_, key_sep_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpsOptions& options) {
  Dumper d(options);
  d.value(v, 0);
  return d.take();
}

}  // namespace tandem::jinja
