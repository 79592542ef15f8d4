#include "chat_template/operators.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "chat_template/errors.h"
#include "chat_template/methods.h"
#include "chat_template/py_format.h"
#include "chat_template/py_repr.h"
#include "chat_template/py_string.h"
#include "chat_template/unicode.h"

namespace tandem::jinja {

void fail_undefined(const Value& v) {
  render_fail("{}", v.undefined_hint());
}

static const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::kAdd:
      return "+";
    case BinOp::kSub:
      return "-";
    case BinOp::kMul:
      return "*";
    case BinOp::kDiv:
      return "/";
    case BinOp::kFloorDiv:
      return "//";
    case BinOp::kMod:
      return "%";
    case BinOp::kPow:
      return "**";
  }
  return "?";
}

[[noreturn]] static void unsupported(BinOp op, const Value& a, const Value& b) {
  render_fail("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op), type_name(a),
              type_name(b));
}

[[noreturn]] static void overflow() {
  render_fail("integer overflow (Python integers are unbounded; this engine's are 64-bit)");
}

// Integer + - * with the overflow check (the result is computed before it is used).
template <typename Op>
static Value checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) overflow();
  return Value::integer(r);
}

// Python's float floor division and modulo (the result of % takes the divisor's sign).
static double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0.0 && ((b < 0) != (m < 0))) m += b;
  if (m == 0.0) m = std::copysign(0.0, b);
  return m;
}

static double py_floordiv(double a, double b) {
  double m = std::fmod(a, b);
  double div = (a - m) / b;
  if (m != 0.0 && ((b < 0) != (m < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1.0;
  return floor_div;
}

static Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += seq.str();
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.is_tuple());
}

static Value arithmetic(BinOp op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case BinOp::kAdd:
        return checked(
            [](int64_t p, int64_t q, int64_t* r) { return __builtin_add_overflow(p, q, r); }, x, y);
      case BinOp::kSub:
        return checked(
            [](int64_t p, int64_t q, int64_t* r) { return __builtin_sub_overflow(p, q, r); }, x, y);
      case BinOp::kMul:
        return checked(
            [](int64_t p, int64_t q, int64_t* r) { return __builtin_mul_overflow(p, q, r); }, x, y);
      case BinOp::kDiv:
        if (y == 0) render_fail("division by zero");
        return Value::number(static_cast<double>(x) / static_cast<double>(y));
      case BinOp::kFloorDiv: {
        if (y == 0) render_fail("integer division or modulo by zero");
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
        return Value::integer(q);
      }
      case BinOp::kMod: {
        if (y == 0) render_fail("integer division or modulo by zero");
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return Value::integer(m);
      }
      case BinOp::kPow: {
        if (y < 0) {
          if (x == 0) render_fail("0.0 cannot be raised to a negative power");
          return Value::number(std::pow(static_cast<double>(x), static_cast<double>(y)));
        }
        int64_t result = 1;
        for (int64_t i = 0; i < y; ++i) {
          if (__builtin_mul_overflow(result, x, &result)) overflow();
          if (result == 0 || result == 1) break;
        }
        return Value::integer(result);
      }
    }
  }
  double x = a.as_double(), y = b.as_double();
  switch (op) {
    case BinOp::kAdd:
      return Value::number(x + y);
    case BinOp::kSub:
      return Value::number(x - y);
    case BinOp::kMul:
      return Value::number(x * y);
    case BinOp::kDiv:
      if (y == 0.0) render_fail("float division by zero");
      return Value::number(x / y);
    case BinOp::kFloorDiv:
      if (y == 0.0) render_fail("float floor division by zero");
      return Value::number(py_floordiv(x, y));
    case BinOp::kMod:
      if (y == 0.0) render_fail("float modulo");
      return Value::number(py_fmod(x, y));
    case BinOp::kPow: {
      if (x == 0.0 && y < 0) render_fail("0.0 cannot be raised to a negative power");
      double r = std::pow(x, y);
      // Unlike * and +, Python's float ** raises on overflow instead of giving inf.
      if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
        render_fail("(34, 'Numerical result out of range')");
      }
      if (std::isnan(r) && x < 0 && std::isfinite(y)) {
        // Python gives a complex number here, which this engine does not have.
        render_fail("a negative number to a fractional power is complex; not supported");
      }
      return Value::number(r);
    }
  }
  return {};
}

