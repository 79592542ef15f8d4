#include "chat_template/py_repr.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "chat_template/unicode.h"

namespace tandem::jinja {

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in d.ddde±x form; Python lays them out by the exponent.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  bool negative = sci.front() == '-';
  if (negative) sci.remove_prefix(1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = std::stoi(std::string(sci.substr(e_pos + 1)));
  std::string out = negative ? "-" : "";
  if (exp < -4 || exp >= 16) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp));
  } else if (exp < 0) {
    out += "0.";
    out.append(static_cast<size_t>(-exp - 1), '0');
    out += digits;
  } else {
    size_t int_digits = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_digits) {
      out += digits;
      out.append(int_digits - digits.size(), '0');
      out += ".0";
    } else {
      out.append(digits, 0, int_digits);
      out += '.';
      out.append(digits, int_digits);
    }
  }
  return out;
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : unicode::decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c < 0x7F || unicode::is_printable(c)) {
      unicode::append_utf8(out, c);
    } else if (c <= 0xFF) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else if (c <= 0xFFFF) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    }
  }
  out += quote;
  return out;
}

static void append_repr(std::string& out, const Value& v);

static void append_sequence(std::string& out, const Value& v) {
  const auto& items = v.items();
  out += v.is_tuple() ? '(' : '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i]);
  }
  if (v.is_tuple() && items.size() == 1) out += ',';
  out += v.is_tuple() ? ')' : ']';
}

static void append_dict(std::string& out, const DictData& d) {
  out += '{';
  bool first = true;
  for (const auto& [k, val] : d.entries) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k);
    out += ": ";
    append_repr(out, val);
  }
  out += '}';
}

static void append_repr(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      out += "Undefined";
      return;
    case Value::Kind::kString:
      if (v.is_markup()) {
        out += "Markup(" + string_repr(v.str()) + ")";
      } else {
        out += string_repr(v.str());
      }
      return;
    default:
      append_str(out, v);
  }
}

void append_str(std::string& out, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return;
    case Value::Kind::kNone:
      out += "None";
      return;
    case Value::Kind::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Value::Kind::kInt:
      out += fmt::format("{}", v.as_int());
      return;
    case Value::Kind::kFloat:
      out += float_repr(v.as_double());
      return;
    case Value::Kind::kString:
      out += v.str();
      return;
    case Value::Kind::kList:
      append_sequence(out, v);
      return;
    case Value::Kind::kDict:
      append_dict(out, v.dict());
      return;
    case Value::Kind::kCallable:
      out += "<function " + v.callable().name + ">";
      return;
    case Value::Kind::kObject:
      out += v.object()->repr();
      return;
    case Value::Kind::kIter:
      if (v.is_generator()) {
        out += "<" + v.iter().name + " object>";  // Python adds an address here
      } else {
        out += v.iter().name + "([";
        for (size_t i = 0; i < v.iter().items.size(); ++i) {
          if (i) out += ", ";
          append_repr(out, v.iter().items[i]);
        }
        out += "])";
      }
      return;
  }
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v);
  return out;
}

}  // namespace tandem::jinja
