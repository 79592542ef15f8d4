#include <fmt/format.h>

#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "grammar/regex_ast.h"
#include "grammar/regex_internal.h"

namespace tandem::grammar::front {

std::string json_escape(char32_t c) {
  switch (c) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (c < 0x20) return fmt::format("\\u{:04x}", static_cast<uint32_t>(c));
  std::string out;
  append_utf8(out, c);
  return out;
}

Expr json_string_chars(const CodePointSet& s) {
  CodePointSet needs_escape = CodePointSet::range(0, 0x1F);
  needs_escape.add('"');
  needs_escape.add('\\');
  std::vector<Expr> options;
  const CodePointSet plain = s.minus(needs_escape);
  if (!plain.empty()) {
    options.push_back(plain.is_single() ? literal(json_escape(plain.ranges()[0].lo))
                                        : char_class(plain));
  }
  // Short escapes share one class after the backslash.
  CodePointSet short_letters;
  for (auto [c, letter] : {std::pair<char32_t, char32_t>{'"', '"'},
                           {'\\', '\\'},
                           {'\b', 'b'},
                           {'\f', 'f'},
                           {'\n', 'n'},
                           {'\r', 'r'},
                           {'\t', 't'}}) {
    if (s.contains(c)) short_letters.add(letter);
  }
  if (!short_letters.empty()) {
    options.push_back(seq(
        {literal("\\"), short_letters.is_single()
                            ? literal_code_points(std::u32string(1, short_letters.ranges()[0].lo))
                            : char_class(short_letters)}));
  }
  // Controls as \u00XX, one row of 16 per high digit; the hex digit may be in either case.
  // (A control with a short escape is allowed this way too; both spellings decode to it.)
  for (char32_t row = 0; row < 2; ++row) {
    CodePointSet digits;
    for (char32_t nibble = 0; nibble < 16; ++nibble) {
      if (!s.contains(row * 16 + nibble)) continue;
      digits.add(nibble < 10 ? '0' + nibble : 'a' + nibble - 10);
      if (nibble >= 10) digits.add('A' + nibble - 10);
    }
    if (digits.empty()) continue;
    const std::string lead = row == 0 ? "\\u000" : "\\u001";
    options.push_back(seq({literal(lead), digits.is_single()
                                              ? literal(std::string(1, char(digits.ranges()[0].lo)))
                                              : char_class(digits)}));
  }
  return alt(options);
}

namespace {

enum class Anchored { kNo, kYes, kMixed };

Anchored combine(Anchored a, Anchored b) {
  return a == b ? a : Anchored::kMixed;
}

// Whether every match of n starts (front) or ends (!front) at a ^ / $ anchor.
Anchored anchored(const RegexNode& n, bool front) {
  switch (n.kind) {
    case RegexNode::kBegin:
      return front ? Anchored::kYes : Anchored::kNo;
    case RegexNode::kEnd:
      return front ? Anchored::kNo : Anchored::kYes;
    case RegexNode::kAlt: {
      Anchored a = anchored(n.kids[0], front);
      for (size_t i = 1; i < n.kids.size(); ++i) a = combine(a, anchored(n.kids[i], front));
      return a;
    }
    case RegexNode::kRepeat: {
      const Anchored a = anchored(n.kids[0], front);
      return a == Anchored::kYes && n.min == 0 ? Anchored::kMixed : a;
    }
    case RegexNode::kConcat: {
      // The parser allows an anchor only among the zero-width items at the matching end, or
      // inside the first / last consuming item.
      const size_t count = n.kids.size();
      for (size_t k = 0; k < count; ++k) {
        const RegexNode& kid = n.kids[front ? k : count - 1 - k];
        const Anchored a = anchored(kid, front);
        if (a != Anchored::kNo) return a;
        if (kid.kind != RegexNode::kBegin && kid.kind != RegexNode::kEnd) return Anchored::kNo;
      }
      return Anchored::kNo;
    }
    default:
      return Anchored::kNo;
  }
}

class Emitter {
 public:
  explicit Emitter(bool json_string) : json_(json_string) {}

  Expr emit(const RegexNode& n) const {
    switch (n.kind) {
      case RegexNode::kEmpty:
      case RegexNode::kBegin:
      case RegexNode::kEnd:
        return empty_expr();
      case RegexNode::kChars:
        return chars(n.chars);
      case RegexNode::kAlt: {
        std::vector<Expr> options;
        for (const RegexNode& k : n.kids) options.push_back(emit(k));
        return alt(options);
      }
      case RegexNode::kRepeat:
        return repeat(emit(n.kids[0]), n.min, n.max);
      case RegexNode::kConcat: {
        // Runs of single characters become one literal.
        std::vector<Expr> parts;
        std::string run;
        auto flush = [&] {
          if (!run.empty()) parts.push_back(literal(run));
          run.clear();
        };
        for (const RegexNode& k : n.kids) {
          if (k.kind == RegexNode::kChars && k.chars.is_single()) {
            run += encode(k.chars.ranges()[0].lo);
          } else {
            flush();
            parts.push_back(emit(k));
          }
        }
        flush();
        return seq(parts);
      }
    }
    return empty_expr();
  }

  Expr any_text() const { return star(chars(CodePointSet::all())); }

 private:
  std::string encode(char32_t c) const {
    if (json_) return json_escape(c);
    std::string out;
    append_utf8(out, c);
    return out;
  }

  Expr chars(const CodePointSet& s) const {
    if (s.is_single()) return literal(encode(s.ranges()[0].lo));
    return json_ ? json_string_chars(s) : char_class(s);
  }

  bool json_;
};

Expr search_branch(const RegexNode& branch, const Emitter& em, std::string_view regex) {
  const Anchored front = anchored(branch, true), back = anchored(branch, false);
  if (front == Anchored::kMixed || back == Anchored::kMixed) {
    throw GrammarError(fmt::format(
        "regex \"{}\": a ^ or $ that anchors only some alternatives of a group is not supported "
        "(move the anchor out of the group)",
        regex));
  }
  const Expr body = em.emit(branch);
  if (body.is_empty() && (front != Anchored::kYes || back != Anchored::kYes)) return em.any_text();
  return seq({front == Anchored::kYes ? empty_expr() : em.any_text(), body,
              back == Anchored::kYes ? empty_expr() : em.any_text()});
}

}  // namespace

Expr regex_expr(std::string_view regex, const RegexEmitOptions& opt) {
  const RegexNode root = parse_regex(regex);
  const Emitter em(opt.json_string);
  if (!opt.search) return em.emit(root);
  // Top-level alternatives are anchored one by one: "^a|b$" is "a.*" or ".*b".
  if (root.kind != RegexNode::kAlt) return search_branch(root, em, regex);
  std::vector<Expr> options;
  for (const RegexNode& k : root.kids) options.push_back(search_branch(k, em, regex));
  return alt(options);
}

}  // namespace tandem::grammar::front
