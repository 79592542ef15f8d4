// grammar.h's EBNF dialect -> ir::Grammar, by recursive descent. A rule ends where the next
// `name ::=` begins, so rules may span lines without terminators.
#include <string>
#include <unordered_map>

#include "grammar/analysis.h"
#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammar/utf8_ranges.h"

namespace tandem::grammar::ir {

namespace {

// Large enough for JSON Schema lengths, small enough that expanding copies stays cheap.
constexpr int64_t kMaxRepeat = 10000;
// Parentheses nest at most this deep: the parser and the compiler recurse on the nesting, and
// the grammar text may come from a request.
constexpr int kMaxNesting = 500;

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9') || c == '-';
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Grammar run() {
    skip_space();
    while (!eof()) {
      const size_t at = pos_;
      if (!is_name_start(peek())) fail(at, "expected a rule name");
      std::string name = parse_name();
      skip_space();
      if (s_.substr(pos_, 3) != "::=") fail(pos_, "expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      const int32_t body = parse_choice();
      if (!eof() && peek() == ')') fail(pos_, "unbalanced ')'");
      if (rule_index_.count(name)) fail(at, "rule '" + name + "' is defined twice");
      const auto [line, col] = line_col(at);
      rule_index_[name] = static_cast<int32_t>(g_.rules.size());
      g_.rules.push_back({name, body, line, col});
      skip_space();
    }
    for (const auto& [expr, name, at] : refs_) {
      auto it = rule_index_.find(name);
      if (it == rule_index_.end()) fail(at, "undefined rule '" + name + "'");
      g_.exprs[expr].rule = it->second;
    }
    auto root = rule_index_.find("root");
    if (root == rule_index_.end()) throw GrammarError("the grammar has no rule named 'root'");
    g_.root = root->second;
    check_grammar(g_, analyze(g_));
    return std::move(g_);
  }

 private:
  struct Ref {
    int32_t expr;
    std::string name;
    size_t at;
  };

  bool eof() const { return pos_ >= s_.size(); }
  char peek() const { return s_[pos_]; }

  std::pair<int, int> line_col(size_t at) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line, col = 1;
      } else if ((static_cast<uint8_t>(s_[i]) & 0xC0) != 0x80) {
        ++col;  // columns count code points, not bytes
      }
    }
    return {line, col};
  }

  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    const auto [line, col] = line_col(at);
    throw GrammarError("grammar line " + std::to_string(line) + ":" + std::to_string(col) + ": " +
                       msg);
  }

  void skip_space() {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t b = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }

  // At `name ::=`: the current rule's body has ended.
  bool at_rule_start() {
    if (eof() || !is_name_start(peek())) return false;
    const size_t save = pos_;
    parse_name();
    skip_space();
    const bool yes = s_.substr(pos_, 3) == "::=";
    pos_ = save;
    return yes;
  }

  int32_t parse_choice() {
    std::vector<int32_t> alts{parse_seq()};
    while (!eof() && peek() == '|') {
      ++pos_;
      alts.push_back(parse_seq());
    }
    if (alts.size() == 1) return alts[0];
    Expr e;
    e.op = Op::kChoice;
    e.items = std::move(alts);
    return g_.add(std::move(e));
  }

  int32_t parse_seq() {
    std::vector<int32_t> items;
    for (;;) {
      skip_space();
      if (eof() || peek() == '|' || peek() == ')' || at_rule_start()) break;
      items.push_back(parse_postfix());
    }
    if (items.size() == 1) return items[0];
    Expr e;
    if (!items.empty()) e.op = Op::kSeq, e.items = std::move(items);
    return g_.add(std::move(e));  // an empty sequence is the empty literal
  }

  int64_t parse_count() {
    skip_space();
    if (eof() || peek() < '0' || peek() > '9') fail(pos_, "expected a number in {n,m}");
    int64_t v = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) fail(pos_, "repetition count above " + std::to_string(kMaxRepeat));
      ++pos_;
    }
    skip_space();
    return v;
  }

  int32_t parse_postfix() {
    int32_t x = parse_atom();
    for (;;) {
      skip_space();
      if (eof()) return x;
      const size_t at = pos_;
      int64_t lo, hi;
      const char c = peek();
      if (c == '*') {
        lo = 0, hi = kUnbounded, ++pos_;
      } else if (c == '+') {
        lo = 1, hi = kUnbounded, ++pos_;
      } else if (c == '?') {
        lo = 0, hi = 1, ++pos_;
      } else if (c == '{') {
        ++pos_;
        lo = hi = parse_count();
        if (!eof() && peek() == ',') {
          ++pos_;
          skip_space();
          hi = (!eof() && peek() == '}') ? kUnbounded : parse_count();
        }
        if (eof() || peek() != '}') fail(pos_, "expected '}' to close the repetition");
        ++pos_;
        if (hi != kUnbounded && hi < lo) fail(at, "repetition {n,m} with m < n");
      } else {
        return x;
      }
      Expr e;
      e.op = Op::kRepeat;
      e.items = {x};
      e.min = static_cast<int32_t>(lo);
      e.max = static_cast<int32_t>(hi);
      x = g_.add(std::move(e));
    }
  }

  int32_t parse_atom() {
    const size_t at = pos_;
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '(') {
      ++pos_;
      if (++depth_ > kMaxNesting)
        fail(at, "parentheses nested deeper than " + std::to_string(kMaxNesting));
      const int32_t x = parse_choice();
      --depth_;
      skip_space();
      if (eof() || peek() != ')') fail(at, "unclosed '('");
      ++pos_;
      return x;
    }
    if (is_name_start(c)) {
      Expr e;
      e.op = Op::kRef;
      const int32_t id = g_.add(std::move(e));
      refs_.push_back({id, parse_name(), at});
      return id;
    }
    fail(at, std::string("unexpected '") + c + "'");
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (eof()) fail(pos_, "truncated escape");
      const char c = peek();
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        fail(pos_, "expected a hex digit");
      }
      v = v * 16 + d;
      ++pos_;
    }
    return v;
  }

  // One code point of a literal or class, escapes decoded. Surrogate pairs written as two \u
  // escapes combine; lone surrogates are an error in literals (no UTF-8 encodes them) and are
  // passed through in classes (where they are removed from the range).
  uint32_t parse_char(bool in_class) {
    const size_t at = pos_;
    const uint8_t b = static_cast<uint8_t>(peek());
    if (b == '\\') {
      ++pos_;
      if (eof()) fail(at, "truncated escape");
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"':
          return '"';
        case '\\':
          return '\\';
        case '/':
          return '/';
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case 'x':
          return hex(2);
        case 'U': {
          const uint32_t v = hex(8);
          if (v > 0x10FFFF) fail(at, "code point above U+10FFFF");
          return v;
        }
        case 'u': {
          uint32_t v = hex(4);
          if (v >= 0xD800 && v <= 0xDBFF && s_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            const uint32_t lo = hex(4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
            pos_ = save;
          }
          if (!in_class && v >= 0xD800 && v <= 0xDFFF) fail(at, "lone surrogate in a literal");
          return v;
        }
        case ']':
        case '[':
        case '-':
        case '^':
          if (in_class) return static_cast<uint8_t>(e);
          [[fallthrough]];
        default:
          fail(at, std::string("unknown escape '\\") + e + "'");
      }
    }
    // A raw UTF-8 sequence from the grammar text.
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + len > s_.size()) fail(at, "invalid UTF-8 in the grammar");
    uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int i = 1; i < len; ++i) {
      const uint8_t c = static_cast<uint8_t>(s_[pos_ + i]);
      if ((c & 0xC0) != 0x80) fail(at, "invalid UTF-8 in the grammar");
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail(at, "invalid UTF-8 in the grammar");
    }
    pos_ += len;
    return cp;
  }

  int32_t parse_literal() {
    const size_t at = pos_;
    ++pos_;
    Expr e;
    for (;;) {
      if (eof() || peek() == '\n') fail(at, "unterminated string literal");
      if (peek() == '"') break;
      append_utf8(e.bytes, parse_char(false));
    }
    ++pos_;
    return g_.add(std::move(e));
  }

  int32_t parse_class() {
    const size_t at = pos_;
    ++pos_;
    Expr e;
    e.op = Op::kClass;
    if (!eof() && peek() == '^') e.negated = true, ++pos_;
    for (;;) {
      if (eof() || peek() == '\n') fail(at, "unterminated character class");
      if (peek() == ']') break;
      const size_t item = pos_;
      const uint32_t lo = parse_char(true);
      uint32_t hi = lo;
      if (!eof() && peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
        ++pos_;
        hi = parse_char(true);
        if (hi < lo) fail(item, "character range out of order");
      }
      e.ranges.push_back({lo, hi});
    }
    ++pos_;
    return g_.add(std::move(e));
  }

  std::string_view s_;
  size_t pos_ = 0;
  int depth_ = 0;
  Grammar g_;
  std::unordered_map<std::string, int32_t> rule_index_;
  std::vector<Ref> refs_;
};

}  // namespace

Grammar parse_ebnf(std::string_view text) {
  return Parser(text).run();
}

}  // namespace tandem::grammar::ir
