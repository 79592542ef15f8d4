#include "chat_template/py_format.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat_template/errors.h"
#include "chat_template/operators.h"
#include "chat_template/py_repr.h"
#include "chat_template/unicode.h"

namespace tandem::jinja {
namespace {

// A parsed format spec; the % operator's conversion specs are mapped onto the same fields.
struct Spec {
  char32_t fill = U' ';
  char align = 0;  // '<', '>', '^', '=' or 0 for the type's default
  char sign = '-';
  bool alternate = false;
  bool zero = false;
  long width = -1;
  char grouping = 0;
  long precision = -1;
  char type = 0;
};

Spec parse_spec(std::string_view s) {
  Spec spec;
  std::u32string t = unicode::decode(s);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (t.size() >= 2 && is_align(t[1])) {
    spec.fill = t[0];
    spec.align = static_cast<char>(t[1]);
    i = 2;
  } else if (!t.empty() && is_align(t[0])) {
    spec.align = static_cast<char>(t[0]);
    i = 1;
  }
  if (i < t.size() && (t[i] == '+' || t[i] == '-' || t[i] == ' '))
    spec.sign = static_cast<char>(t[i++]);
  if (i < t.size() && t[i] == '#') {
    spec.alternate = true;
    ++i;
  }
  if (i < t.size() && t[i] == '0') {
    spec.zero = true;
    ++i;
  }
  // Widths and precisions: Python refuses more digits than fit its integers ("Too many decimal
  // digits in format string"); we also refuse values past a million, which no template needs and
  // which would make one format call allocate that much (a signed overflow here was found by
  // fuzz_chat_template's 1M-run campaign).
  constexpr long kMaxWidth = 1000000;
  auto number = [&]() {
    long n = -1;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      n = (n < 0 ? 0 : n * 10) + (t[i++] - '0');
      if (n > kMaxWidth) render_fail("Too many decimal digits in format string '{}'", s);
    }
    return n;
  };
  spec.width = number();
  if (i < t.size() && (t[i] == ',' || t[i] == '_')) spec.grouping = static_cast<char>(t[i++]);
  if (i < t.size() && t[i] == '.') {
    ++i;
    spec.precision = number();
    if (spec.precision < 0) render_fail("Format specifier missing precision");
  }
  if (i < t.size()) spec.type = static_cast<char>(t[i++]);
  if (i != t.size()) render_fail("Invalid format specifier '{}'", s);
  return spec;
}

std::string group_digits(const std::string& digits, char sep) {
  std::string out;
  size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    if (i && (n - i) % 3 == 0) out += sep;
    out += digits[i];
  }
  return out;
}

// Pads `body` (already signed) to the spec's width.
std::string align(const std::string& sign, const std::string& body, const Spec& spec,
                  char default_align) {
  char a = spec.align ? spec.align : default_align;
  char32_t fill = spec.fill;
  if (spec.zero && !spec.align) {
    a = '=';
    fill = U'0';
  }
  long len = static_cast<long>(unicode::length(sign) + unicode::length(body));
  long pad = spec.width > len ? spec.width - len : 0;
  std::string f;
  unicode::append_utf8(f, fill);
  auto fills = [&](long n) {
    std::string out;
    for (long k = 0; k < n; ++k) out += f;
    return out;
  };
  switch (a) {
    case '<':
      return sign + body + fills(pad);
    case '^':
      return fills(pad / 2) + sign + body + fills(pad - pad / 2);
    case '=':
      return sign + fills(pad) + body;
    default:
      return fills(pad) + sign + body;
  }
}

std::string sign_of(bool negative, const Spec& spec) {
  if (negative) return "-";
  if (spec.sign == '+') return "+";
  if (spec.sign == ' ') return " ";
  return "";
}

std::string format_int(int64_t v, const Spec& spec) {
  bool negative = v < 0;
  uint64_t mag = negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string digits, prefix;
  switch (spec.type) {
    case 'x':
      digits = fmt::format("{:x}", mag);
      prefix = "0x";
      break;
    case 'X':
      digits = fmt::format("{:X}", mag);
      prefix = "0X";
      break;
    case 'o':
      digits = fmt::format("{:o}", mag);
      prefix = "0o";
      break;
    case 'b':
      digits = fmt::format("{:b}", mag);
      prefix = "0b";
      break;
    case 'c': {
      std::string out;
      unicode::append_utf8(out, static_cast<char32_t>(v));
      return align("", out, spec, '<');
    }
    default:
      digits = fmt::format("{}", mag);
  }
  if (spec.grouping) digits = group_digits(digits, spec.grouping);
  std::string sign = sign_of(negative, spec) + (spec.alternate ? prefix : "");
  return align(sign, digits, spec, '>');
}