Value binary_op(BinOp op, const Value& a, const Value& b) {
  // str % x formats even when x is undefined (Python takes it for a mapping).
  if (op == BinOp::kMod && a.is_string()) return Value::string(percent_format(a.str(), b));
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  switch (op) {
    case BinOp::kAdd:
      if (a.is_string() && b.is_string()) {
        // Markup + str escapes the plain side (markupsafe), so |safe output stays safe.
        if (a.is_markup() || b.is_markup()) {
          std::string l = a.is_markup() ? a.str() : py::html_escape(a.str());
          std::string r = b.is_markup() ? b.str() : py::html_escape(b.str());
          return Value::string(l + r, true);
        }
        return Value::string(a.str() + b.str());
      }
      if (a.is_string()) {
        render_fail("can only concatenate str (not \"{}\") to str", type_name(b));
      }
      if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        std::vector<Value> out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(out), a.is_tuple());
      }
      if (a.is_list()) {
        render_fail("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b),
                    type_name(a));
      }
      break;
    case BinOp::kMul:
      if ((a.is_string() || a.is_list()) && b.is_integral()) return repeat(a, b.as_int());
      if (a.is_integral() && (b.is_string() || b.is_list())) return repeat(b, a.as_int());
      if (a.is_string() || b.is_string()) {
        render_fail("can't multiply sequence by non-int of type '{}'",
                    type_name(a.is_string() ? b : a));
      }
      break;
    case BinOp::kMod:
      if (a.is_string()) return Value::string(percent_format(a.str(), b));
      break;
    default:
      break;
  }
  unsupported(op, a, b);
}

int64_t int_of_float(double d) {
  if (std::isnan(d)) render_fail("cannot convert float NaN to integer");
  if (std::isinf(d)) render_fail("cannot convert float infinity to integer");
  const double t = std::trunc(d);
  if (!(t >= -9223372036854775808.0 && t < 9223372036854775808.0))
    render_fail("int() of {} does not fit in 64 bits", d);
  return static_cast<int64_t>(t);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return Value::number(-v.as_double());
  if (v.is_integral()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return Value::integer(-v.as_int());
  }
  render_fail("bad operand type for unary -: '{}'", type_name(v));
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_float()) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  render_fail("bad operand type for unary +: '{}'", type_name(v));
}

