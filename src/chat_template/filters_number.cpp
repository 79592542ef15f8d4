// Number filters: int, float, abs, round, with Python's conversion rules.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "chat_template/args.h"
#include "chat_template/errors.h"
#include "chat_template/filter_fns.h"
#include "chat_template/operators.h"
#include "chat_template/py_repr.h"
#include "chat_template/py_string.h"

namespace tandem::jinja::filters {
namespace {

// Python int(str, base): surrounding whitespace, a sign and single underscores are allowed.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py::strip(text, std::nullopt, py::Side::kBoth);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (base == 16 && s.compare(i, 2, "0x") == 0) i += 2;
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && s[i + 1] != '_') continue;
    digits += s[i];
  }
  if (digits.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long r = std::strtoll(digits.c_str(), &end, base);
  if (*end != '\0' || errno == ERANGE || digits[0] == '-' || digits[0] == '+') return std::nullopt;
  return negative ? -r : r;
}

// Python float(str): whitespace, underscores between digits, inf/nan spellings.
std::optional<double> parse_float(const std::string& text) {
  std::string s = py::strip(text, std::nullopt, py::Side::kBoth);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1])) &&
        i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1])))
      continue;
    clean += s[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (*end != '\0') return std::nullopt;
  return d;
}

Value to_float_value(const Value& v) {
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    if (auto d = parse_float(v.str())) return Value::number(*d);
  }
  return {};
}

}  // namespace

Value f_int(Interp&, const Value& v, const CallArgs& a) {
  Params p("int", a, {"default", "base"});
  Value fallback = p.get(0, Value::integer(0));
  if (v.is_undefined()) fail_undefined(v);  // Undefined.__int__ raises
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    // int(float) raises for inf/nan (and here beyond 64 bits), outside the filter's fallback;
    // a cast past the range was undefined behaviour (fuzz_chat_template's 1M-run campaign:
    // 8.9e23|int).
    return Value::integer(int_of_float(v.as_double()));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.str(), static_cast<int>(p.get_int(1, 10)))) return Value::integer(*i);
    // Jinja's quirk so "42.23"|int gives 42: fall back to int(float(value)).
    Value f = to_float_value(v);
    if (f.is_float() && std::isfinite(f.as_double()))
      return Value::integer(int_of_float(f.as_double()));
  }
  return fallback;
}

Value f_float(Interp&, const Value& v, const CallArgs& a) {
  Params p("float", a, {"default"});
  if (v.is_undefined()) fail_undefined(v);  // Undefined.__float__ raises
  Value f = to_float_value(v);
  return f.is_float() ? f : p.get(0, Value::number(0.0));
}

Value f_abs(Interp&, const Value& v, const CallArgs& a) {
  Params p("abs", a, {});
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_integral()) return v.as_int() < 0 ? negate(v) : Value::integer(v.as_int());
  render_fail("bad operand type for abs(): '{}'", type_name(v));
}

namespace {

// Python round(x, n): correctly rounded, ties to even on the exact binary value; printf does
// the same rounding.
double round_float(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(n, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / scale) * scale;
}

}  // namespace

Value f_round(Interp&, const Value& v, const CallArgs& a) {
  Params p("round", a, {"precision", "method"});
  int64_t precision = p.get_int(0, 0);
  std::string method = p.get_str(1, "common");
  if (!v.is_number()) render_fail("type {} doesn't define __round__ method", type_name(v));
  if (method == "common") {
    if (v.is_integral()) {
      if (precision >= 0) return Value::integer(v.as_int());
      return Value::integer(int_of_float(round_float(v.as_double(), precision)));
    }
    return Value::number(round_float(v.as_double(), precision));
  }
  if (method != "ceil" && method != "floor") render_fail("method must be common, ceil or floor");
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

}  // namespace tandem::jinja::filters
