// Numbers and integers, with minimum / maximum / exclusive bounds turned into an exact grammar
// by digit-range construction. A bound must be an integer (any bound, for type integer, is
// rounded inward to one); a number between bounds is written without an exponent, which every
// such number can be.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "grammar/json_schema_internal.h"

namespace tandem::grammar::front {
namespace {

Expr digit_class(char lo, char hi) {
  return lo == hi ? literal(std::string(1, lo)) : char_class(CodePointSet::range(lo, hi));
}
Expr any_digits(int64_t n) {
  return repeat(digit_class('0', '9'), n, n);
}

// Digit strings of one length from x to y (x <= y, same length): the classic split into a
// run below x's next digit, a free middle and a run up to y.
Expr same_length_range(const std::string& x, const std::string& y) {
  if (x.empty()) return empty_expr();
  if (x[0] == y[0])
    return seq({literal(x.substr(0, 1)), same_length_range(x.substr(1), y.substr(1))});
  const size_t rest = x.size() - 1;
  const bool x_floor = x.find_first_not_of('0', 1) == std::string::npos;
  const bool y_ceil = y.find_first_not_of('9', 1) == std::string::npos;
  std::vector<Expr> options;
  char mid_lo = x[0], mid_hi = y[0];
  if (!x_floor) {
    options.push_back(
        seq({literal(x.substr(0, 1)), same_length_range(x.substr(1), std::string(rest, '9'))}));
    ++mid_lo;
  }
  if (!y_ceil) --mid_hi;
  if (mid_lo <= mid_hi) options.push_back(seq({digit_class(mid_lo, mid_hi), any_digits(rest)}));
  if (!y_ceil) {
    options.push_back(
        seq({literal(y.substr(0, 1)), same_length_range(std::string(rest, '0'), y.substr(1))}));
  }
  return alt(options);
}

// The decimal spellings (no sign, no leading zeros) of the integers a..b, or a.. when b is
// absent.
Expr integer_digits(uint64_t a, std::optional<uint64_t> b) {
  std::vector<Expr> options;
  if (a == 0) {
    options.push_back(literal("0"));
    if (b && *b == 0) return options[0];
    a = 1;
  }
  const std::string as = std::to_string(a);
  const size_t last_len = b ? std::to_string(*b).size() : as.size();
  for (size_t len = as.size(); len <= last_len; ++len) {
    std::string lo(len, '0');
    lo[0] = '1';
    if (len == as.size()) lo = as;
    const std::string hi = b && len == last_len ? std::to_string(*b) : std::string(len, '9');
    options.push_back(same_length_range(lo, hi));
  }
  // Unbounded: every longer spelling.
  if (!b) {
    options.push_back(
        seq({digit_class('1', '9'), repeat(digit_class('0', '9'), as.size(), kUnbounded)}));
  }
  return alt(options);
}

// What the digits after the point may be for one integer part.
enum class Frac { kNone, kZero, kAny, kNonZero };

Frac meet(Frac a, Frac b) {
  if (a == Frac::kNone || b == Frac::kNone) return Frac::kNone;
  if (a == Frac::kAny) return b;
  if (b == Frac::kAny) return a;
  return a == b ? a : Frac::kNone;  // zero and nonzero exclude each other
}

Expr frac_expr(Frac f) {
  const Expr digits = repeat(digit_class('0', '9'), 0, kUnbounded);
  switch (f) {
    case Frac::kAny:
      return optional(seq({literal("."), repeat(digit_class('0', '9'), 1, kUnbounded)}));
    case Frac::kZero:
      return optional(seq({literal("."), repeat(literal("0"), 1, kUnbounded)}));
    case Frac::kNonZero:
      return seq({literal("."), digits, digit_class('1', '9'), digits});
    case Frac::kNone:
      break;
  }
  return empty_expr();
}

struct Magnitude {
  uint64_t value;
  bool exclusive;
};

// Unsigned decimals m with lo <= m (< if exclusive) and m <= hi (likewise), hi optional:
// integer part in lo..hi, with the fraction the two ends allow; nullopt if none exist.
std::optional<Expr> magnitude_range(Magnitude lo, std::optional<Magnitude> hi, bool integer) {
  struct Segment {
    uint64_t from;
    std::optional<uint64_t> to;
    Frac frac;
  };
  const uint64_t a = lo.value;
  auto upper = [&](uint64_t ip) {
    if (!hi || ip < hi->value) return Frac::kAny;
    if (ip == hi->value) return hi->exclusive ? Frac::kNone : Frac::kZero;
    return Frac::kNone;
  };
  std::vector<Segment> segments;
  segments.push_back({a, a, meet(lo.exclusive ? Frac::kNonZero : Frac::kAny, upper(a))});
  if (!hi) {
    if (a < std::numeric_limits<uint64_t>::max())
      segments.push_back({a + 1, std::nullopt, Frac::kAny});
  } else if (hi->value > a) {
    if (hi->value - a > 1) segments.push_back({a + 1, hi->value - 1, Frac::kAny});
    segments.push_back({hi->value, hi->value, upper(hi->value)});
  }
  // An integer needs a fraction that may be empty.
  std::vector<Segment> kept;
  for (Segment s : segments) {
    if (integer) {
      if (s.frac != Frac::kAny && s.frac != Frac::kZero) continue;
      s.frac = Frac::kNone;
    } else if (s.frac == Frac::kNone) {
      continue;
    }
    if (!kept.empty() && kept.back().frac == s.frac && kept.back().to &&
        *kept.back().to + 1 == s.from) {
      kept.back().to = s.to;
    } else {
      kept.push_back(s);
    }
  }
  if (kept.empty()) return std::nullopt;
  std::vector<Expr> options;
  for (const Segment& s : kept) {
    options.push_back(seq({integer_digits(s.from, s.to), frac_expr(s.frac)}));
  }
  return alt(options);
}

// A bound's value as an integer (exact), rounded inward for type integer; nullopt means
// "refuse".
std::optional<IntBound> to_bound(const Json& v, bool exclusive, bool is_lower, bool integer) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    return IntBound{v.get<int64_t>(), exclusive};
  }
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > 9e15) return std::nullopt;
  if (std::floor(d) == d) return IntBound{static_cast<int64_t>(d), exclusive};
  if (!integer) return std::nullopt;
  // Between integers, exclusive or not makes no difference.
  return IntBound{static_cast<int64_t>(is_lower ? std::ceil(d) : std::floor(d)), false};
}

