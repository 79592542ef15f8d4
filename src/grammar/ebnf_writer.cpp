#include "grammar/ebnf_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include "grammar/grammar.h"

namespace tandem::grammar::front {

char32_t next_code_point(std::string_view text, size_t& pos) {
  const auto b0 = static_cast<unsigned char>(text[pos]);
  int len = b0 < 0x80 ? 1 : (b0 >> 5) == 0x6 ? 2 : (b0 >> 4) == 0xE ? 3 : (b0 >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || pos + len > text.size()) {
    throw GrammarError(fmt::format("invalid UTF-8 at byte {}", pos));
  }
  char32_t c = len == 1 ? b0 : b0 & (0x7F >> len);
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(text[pos + i]);
    if ((b & 0xC0) != 0x80) throw GrammarError(fmt::format("invalid UTF-8 at byte {}", pos));
    c = (c << 6) | (b & 0x3F);
  }
  static constexpr char32_t kMinForLen[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMinForLen[len] || c > kMaxCodePoint || (c >= kSurrogateFirst && c <= kSurrogateLast)) {
    throw GrammarError(fmt::format("invalid UTF-8 at byte {}", pos));
  }
  pos += len;
  return c;
}

namespace {

// The escapes shared by literals and classes; the grammar text itself stays printable ASCII.
void append_escaped(std::string& out, char32_t c) {
  switch (c) {
    case '\\':
      out += "\\\\";
      return;
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      break;
  }
  if (c < 0x20 || c == 0x7F) {
    out += fmt::format("\\x{:02X}", static_cast<uint32_t>(c));
  } else if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c <= 0xFFFF) {
    out += fmt::format("\\u{:04X}", static_cast<uint32_t>(c));
  } else {
    out += fmt::format("\\U{:08X}", static_cast<uint32_t>(c));
  }
}

void append_class_char(std::string& out, char32_t c) {
  if (c == ']' || c == '-' || c == '^') out += '\\';
  append_escaped(out, c);
}

std::string class_body(const CodePointSet& s) {
  std::string out;
  for (const auto& r : s.ranges()) {
    append_class_char(out, r.lo);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out += '-';
    append_class_char(out, r.hi);
  }
  return out;
}

}  // namespace

Expr empty_expr() {
  return {"\"\"", Expr::kAtom};
}

Expr literal(std::string_view utf8) {
  std::u32string cps;
  for (size_t pos = 0; pos < utf8.size();) cps += next_code_point(utf8, pos);
  return literal_code_points(cps);
}

Expr literal_code_points(std::u32string_view text) {
  std::string out = "\"";
  for (char32_t c : text) {
    if (c == '"') {
      out += "\\\"";
    } else {
      append_escaped(out, c);
    }
  }
  out += '"';
  return {out, Expr::kAtom};
}

Expr char_class(const CodePointSet& s) {
  const CodePointSet comp = s.complement();
  std::string pos = class_body(s);
  if (!comp.empty()) {
    std::string neg = class_body(comp);
    if (neg.size() < pos.size()) return {"[^" + neg + "]", Expr::kAtom};
  }
  return {"[" + pos + "]", Expr::kAtom};
}

Expr rule_ref(const std::string& name) {
  return {name, Expr::kAtom};
}

namespace {
// An atom that starts and ends with a quote is one literal (groups start with '(').
bool is_literal(const Expr& e) {
  return e.prec == Expr::kAtom && e.text.size() >= 2 && e.text.front() == '"' &&
         e.text.back() == '"';
}
}  // namespace

Expr seq(const std::vector<Expr>& parts) {
  std::vector<Expr> kept;
  for (const Expr& p : parts) {
    if (p.is_empty()) continue;
    if (is_literal(p) && !kept.empty() && is_literal(kept.back())) {
      // "ab" "cd" -> "abcd"
      kept.back().text.pop_back();
      kept.back().text += p.text.substr(1);
    } else {
      kept.push_back(p);
    }
  }
  if (kept.empty()) return empty_expr();
  if (kept.size() == 1) return kept[0];
  std::string out;
  for (const Expr& p : kept) {
    if (!out.empty()) out += ' ';
    out += p.prec == Expr::kAlt ? "(" + p.text + ")" : p.text;
  }
  return {out, Expr::kSeq};
}

Expr alt(const std::vector<Expr>& options) {
  std::vector<std::string> kept;
  bool has_empty = false;
  for (const Expr& o : options) {
    if (o.is_empty()) {
      has_empty = true;
    } else if (std::find(kept.begin(), kept.end(), o.text) == kept.end()) {
      kept.push_back(o.text);
    }
  }
  if (kept.empty()) return empty_expr();
  Expr out;
  if (kept.size() == 1) {
    for (const Expr& o : options) {
      if (o.text == kept[0]) out = o;
    }
  } else {
    out.prec = Expr::kAlt;
    for (const std::string& k : kept) out.text += (out.text.empty() ? "" : " | ") + k;
  }
  return has_empty ? optional(out) : out;
}

Expr repeat(const Expr& e, int64_t lo, int64_t hi) {
  if (hi == 0 || e.is_empty()) return empty_expr();
  if (lo == 1 && hi == 1) return e;
  std::string base = e.prec == Expr::kAtom ? e.text : "(" + e.text + ")";
  std::string suffix;
  if (lo == 0 && hi == kUnbounded) {
    suffix = "*";
  } else if (lo == 1 && hi == kUnbounded) {
    suffix = "+";
  } else if (lo == 0 && hi == 1) {
    suffix = "?";
  } else if (lo == hi) {
    suffix = fmt::format("{{{}}}", lo);
  } else if (hi == kUnbounded) {
    suffix = fmt::format("{{{},}}", lo);
  } else {
    suffix = fmt::format("{{{},{}}}", lo, hi);
  }
  // A postfix result binds like a sequence item: repeating it again needs parentheses.
  return {base + suffix, Expr::kSeq};
}

std::string RuleTable::reserve(std::string_view hint) {
  std::string base = prefix_;
  for (char ch : hint) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    base += ok ? ch : '-';
  }
  if (base.empty() || !((base[0] >= 'a' && base[0] <= 'z') || (base[0] >= 'A' && base[0] <= 'Z') ||
                        base[0] == '_')) {
    base = "_" + base;
  }
  std::string name = base;
  for (int i = 2; bodies_.count(name); ++i) name = fmt::format("{}-{}", base, i);
  bodies_[name] = "";
  order_.push_back(name);
  return name;
}

void RuleTable::define(const std::string& name, const Expr& body) {
  bodies_[name] = body.text;
  by_body_.emplace(body.text, name);
}

std::string RuleTable::add(std::string_view hint, const Expr& body) {
  auto it = by_body_.find(body.text);
  if (it != by_body_.end()) return it->second;
  std::string name = reserve(hint);
  define(name, body);
  return name;
}

bool RuleTable::defined(const std::string& name) const {
  auto it = bodies_.find(name);
  return it != bodies_.end() && !it->second.empty();
}

std::string RuleTable::text() const {
  std::string out;
  for (const std::string& name : order_) {
    out += name + " ::= " + bodies_.at(name) + "\n";
  }
  return out;
}

}  // namespace tandem::grammar::front