std::string format_float(double v, const Spec& spec) {
  char type = spec.type;
  bool negative = std::signbit(v) && !std::isnan(v);
  double mag = std::fabs(v);
  std::string body;
  if (type == 0 && spec.precision < 0) {
    body = float_repr(mag);
  } else {
    long precision = spec.precision < 0 ? 6 : spec.precision;
    char conv = type;
    bool percent = type == '%';
    if (percent) {
      mag *= 100;
      conv = 'f';
    }
    // No type with a precision behaves like 'g' but keeps at least one digit after the point.
    if (conv == 0 || conv == 'n') conv = 'g';
    std::string f = std::string("%") + (spec.alternate ? "#" : "") + ".*" + conv;
    char buf[512];
    std::snprintf(buf, sizeof buf, f.c_str(), static_cast<int>(precision), mag);
    body = buf;
    if (type == 0 && std::isfinite(mag) && body.find_first_of(".e") == std::string::npos) {
      body += ".0";
    }
    if (percent) body += '%';
  }
  if (spec.grouping) {
    size_t end = body.find_first_not_of("0123456789");
    if (end == std::string::npos) end = body.size();
    body = group_digits(body.substr(0, end), spec.grouping) + body.substr(end);
  }
  return align(sign_of(negative, spec), body, spec, '>');
}

std::string format_string(const std::string& s, const Spec& spec) {
  std::string body = s;
  if (spec.precision >= 0)
    body = s.substr(0, unicode::byte_offset(s, static_cast<size_t>(spec.precision)));
  return align("", body, spec, '<');
}

std::string format_with_spec(const Value& v, const Spec& spec, std::string_view raw) {
  if (v.is_string()) {
    if (spec.type && spec.type != 's') {
      render_fail("Unknown format code '{}' for object of type 'str'", spec.type);
    }
    return format_string(v.str(), spec);
  }
  if (v.is_integral()) {
    if (v.is_bool() && raw.empty()) return to_str(v);
    if (std::string_view("eEfFgG%").find(spec.type) != std::string_view::npos && spec.type) {
      return format_float(v.as_double(), spec);
    }
    if (spec.type && std::string_view("dxXobcn").find(spec.type) == std::string_view::npos) {
      render_fail("Unknown format code '{}' for object of type 'int'", spec.type);
    }
    return format_int(v.as_int(), spec);
  }
  if (v.is_float()) {
    if (spec.type && std::string_view("eEfFgGn%").find(spec.type) == std::string_view::npos) {
      render_fail("Unknown format code '{}' for object of type 'float'", spec.type);
    }
    return format_float(v.as_double(), spec);
  }
  if (!raw.empty()) render_fail("unsupported format string passed to {}.__format__", type_name(v));
  return to_str(v);
}

}  // namespace

std::string format_value(const Value& v, std::string_view spec) {
  return format_with_spec(v, parse_spec(spec), spec);
}

std::string percent_format(std::string_view fmt, const Value& args) {
  std::vector<Value> positional;
  const DictData* mapping = nullptr;
  // Python treats any non-tuple, non-str argument with __getitem__ as a mapping, and then does
  // not complain about arguments left unused.
  bool mapping_like = false;
  if (args.is_tuple()) {
    positional = args.items();
  } else {
    if (args.is_dict()) mapping = &args.dict();
    mapping_like = args.is_dict() || args.is_list() || args.is_undefined();
    positional = {args};
  }
  size_t next = 0;
  bool used_mapping = false;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) render_fail("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i++];
    if (c != '%') {
      out += c;
      continue;
    }
    if (i >= fmt.size()) render_fail("incomplete format");
    const Value* named = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string_view::npos) render_fail("incomplete format key");
      if (!mapping) render_fail("format requires a mapping");
      std::string key(fmt.substr(i + 1, close - i - 1));
      named = mapping->find(key);
      if (!named) render_fail("KeyError: '{}'", key);
      used_mapping = true;
      i = close + 1;
    }
    Spec spec;
    spec.align = '>';
    for (; i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos;
         ++i) {
      switch (fmt[i]) {
        case '-':
          spec.align = '<';
          break;
        case '+':
          spec.sign = '+';
          break;
        case ' ':
          if (spec.sign != '+') spec.sign = ' ';
          break;
        case '#':
          spec.alternate = true;
          break;
        case '0':
          spec.zero = true;
          break;
      }
    }
    auto number = [&]() -> long {
      if (i < fmt.size() && fmt[i] == '*') {
        ++i;
        const Value& w = take();
        if (!w.is_integral()) render_fail("* wants int");
        return static_cast<long>(w.as_int());
      }
      long n = -1;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
        n = (n < 0 ? 0 : n * 10) + (fmt[i++] - '0');
      }
      return n;
    };
    spec.width = number();
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      spec.precision = std::max(0L, number());
    }
    while (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) render_fail("incomplete format");
    char type = fmt[i++];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (spec.zero && spec.align == '<') spec.zero = false;
    if (spec.zero) spec.align = 0;
    const Value& v = named ? *named : take();
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        Spec s = spec;
        s.zero = false;
        if (!s.align) s.align = '>';
        out += format_string(type == 's' ? to_str(v) : repr(v), s);
        break;
      }
      case 'd':
      case 'i':
      case 'u':
      case 'x':
      case 'X':
      case 'o':
      case 'c': {
        if (!v.is_number()) {
          render_fail("%{} format: a real number is required, not {}", type, type_name(v));
        }
        int64_t n = v.is_float() ? int_of_float(v.as_double()) : v.as_int();
        spec.type = (type == 'i' || type == 'u') ? 'd' : type;
        if (spec.precision >= 0 && type != 'c') {
          // %.3d pads the digits with zeros.
          // The magnitude as unsigned: -n overflows for the most negative integer.
          const uint64_t mag = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
          std::string digits = fmt::format("{}", mag);
          if (static_cast<long>(digits.size()) < spec.precision) {
            digits = std::string(static_cast<size_t>(spec.precision) - digits.size(), '0') + digits;
          }
          out += align(sign_of(n < 0, spec), digits, spec, '>');
        } else {
          out += format_int(n, spec);
        }
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (!v.is_number()) {
          render_fail("must be real number, not {}", type_name(v));
        }
        spec.type = type;
        if (spec.precision < 0) spec.precision = 6;
        out += format_float(v.as_double(), spec);
        break;
      }
      default:
        render_fail("unsupported format character '{}'", type);
    }
  }
  if (!used_mapping && !mapping_like && next < positional.size()) {
    render_fail("not all arguments converted during string formatting");
  }
  return out;
}