// The tighter of two bounds on the same side.
std::optional<IntBound> tighter(std::optional<IntBound> a, std::optional<IntBound> b,
                                bool is_lower) {
  if (!a) return b;
  if (!b) return a;
  if (a->value != b->value) return (a->value > b->value) == is_lower ? a : b;
  return IntBound{a->value, a->exclusive || b->exclusive};
}

}  // namespace

Expr decimal_range(std::optional<IntBound> lo, std::optional<IntBound> hi, bool integer) {
  std::vector<Expr> options;
  // Negative side: "-" m with m > 0 and -hi <= m <= -lo ("-0" is left to the other side).
  if (!lo || lo->value < 0) {
    Magnitude m_lo{0, true};
    if (hi && hi->value < 0) m_lo = {static_cast<uint64_t>(-(hi->value + 1)) + 1, hi->exclusive};
    std::optional<Magnitude> m_hi;
    if (lo) m_hi = Magnitude{static_cast<uint64_t>(-(lo->value + 1)) + 1, lo->exclusive};
    if (auto e = magnitude_range(m_lo, m_hi, integer)) options.push_back(seq({literal("-"), *e}));
  }
  // Non-negative side.
  if (!hi || hi->value >= 0) {
    Magnitude m_lo{0, false};
    if (lo && lo->value >= 0) m_lo = {static_cast<uint64_t>(lo->value), lo->exclusive};
    std::optional<Magnitude> m_hi;
    if (hi) m_hi = Magnitude{static_cast<uint64_t>(hi->value), hi->exclusive};
    if (auto e = magnitude_range(m_lo, m_hi, integer)) options.push_back(*e);
  }
  if (options.empty()) throw GrammarError("empty numeric range");
  return alt(options);
}

Expr SchemaConverter::number(const Json& schema, const std::string& path, bool integer) {
  if (schema.contains("multipleOf")) {
    const Json& m = schema["multipleOf"];
    if (!(integer && m.is_number() && m.get<double>() == 1.0)) {
      refuse("multipleOf", path, "is supported only as 1 on an integer");
    }
  }
  std::optional<IntBound> lo, hi;
  auto take = [&](const char* key, bool exclusive, bool is_lower) {
    const Json& v = schema[key];
    if (!v.is_number()) refuse(key, path, "must be a number");
    std::optional<IntBound> b = to_bound(v, exclusive, is_lower, integer);
    if (!b) {
      refuse(key, path,
             integer ? "is out of the supported range (|bound| <= 9e15 as a float, or a 64-bit "
                       "integer)"
                     : "a bound on a number must be an integer (up to 64 bits): other bounds "
                       "cannot be expressed exactly as a grammar");
    }
    (is_lower ? lo : hi) = tighter(is_lower ? lo : hi, b, is_lower);
  };
  // Draft 4 wrote exclusiveMinimum / exclusiveMaximum as booleans qualifying minimum / maximum.
  auto draft4 = [&](const char* key) {
    return schema.contains(key) && schema[key].is_boolean() && schema[key].get<bool>();
  };
  if (schema.contains("minimum")) take("minimum", draft4("exclusiveMinimum"), true);
  if (schema.contains("maximum")) take("maximum", draft4("exclusiveMaximum"), false);
  if (schema.contains("exclusiveMinimum") && !schema["exclusiveMinimum"].is_boolean()) {
    take("exclusiveMinimum", true, true);
  }
  if (schema.contains("exclusiveMaximum") && !schema["exclusiveMaximum"].is_boolean()) {
    take("exclusiveMaximum", true, false);
  }
  if (!lo && !hi) return integer ? any_integer() : any_number();
  // INT64_MIN has no positive counterpart; bounds that far out are refused.
  for (auto* b : {&lo, &hi}) {
    if (*b && (*b)->value == std::numeric_limits<int64_t>::min()) {
      refuse(b == &lo ? "minimum" : "maximum", path, "is out of the supported range");
    }
  }
  try {
    return rule_ref(
        rules_.add(integer ? "integer-range" : "number-range", decimal_range(lo, hi, integer)));
  } catch (const GrammarError&) {
    refuse(schema.contains("minimum") ? "minimum" : "exclusiveMinimum", path,
           fmt::format("no {} lies between the bounds", integer ? "integer" : "number"));
  }
}

}  // namespace tandem::grammar::front
