// Rules every schema may share, defined on first use: whitespace, any string / number /
// integer, and any JSON value.
#include <fmt/format.h>

#include "grammar/json_schema_internal.h"

namespace tandem::grammar::front {

int64_t count_keyword(const Json& schema, const char* key, const std::string& path) {
  const Json& v = schema[key];
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    refuse(key, path, "must be a non-negative integer");
  }
  if (v.get<uint64_t>() > static_cast<uint64_t>(kMaxCount)) {
    refuse(key, path,
           fmt::format("{} is above {}, the largest repeat count a grammar takes", v.dump(),
                       kMaxCount));
  }
  return v.get<int64_t>();
}

Expr SchemaConverter::ws() {
  if (opt_.max_whitespace <= 0) return empty_expr();
  return rule_ref(rules_.add("ws", repeat(char_class([] {
                                            CodePointSet s;
                                            for (char32_t c : {' ', '\t', '\n', '\r'}) s.add(c);
                                            return s;
                                          }()),
                                          0, opt_.max_whitespace)));
}

// "\\uXXXX" for any code point but a surrogate (JSON allows lone surrogate escapes; they
// decode to no character, so the grammars never write one).
Expr SchemaConverter::unicode_escape() {
  CodePointSet hex = CodePointSet::range('0', '9');
  hex.add('a', 'f');
  hex.add('A', 'F');
  const CodePointSet not_d = hex.minus(CodePointSet::single('d')).minus(CodePointSet::single('D'));
  CodePointSet d;
  d.add('d');
  d.add('D');
  return rule_ref(rules_.add(
      "unicode-escape",
      seq({literal("\\u"), alt({seq({char_class(not_d), repeat(char_class(hex), 3, 3)}),
                                seq({char_class(d), char_class(CodePointSet::range('0', '7')),
                                     repeat(char_class(hex), 2, 2)})})})));
}

// One character of a JSON string: raw, a short escape, or \uXXXX (a surrogate pair's two
// escapes count as two units here, which is why length-bounded strings leave pairs out).
Expr SchemaConverter::string_unit(bool with_pairs) {
  CodePointSet plain = CodePointSet::all().minus(CodePointSet::range(0, 0x1F));
  plain = plain.minus(CodePointSet::single('"')).minus(CodePointSet::single('\\'));
  CodePointSet short_escapes;
  for (char32_t c : std::u32string_view(U"\"\\/bfnrt")) short_escapes.add(c);
  std::vector<Expr> options = {char_class(plain), seq({literal("\\"), char_class(short_escapes)}),
                               unicode_escape()};
  if (with_pairs) {
    CodePointSet hex = CodePointSet::range('0', '9');
    hex.add('a', 'f');
    hex.add('A', 'F');
    CodePointSet d, high, low;
    d.add('d');
    d.add('D');
    for (char32_t c : std::u32string_view(U"89abAB")) high.add(c);
    for (char32_t c : std::u32string_view(U"cdefCDEF")) low.add(c);
    options.push_back(
        seq({literal("\\u"), char_class(d), char_class(high), repeat(char_class(hex), 2, 2),
             literal("\\u"), char_class(d), char_class(low), repeat(char_class(hex), 2, 2)}));
  }
  return rule_ref(rules_.add(with_pairs ? "char" : "char-counted", alt(options)));
}

Expr SchemaConverter::any_string() {
  return rule_ref(
      rules_.add("string", seq({literal("\""), star(string_unit(true)), literal("\"")})));
}

Expr SchemaConverter::any_number() {
  const Expr digits = repeat(char_class(CodePointSet::range('0', '9')), 1, kUnbounded);
  CodePointSet e;
  e.add('e');
  e.add('E');
  CodePointSet sign;
  sign.add('+');
  sign.add('-');
  // RFC 8259: number = [ minus ] int [ frac ] [ exp ]
  return rule_ref(rules_.add(
      "number", seq({any_integer(), optional(seq({literal("."), digits})),
                     optional(seq({char_class(e), optional(char_class(sign)), digits}))})));
}

Expr SchemaConverter::any_integer() {
  return rule_ref(rules_.add(
      "integer",
      seq({optional(literal("-")),
           alt({literal("0"), seq({char_class(CodePointSet::range('1', '9')),
                                   star(char_class(CodePointSet::range('0', '9')))})})})));
}

Expr SchemaConverter::any_value() {
  auto it = ref_rules_.find("<any>");
  if (it != ref_rules_.end()) return rule_ref(it->second);
  const std::string value = rules_.reserve("value");
  ref_rules_["<any>"] = value;
  const Expr sep = seq({ws(), literal(","), ws()});
  const Expr member = seq({any_string(), ws(), literal(":"), ws(), rule_ref(value)});
  const std::string object = rules_.add(
      "object", seq({literal("{"), ws(), optional(seq({member, star(seq({sep, member})), ws()})),
                     literal("}")}));
  const std::string array = rules_.add(
      "array", seq({literal("["), ws(),
                    optional(seq({rule_ref(value), star(seq({sep, rule_ref(value)})), ws()})),
                    literal("]")}));
  rules_.define(value, alt({rule_ref(object), rule_ref(array), any_string(), any_number(),
                            literal("true"), literal("false"), literal("null")}));
  return rule_ref(value);
}

}  // namespace tandem::grammar::front