// Three-way ordering for <, <=, >, >=; throws Python's TypeError for unorderable pairs.
static int order(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return order(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  render_fail("'{}' not supported between instances of '{}' and '{}'", op, type_name(a),
              type_name(b));
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::kEq:
      return equals(a, b);
    case CmpOp::kNe:
      return !equals(a, b);
    case CmpOp::kLt:
      return order(a, b, "<") < 0;
    case CmpOp::kLe:
      return order(a, b, "<=") <= 0;
    case CmpOp::kGt:
      return order(a, b, ">") > 0;
    case CmpOp::kGe:
      return order(a, b, ">=") >= 0;
    case CmpOp::kIn:
      return contains(b, a);
    case CmpOp::kNotIn:
      return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;  // Undefined iterates as empty
    case Value::Kind::kString:
      if (!item.is_string()) {
        render_fail("'in <string>' requires string as left operand, not {}", type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& x : container.items()) {
        if (equals(x, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!hashable(item)) render_fail("unhashable type: '{}'", type_name(item));
      return container.dict().find(item) != nullptr;
    case Value::Kind::kIter: {
      // `x in generator` consumes it up to the match.
      const IterData& it = container.iter();
      size_t i = container.is_generator() ? it.consumed : 0;
      for (; i < it.items.size(); ++i) {
        if (equals(it.items[i], item)) {
          if (container.is_generator()) it.consumed = i + 1;
          return true;
        }
      }
      if (container.is_generator()) it.consumed = it.items.size();
      if (it.has_deferred_error) render_fail("{}", it.deferred_error);
      return false;
    }
    default:
      render_fail("argument of type '{}' is not iterable", type_name(container));
  }
}

// Jinja's object_type_repr, used in undefined messages: "dict object", "None".
static std::string object_type(const Value& obj) {
  if (obj.is_none()) return "None";
  return type_name(obj) + " object";
}

static Value missing_attr(const Value& obj, std::string_view name) {
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type(obj), name));
}

Value get_attr(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      fail_undefined(obj);
    case Value::Kind::kObject:
      return obj.object()->attr(name);
    case Value::Kind::kList: {
      const auto& fields = obj.list_data().fields;
      for (size_t i = 0; i < fields.size(); ++i) {
        if (fields[i] == name) return obj.items()[i];
      }
      if (auto m = method(obj, name)) return *m;
      return missing_attr(obj, name);
    }
    case Value::Kind::kString:
      if (auto m = method(obj, name)) return *m;
      return missing_attr(obj, name);
    case Value::Kind::kDict:
      // A dict method wins over a key of the same name, as in Jinja (x.items is the method).
      if (auto m = method(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      return missing_attr(obj, name);
    default:
      return missing_attr(obj, name);
  }
}

// Python index normalisation; false when out of range.
static bool normalize_index(int64_t& i, size_t size) {
  if (i < 0) i += static_cast<int64_t>(size);
  return i >= 0 && i < static_cast<int64_t>(size);
}

Value digits_key(const std::string& digits) {
  try {
    return Value::integer(std::stoll(digits));
  } catch (const std::out_of_range&) {
    render_fail("index {} does not fit in 64 bits", digits);
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto no_element = [&]() {
    if (key.is_string()) return get_attr(obj, key.str());
    return Value::undefined(object_type(obj) + " has no element " + repr(key));
  };
  switch (obj.kind()) {
    case Value::Kind::kList:
      if (key.is_integral()) {
        int64_t i = key.as_int();
        if (normalize_index(i, obj.items().size())) return obj.items()[static_cast<size_t>(i)];
      }
      return no_element();
    case Value::Kind::kString:
      if (key.is_integral()) {
        std::u32string text = unicode::decode(obj.str());
        int64_t i = key.as_int();
        if (normalize_index(i, text.size())) {
          return Value::string(unicode::encode(std::u32string(1, text[static_cast<size_t>(i)])));
        }
      }
      return no_element();
    case Value::Kind::kDict:
      if (hashable(key)) {
        if (const Value* v = obj.dict().find(key)) return *v;
      }
      return no_element();
    default:
      return no_element();
  }
}

// Python's slice.indices(): resolves None and negative bounds against the length.
static void slice_bounds(const Value& start, const Value& stop, const Value& step, int64_t len,
                         int64_t& b, int64_t& e, int64_t& s) {
  auto as_index = [](const Value& v) -> int64_t {
    if (!v.is_integral()) {
      render_fail("slice indices must be integers or None, not '{}'", type_name(v));
    }
    return v.as_int();
  };
  s = step.is_none() ? 1 : as_index(step);
  if (s == 0) render_fail("slice step cannot be zero");
  auto resolve = [&](const Value& v, int64_t fallback) {
    if (v.is_none()) return fallback;
    int64_t x = as_index(v);
    if (x < 0) {
      x += len;
      if (x < 0) x = s < 0 ? -1 : 0;
    } else if (x >= len) {
      x = s < 0 ? len - 1 : len;
    }
    return x;
  };
  b = resolve(start, s < 0 ? len - 1 : 0);
  e = resolve(stop, s < 0 ? -1 : len);
}

template <typename T>
static T slice_of(const T& seq, int64_t b, int64_t e, int64_t s) {
  T out;
  if (s > 0) {
    for (int64_t i = b; i < e; i += s) out.push_back(seq[static_cast<size_t>(i)]);
  } else {
    for (int64_t i = b; i > e; i += s) out.push_back(seq[static_cast<size_t>(i)]);
  }
  return out;
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  int64_t b = 0, e = 0, s = 1;
  if (obj.is_string()) {
    std::u32string text = unicode::decode(obj.str());
    slice_bounds(start, stop, step, static_cast<int64_t>(text.size()), b, e, s);
    return Value::string(unicode::encode(slice_of(text, b, e, s)));
  }
  if (obj.is_list()) {
    slice_bounds(start, stop, step, static_cast<int64_t>(obj.items().size()), b, e, s);
    return Value::list(slice_of(obj.items(), b, e, s), obj.is_tuple());
  }
  // Jinja compiles a slice to a plain Python subscript, so this is an error, not undefined.
  if (obj.is_dict()) render_fail("unhashable type: 'slice'");
  render_fail("'{}' object is not subscriptable", type_name(obj));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.items();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().entries.size());
      for (const auto& [k, _] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : unicode::decode(v.str())) {
        chars.push_back(Value::string(unicode::encode(std::u32string(1, c))));
      }
      return chars;
    }
    case Value::Kind::kIter: {
      const IterData& it = v.iter();
      if (!v.is_generator()) return it.items;
      std::vector<Value> rest(it.items.begin() + static_cast<ptrdiff_t>(it.consumed),
                              it.items.end());
      it.consumed = it.items.size();
      if (it.has_deferred_error) render_fail("{}", it.deferred_error);
      return rest;
    }
    default:
      render_fail("'{}' object is not iterable", type_name(v));
  }
}

size_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return unicode::length(v.str());
    case Value::Kind::kList:
      return v.items().size();
    case Value::Kind::kDict:
      return v.dict().entries.size();
    case Value::Kind::kIter:
      if (!v.is_generator()) return v.iter().items.size();
      render_fail("object of type '{}' has no len()", type_name(v));
    default:
      render_fail("object of type '{}' has no len()", type_name(v));
  }
}

}  // namespace tandem::jinja
