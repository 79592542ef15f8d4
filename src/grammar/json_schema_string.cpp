// Strings: length bounds, `pattern` (through the regex front end, with JSON Schema's
// unanchored meaning) and the supported formats, themselves written as regexes.
#include <fmt/format.h>

#include <map>

#include "grammar/json_schema_internal.h"
#include "grammar/regex_internal.h"

namespace tandem::grammar::front {
namespace {

// Each regex matches only valid values of its format (RFC 3339 date / time / date-time, RFC
// 4122 uuid, RFC 5321 mailbox without quoted local parts or address literals, dotted-quad
// IPv4). Where the RFC allows variants (lower-case 't' / 'z', leap second 60) the regex keeps
// to the common spelling: every accepted value is valid, not every valid value is accepted.
const std::map<std::string, std::string>& format_regexes() {
  static const std::map<std::string, std::string> formats = [] {
    // Leap years: divisible by 4 but not by 100 (the last two digits), or by 400 (the first
    // two, then "00").
    const std::string leap_yy = "(0[48]|[2468][048]|[13579][26])";
    const std::string leap_cc = "(0[048]|[2468][048]|[13579][26])";
    const std::string date =
        "([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
        "|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)"
        "|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])"
        "|([0-9]{2}" +
        leap_yy + "|" + leap_cc + "00)-02-29)";
    const std::string time =
        "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    const std::string hex = "[0-9a-fA-F]";
    const std::string atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
    const std::string label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    return std::map<std::string, std::string>{
        {"date", date},
        {"time", time},
        {"date-time", date + "T" + time},
        {"uuid", hex + "{8}-" + hex + "{4}-" + hex + "{4}-" + hex + "{4}-" + hex + "{12}"},
        {"email", atom + "(\\." + atom + ")*@" + label + "(\\." + label + ")*"},
        {"ipv4", octet + "(\\." + octet + "){3}"},
    };
  }();
  return formats;
}

}  // namespace

void check_format(const Json& schema, const std::string& path) {
  if (!schema.contains("format")) return;
  const Json& f = schema["format"];
  const auto& formats = format_regexes();
  if (!f.is_string() || !formats.count(f.get<std::string>())) {
    std::string known;
    for (const auto& [name, re] : formats) known += (known.empty() ? "" : ", ") + name;
    refuse("format", path,
           fmt::format("format {} is not supported (supported: {})", f.dump(), known));
  }
}

Expr SchemaConverter::string(const Json& schema, const std::string& path) {
  const Expr quote = literal("\"");
  const bool has_length = schema.contains("minLength") || schema.contains("maxLength");
  const char* length_key = schema.contains("minLength") ? "minLength" : "maxLength";
  if (schema.contains("format")) {
    check_format(schema, path);
    const Json& f = schema["format"];
    const auto& formats = format_regexes();
    if (schema.contains("pattern"))
      refuse("pattern", path, "is not supported together with format");
    if (has_length) refuse(length_key, path, "is not supported together with format");
    const std::string& name = f.get<std::string>();
    return rule_ref(
        rules_.add("format-" + name, seq({quote, regex_expr(formats.at(name), {}), quote})));
  }
  if (schema.contains("pattern")) {
    if (!schema["pattern"].is_string()) refuse("pattern", path, "must be a string");
    // A grammar for "matches the pattern and has this length" would need the intersection of
    // two languages; refused rather than approximated.
    if (has_length) refuse(length_key, path, "is not supported together with pattern");
    Expr body;
    try {
      body =
          regex_expr(schema["pattern"].get<std::string>(), {.json_string = true, .search = true});
    } catch (const GrammarError& e) {
      refuse("pattern", path, e.what());
    }
    return rule_ref(rules_.add("pattern", seq({quote, body, quote})));
  }
  if (!has_length) return any_string();
  const int64_t lo = schema.contains("minLength") ? count_keyword(schema, "minLength", path) : 0;
  const int64_t hi =
      schema.contains("maxLength") ? count_keyword(schema, "maxLength", path) : kUnbounded;
  if (hi != kUnbounded && lo > hi) refuse("minLength", path, "is greater than maxLength");
  // Lengths count code points: one unit of string_unit(false) is one code point.
  const Expr unit = string_unit(false);
  return seq({quote, repeat(unit, lo, hi), quote});
}

}  // namespace tandem::grammar::front