std::string str_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  bool manual = false, automatic = false;
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out += '}';
        i += 2;
        continue;
      }
      render_fail("Single '}}' encountered in format string");
    }
    if (c != '{') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      i += 2;
      continue;
    }
    // {field!conv:spec}; nested {} inside the spec are not supported.
    size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) render_fail("expected '}}' before end of string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string_view spec;
    char conversion = 0;
    if (size_t colon = field.find(':'); colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    if (size_t bang = field.find('!'); bang != std::string_view::npos) {
      if (bang + 2 != field.size()) render_fail("expected ':' after conversion specifier");
      conversion = field[bang + 1];
      field = field.substr(0, bang);
    }
    size_t name_end = field.find_first_of(".[");
    std::string_view name = field.substr(0, name_end);
    Value v;
    if (name.empty()) {
      if (manual)
        render_fail("cannot switch from manual field specification to automatic field numbering");
      automatic = true;
      if (auto_index >= args.args.size())
        render_fail("Replacement index {} out of range", auto_index);
      v = args.args[auto_index++];
    } else if (std::isdigit(static_cast<unsigned char>(name[0]))) {
      if (automatic)
        render_fail("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      // from_chars, not stoul: an index beyond size_t is out of range like any other (found by
      // fuzz/chat_template.cpp: stoul threw std::out_of_range).
      size_t k = 0;
      const auto parsed = std::from_chars(name.data(), name.data() + name.size(), k);
      if (parsed.ec != std::errc() || k >= args.args.size())
        render_fail("Replacement index {} out of range", name);
      v = args.args[k];
    } else {
      bool found = false;
      for (const auto& [key, val] : args.kwargs) {
        if (key == name) {
          v = val;
          found = true;
        }
      }
      if (!found) render_fail("KeyError: '{}'", name);
    }
    // .attr and [key] accessors.
    std::string_view rest = name_end == std::string_view::npos ? "" : field.substr(name_end);
    while (!rest.empty()) {
      if (rest[0] == '.') {
        size_t end = rest.find_first_of(".[", 1);
        v = get_attr(v, rest.substr(1, end == std::string_view::npos ? end : end - 1));
        rest = end == std::string_view::npos ? "" : rest.substr(end);
      } else {
        size_t end = rest.find(']');
        if (end == std::string_view::npos) render_fail("Missing ']' in format string");
        std::string key(rest.substr(1, end - 1));
        bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = get_item(v, digits ? digits_key(key) : Value::string(key));
        rest = rest.substr(end + 1);
      }
    }
    if (conversion == 'r' || conversion == 'a') {
      v = Value::string(repr(v));
    } else if (conversion == 's') {
      v = Value::string(to_str(v));
    } else if (conversion) {
      render_fail("Unknown conversion specifier {}", conversion);
    }
    out += format_value(v, spec);
  }
  return out;
}

}  // namespace tandem::jinja
