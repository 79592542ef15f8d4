// Recursive-descent parser for regex.h's subset. Where Python `re` and ECMAScript read a
// construct differently (a ']' first in a class, "{,n}"), the construct is refused rather than
// given one reading silently.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <tuple>

#include "grammar/ebnf_writer.h"
#include "grammar/grammar.h"
#include "grammar/regex_ast.h"

namespace tandem::grammar::front {

CodePointSet digit_set() {
  return CodePointSet::range('0', '9');
}

CodePointSet word_set() {
  CodePointSet s = CodePointSet::range('0', '9');
  s.add('A', 'Z');
  s.add('a', 'z');
  s.add('_');
  return s;
}

CodePointSet space_set() {
  // ECMAScript WhiteSpace and LineTerminator.
  CodePointSet s = CodePointSet::range('\t', '\r');
  for (char32_t c : {0x20, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF}) s.add(c);
  s.add(0x2000, 0x200A);
  return s;
}

namespace {

bool is_digit(char32_t c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char32_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
uint32_t hex_value(char32_t c) {
  return is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : c - 'A' + 10;
}

RegexNode chars_node(CodePointSet s) {
  RegexNode n;
  n.kind = RegexNode::kChars;
  n.chars = std::move(s);
  return n;
}

class Parser {
 public:
  explicit Parser(std::string_view regex) : source_(regex) {
    for (size_t pos = 0; pos < regex.size();) {
      try {
        text_ += next_code_point(regex, pos);
      } catch (const GrammarError& e) {
        fail(0, std::string(e.what()));
      }
    }
  }

  RegexNode parse() {
    RegexNode root = parse_alternation();
    if (pos_ < text_.size()) fail(pos_, "unbalanced ')'");
    check_anchors(root, true, true);
    return root;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw GrammarError(fmt::format("regex \"{}\": {} at offset {}", source_, what, at));
  }
  [[noreturn]] void refuse(size_t at, const std::string& construct, const std::string& why) const {
    fail(at, fmt::format("{} is not supported ({})", construct, why));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char32_t peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0;
  }
  bool starts_with(std::u32string_view s) const {
    return std::u32string_view(text_).substr(pos_).starts_with(s);
  }

  RegexNode parse_alternation() {
    RegexNode alt;
    alt.kind = RegexNode::kAlt;
    alt.kids.push_back(parse_sequence());
    while (!at_end() && peek() == '|') {
      ++pos_;
      alt.kids.push_back(parse_sequence());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  RegexNode parse_sequence() {
    RegexNode seq;
    seq.kind = RegexNode::kConcat;
    while (!at_end() && peek() != '|' && peek() != ')') {
      std::optional<RegexNode> atom = parse_atom();
      if (!atom) continue;  // a comment
      seq.kids.push_back(parse_quantifiers(std::move(*atom)));
    }
    if (seq.kids.empty()) return RegexNode{};
    return seq.kids.size() == 1 ? std::move(seq.kids[0]) : seq;
  }

  // {n}, {n,}, {n,m} at pos_, or nullopt (then '{' is a literal, as in both Python and
  // ECMAScript without the u flag). Leaves pos_ after the '}' when it returns a value.
  std::optional<std::pair<int64_t, int64_t>> parse_braces() {
    size_t p = pos_ + 1;
    auto number = [&](int64_t& out) {
      const size_t from = p;
      out = 0;
      while (p < text_.size() && is_digit(text_[p])) {
        out = std::min<int64_t>(out * 10 + (text_[p] - '0'), kMaxRegexRepeat + 1);
        ++p;
      }
      return p > from;
    };
    int64_t lo = 0, hi = 0;
    const bool has_lo = number(lo);
    if (p < text_.size() && text_[p] == '}') {
      if (!has_lo) return std::nullopt;
      hi = lo;
    } else if (p < text_.size() && text_[p] == ',') {
      ++p;
      const bool has_hi = number(hi);
      if (p >= text_.size() || text_[p] != '}') return std::nullopt;
      if (!has_lo) {
        refuse(pos_, "\"{,n}\"",
               "Python reads it as {0,n}, ECMAScript as literal text; write {0,n}");
      }
      if (!has_hi) hi = kUnbounded;
    } else {
      return std::nullopt;
    }
    if (lo > kMaxRegexRepeat || hi > kMaxRegexRepeat) {
      refuse(pos_, "a repeat count above " + std::to_string(kMaxRegexRepeat), "too large");
    }
    if (hi != kUnbounded && lo > hi) fail(pos_, "min repeat greater than max repeat");
    pos_ = p + 1;
    return std::make_pair(lo, hi);
  }

  bool quantifier_next() {
    if (at_end()) return false;
    const char32_t c = peek();
    if (c == '*' || c == '+' || c == '?') return true;
    if (c != '{') return false;
    const size_t save = pos_;
    const bool is_quantifier = parse_braces().has_value();
    pos_ = save;
    return is_quantifier;
  }

  RegexNode parse_quantifiers(RegexNode atom) {
    if (!quantifier_next()) return atom;
    const size_t qpos = pos_;
    if (atom.kind == RegexNode::kBegin || atom.kind == RegexNode::kEnd) {
      fail(qpos, "nothing to repeat (a quantifier after an anchor)");
    }
    int64_t lo = 0, hi = kUnbounded;
    const char32_t c = peek();
    if (c == '{') {
      std::tie(lo, hi) = *parse_braces();
    } else {
      ++pos_;
      if (c == '+') lo = 1;
      if (c == '?') hi = 1;
    }
    // A lazy quantifier matches the same language as the greedy one.
    if (!at_end() && peek() == '?') ++pos_;
    if (!at_end() && peek() == '+') {
      refuse(pos_, "a possessive quantifier", "it changes which strings match");
    }
    if (quantifier_next()) fail(pos_, "multiple repeat");
    RegexNode rep;
    rep.kind = RegexNode::kRepeat;
    rep.min = lo;
    rep.max = hi;
    rep.kids.push_back(std::move(atom));
    return rep;
  }

  std::optional<RegexNode> parse_atom() {
    const size_t start = pos_;
    const char32_t c = peek();
    switch (c) {
      case '(':
        return parse_group();
      case '[':
        ++pos_;
        return chars_node(parse_class(start));
      case '.': {
        ++pos_;
        CodePointSet any = CodePointSet::all();
        return chars_node(any.minus(CodePointSet::single('\n')));
      }
      case '^':
      case '$': {
        ++pos_;
        RegexNode anchor;
        anchor.kind = c == '^' ? RegexNode::kBegin : RegexNode::kEnd;
        anchor.offset = start;
        return anchor;
      }
      case '\\':
        return parse_escape_atom();
      case '*':
      case '+':
      case '?':
        fail(start, "nothing to repeat");
      case '{':
        if (quantifier_next()) fail(start, "nothing to repeat");
        break;
      default:
        break;
    }
    ++pos_;
    return chars_node(CodePointSet::single(c));
  }

  std::optional<RegexNode> parse_group() {
    const size_t start = pos_;
    ++pos_;  // (
    if (peek() == '?') {
      if (starts_with(U"?:")) {
        pos_ += 2;
      } else if (starts_with(U"?P<") || (starts_with(U"?<") && peek(2) != '=' && peek(2) != '!')) {
        pos_ += peek(1) == 'P' ? 3 : 2;
        const size_t name_start = pos_;
        while (!at_end() && peek() != '>') {
          const char32_t n = peek();
          const bool ok = n == '_' || (n >= 'a' && n <= 'z') || (n >= 'A' && n <= 'Z') ||
                          (pos_ > name_start && is_digit(n));
          if (!ok) fail(pos_, "bad character in group name");
          ++pos_;
        }
        if (at_end() || pos_ == name_start) fail(name_start, "missing group name");
        ++pos_;  // >
      } else if (starts_with(U"?#")) {
        while (!at_end() && peek() != ')') ++pos_;
        if (at_end()) fail(start, "missing ), unterminated comment");
        ++pos_;
        return std::nullopt;
      } else if (starts_with(U"?=") || starts_with(U"?!")) {
        refuse(start, "lookahead \"(?" + std::string(1, char(peek(1))) + "\"",
               "a grammar cannot look ahead");
      } else if (starts_with(U"?<=") || starts_with(U"?<!")) {
        refuse(start, "lookbehind \"(?<" + std::string(1, char(peek(2))) + "\"",
               "a grammar cannot look behind");
      } else if (starts_with(U"?P=")) {
        refuse(start, "a named backreference (?P=...)", "backreferences are not regular");
      } else if (starts_with(U"?>")) {
        refuse(start, "an atomic group (?>...)", "it changes which strings match");
      } else if (starts_with(U"?(")) {
        refuse(start, "a conditional group (?(...)...)", "it depends on a backreference");
      } else {
        refuse(start, "inline flags (?...)", "only the default flags are supported");
      }
    }
    // The parser and the emitter recurse once per level: a request must not blow the stack.
    if (++depth_ > kMaxRegexNesting) {
      refuse(start, fmt::format("nesting groups deeper than {}", kMaxRegexNesting), "too deep");
    }
    RegexNode inner = parse_alternation();
    --depth_;
    if (at_end() || peek() != ')') fail(start, "missing ), unterminated group");
    ++pos_;
    return inner;
  }

  std::optional<RegexNode> parse_escape_atom() {
    const size_t start = pos_;
    const char32_t e = peek(1);
    switch (e) {
      case 'b':
        refuse(start, "the word boundary \\b", "a grammar cannot look around");
      case 'B':
        refuse(start, "the non-boundary \\B", "a grammar cannot look around");
      case 'A':
      case 'Z':
      case 'z':
      case 'G':
        refuse(start, fmt::format("the anchor \\{}", char(e)), "use ^ and $ at the ends");
      case 'k':
        refuse(start, "a named backreference \\k", "backreferences are not regular");
      default:
        break;
    }
    if (e >= '1' && e <= '9') refuse(start, "a backreference", "backreferences are not regular");
    return chars_node(parse_escape(false));
  }

  // The character set of the escape at pos_ ('\\'), inside a class or not.
  CodePointSet parse_escape(bool in_class) {
    const size_t start = pos_;
    ++pos_;
    if (at_end()) fail(start, "bad escape (end of pattern)");
    const char32_t e = peek();
    ++pos_;
    switch (e) {
      case 'd':
        return digit_set();
      case 'D':
        return digit_set().complement();
      case 'w':
        return word_set();
      case 'W':
        return word_set().complement();
      case 's':
        return space_set();
      case 'S':
        return space_set().complement();
      case 'n':
        return CodePointSet::single('\n');
      case 't':
        return CodePointSet::single('\t');
      case 'r':
        return CodePointSet::single('\r');
      case 'f':
        return CodePointSet::single('\f');
      case 'v':
        return CodePointSet::single('\v');
      case 'a':
        return CodePointSet::single(0x07);
      case 'b':
        if (in_class) return CodePointSet::single(0x08);
        break;
      case '0':
        if (is_digit(peek())) refuse(start, "an octal escape", "write \\xHH");
        return CodePointSet::single(0);
      case 'x':
        return CodePointSet::single(hex_escape(start, 2));
      case 'u':
        return CodePointSet::single(unicode_escape(start));
      case 'U': {
        const uint32_t c = hex_escape(start, 8);
        if (c > kMaxCodePoint) fail(start, "bad escape (code point out of range)");
        return CodePointSet::single(c);
      }
      case 'p':
      case 'P':
        refuse(start, fmt::format("the Unicode property escape \\{}", char(e)),
               "Python re has none");
      case 'c':
        refuse(start, "the control escape \\c", "Python re has none; write \\xHH");
      case 'N':
        refuse(start, "the named character escape \\N", "write \\uHHHH");
      default:
        break;
    }
    const bool alnum = is_digit(e) || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z');
    if (alnum) {
      const std::string what = fmt::format("the escape \\{}", char(e));
      if (in_class && (e == 'B' || e == 'A' || e == 'Z' || is_digit(e))) {
        refuse(start, what, "inside a character class");
      }
      fail(start, "bad escape \\" + std::string(1, char(e)));
    }
    return CodePointSet::single(e);  // an escaped punctuation or non-ASCII character
  }

  uint32_t hex_escape(size_t start, int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (at_end() || !is_hex(peek())) {
        fail(start, fmt::format("incomplete escape (expected {} hex digits)", digits));
      }
      v = v * 16 + hex_value(peek());
      ++pos_;
    }
    return v;
  }

  // \uHHHH, \u{H...} (ECMAScript's u flag) and a \uHHHH\uHHHH surrogate pair (how a JSON
  // Schema pattern written for ECMAScript spells a character beyond the BMP).
  char32_t unicode_escape(size_t start) {
    uint32_t c = 0;
    if (peek() == '{') {
      ++pos_;
      int n = 0;
      while (!at_end() && is_hex(peek()) && n < 7) c = c * 16 + hex_value(peek()), ++pos_, ++n;
      if (n == 0 || at_end() || peek() != '}') fail(start, "incomplete escape \\u{...}");
      ++pos_;
    } else {
      c = hex_escape(start, 4);
    }
    if (c >= 0xD800 && c <= 0xDBFF && starts_with(U"\\u")) {
      const size_t save = pos_;
      pos_ += 2;
      const uint32_t lo = hex_escape(start, 4);
      if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
      pos_ = save;
    }
    if (c > kMaxCodePoint) fail(start, "bad escape (code point out of range)");
    if (c >= kSurrogateFirst && c <= kSurrogateLast) {
      refuse(start, "a lone surrogate escape", "UTF-8 text cannot contain one");
    }
    return c;
  }

  // One class member: a single character (is_single) or a shorthand set such as \d.
  CodePointSet class_atom() {
    if (peek() == '\\') return parse_escape(true);
    const char32_t c = peek();
    ++pos_;
    return CodePointSet::single(c);
  }

  CodePointSet parse_class(size_t start) {
    bool negate = false;
    if (peek() == '^') negate = true, ++pos_;
    if (peek() == ']') {
      refuse(pos_, "a ']' first in a class (or an empty class)",
             "Python reads it as a literal ']', ECMAScript as an empty class; write \\]");
    }
    CodePointSet set;
    while (true) {
      if (at_end()) fail(start, "unterminated character set");
      if (peek() == ']') break;
      const size_t atom_pos = pos_;
      CodePointSet lo = class_atom();
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        CodePointSet hi = class_atom();
        if (!lo.is_single() || !hi.is_single()) fail(atom_pos, "bad character range");
        const char32_t a = lo.ranges()[0].lo, b = hi.ranges()[0].lo;
        if (a > b) fail(atom_pos, "bad character range (reversed)");
        set.add(a, b);
      } else {
        set.add(lo);
      }
    }
    ++pos_;  // ]
    if (negate) set = set.complement();
    if (set.empty()) fail(start, "a class that matches nothing");
    return set;
  }

  // ^ may stand only where nothing can have been matched before it, $ only where nothing can
  // follow it; inside a repeat that can run twice, neither holds.
  void check_anchors(const RegexNode& n, bool at_start, bool at_end) const {
    switch (n.kind) {
      case RegexNode::kBegin:
        if (!at_start) fail(n.offset, "'^' that is not at the start is not supported");
        return;
      case RegexNode::kEnd:
        if (!at_end) fail(n.offset, "'$' that is not at the end is not supported");
        return;
      case RegexNode::kAlt:
        for (const RegexNode& k : n.kids) check_anchors(k, at_start, at_end);
        return;
      case RegexNode::kRepeat: {
        const bool once = n.max == 1;
        check_anchors(n.kids[0], at_start && once, at_end && once);
        return;
      }
      case RegexNode::kConcat: {
        const size_t count = n.kids.size();
        for (size_t i = 0; i < count; ++i) {
          bool before_zero = true, after_zero = true;
          for (size_t j = 0; j < i; ++j) before_zero = before_zero && is_anchor(n.kids[j]);
          for (size_t j = i + 1; j < count; ++j) after_zero = after_zero && is_anchor(n.kids[j]);
          check_anchors(n.kids[i], at_start && before_zero, at_end && after_zero);
        }
        return;
      }
      default:
        return;
    }
  }
  static bool is_anchor(const RegexNode& n) {
    return n.kind == RegexNode::kBegin || n.kind == RegexNode::kEnd;
  }

  std::string_view source_;
  std::u32string text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

RegexNode parse_regex(std::string_view regex) {
  return Parser(regex).parse();
}

}  // namespace tandem::grammar::front
