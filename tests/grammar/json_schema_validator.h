// A small JSON Schema validator for the tests: the keywords the front end supports, with JSON
// Schema's own meaning (not the grammar's policies: properties in any order, extra properties
// allowed when additionalProperties is absent, 1.0 is an integer, oneOf means exactly one).
// It judges instances the grammar never saw (mutations) and sentences the grammar generates.
// `pattern` is checked with std::regex (ECMAScript) on ASCII text only; anything else it cannot
// judge makes the verdict kUnknown.
#pragma once

#include <cmath>
#include <cstdint>
#include <regex>
#include <string>

#include "front_test_util.h"

namespace tandem::grammar::test {

enum class Verdict { kValid, kInvalid, kUnknown };

class SchemaValidator {
 public:
  explicit SchemaValidator(const Json& root) : root_(root) {}

  Verdict check(const Json& instance) {
    unknown_ = false;
    const bool ok = valid(root_, instance, 0);
    if (!ok) return Verdict::kInvalid;
    return unknown_ ? Verdict::kUnknown : Verdict::kValid;
  }

 private:
  const Json& resolve(const std::string& ref) {
    std::string decoded;
    for (size_t i = 1; i < ref.size(); ++i) {
      if (ref[i] == '%' && i + 2 < ref.size()) {
        decoded += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        decoded += ref[i];
      }
    }
    return root_.at(Json::json_pointer(decoded));
  }

  // JSON Schema's equality: object members in any order, 1 == 1.0.
  static bool equal(const Json& a, const Json& b) { return nlohmann::json(a) == nlohmann::json(b); }

  static bool has_type(const Json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    if (t == "object") return v.is_object();
    if (t == "number") return v.is_number();
    if (t == "integer") {
      return v.is_number_integer() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    }
    return false;
  }

  static int64_t code_points(const std::string& s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }

  // -1, 0, 1 comparing a number instance with a bound, exactly for integers.
  static int compare(const Json& v, const Json& bound) {
    if (v.is_number_integer() && bound.is_number_integer()) {
      if (v.is_number_unsigned() || bound.is_number_unsigned()) {
        const bool vneg = !v.is_number_unsigned() && v.get<int64_t>() < 0;
        const bool bneg = !bound.is_number_unsigned() && bound.get<int64_t>() < 0;
        if (vneg != bneg) return vneg ? -1 : 1;
        if (vneg) return v.get<int64_t>() < bound.get<int64_t>() ? -1 : v == bound ? 0 : 1;
        const uint64_t a = v.get<uint64_t>(), b = bound.get<uint64_t>();
        return a < b ? -1 : a == b ? 0 : 1;
      }
      const int64_t a = v.get<int64_t>(), b = bound.get<int64_t>();
      return a < b ? -1 : a == b ? 0 : 1;
    }
    const long double a = v.get<double>(), b = bound.get<double>();
    return a < b ? -1 : a == b ? 0 : 1;
  }

  bool valid(const Json& s, const Json& v, int depth) {
    if (depth > 200) return unknown_ = true;
    if (s.is_boolean()) return s.get<bool>();
    if (s.contains("$ref") && !valid(resolve(s["$ref"]), v, depth + 1)) return false;
    if (s.contains("allOf")) {
      for (const Json& part : s["allOf"]) {
        if (!valid(part, v, depth + 1)) return false;
      }
    }
    if (s.contains("anyOf")) {
      bool any = false;
      for (const Json& part : s["anyOf"]) any = valid(part, v, depth + 1) || any;
      if (!any) return false;
    }
    if (s.contains("oneOf")) {
      int n = 0;
      for (const Json& part : s["oneOf"]) n += valid(part, v, depth + 1);
      if (n != 1) return false;
    }
    if (s.contains("const") && !equal(s["const"], v)) return false;
    if (s.contains("enum")) {
      bool found = false;
      for (const Json& e : s["enum"]) found = found || equal(e, v);
      if (!found) return false;
    }
    if (s.contains("type")) {
      const Json& t = s["type"];
      bool ok = false;
      if (t.is_array()) {
        for (const Json& name : t) ok = ok || has_type(v, name);
      } else {
        ok = has_type(v, t);
      }
      if (!ok) return false;
    }
    if (v.is_object()) return valid_object(s, v, depth);
    if (v.is_array()) return valid_array(s, v, depth);
    if (v.is_string()) return valid_string(s, v.get<std::string>());
    if (v.is_number()) return valid_number(s, v);
    return true;
  }

  bool valid_object(const Json& s, const Json& v, int depth) {
    if (s.contains("required")) {
      for (const Json& name : s["required"]) {
        if (!v.contains(name.get<std::string>())) return false;
      }
    }
    const Json props = s.value("properties", Json::object());
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!valid(props[k], x, depth + 1)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!valid(s["additionalProperties"], x, depth + 1)) return false;
      }
    }
    return true;
  }

  bool valid_array(const Json& s, const Json& v, int depth) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    Json prefix = s.value("prefixItems", Json::array());
    const Json* rest = s.contains("items") ? &s["items"] : nullptr;
    if (rest && rest->is_array()) {
      prefix = *rest;
      rest = s.contains("additionalItems") ? &s["additionalItems"] : nullptr;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (i < prefix.size()) {
        if (!valid(prefix[i], v[i], depth + 1)) return false;
      } else if (rest && !valid(*rest, v[i], depth + 1)) {
        return false;
      }
    }
    return true;
  }

  bool valid_string(const Json& s, const std::string& text) {
    const int64_t n = code_points(text);
    if (s.contains("minLength") && n < s["minLength"].get<int64_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<int64_t>()) return false;
    if (s.contains("pattern")) {
      const std::string p = s["pattern"];
      const auto ascii = [](const std::string& x) {
        for (unsigned char c : x) {
          if (c >= 0x80) return false;
        }
        return true;
      };
      if (!ascii(p) || !ascii(text) || p.find("\\u") != std::string::npos) {
        unknown_ = true;
      } else if (!std::regex_search(text, std::regex(p, std::regex::ECMAScript))) {
        return false;
      }
    }
    if (s.contains("format")) return valid_format(s["format"], text);
    return true;
  }

  bool valid_format(const std::string& f, const std::string& t) {
    static const std::regex date(R"((\d{4})-(\d{2})-(\d{2}))");
    static const std::regex time(R"((\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2})))");
    auto valid_date = [](const std::string& x) {
      std::smatch m;
      if (!std::regex_match(x, m, date)) return false;
      const int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
      const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
      const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
      return mo >= 1 && mo <= 12 && d >= 1 && d <= days[mo - 1];
    };
    auto valid_time = [](const std::string& x) {
      std::smatch m;
      if (!std::regex_match(x, m, time)) return false;
      const int h = std::stoi(m[1]), mi = std::stoi(m[2]), sec = std::stoi(m[3]);
      if (h > 23 || mi > 59 || sec > 60) return false;
      if (m[6].matched && (std::stoi(m[6]) > 23 || std::stoi(m[7]) > 59)) return false;
      return true;
    };
    if (f == "date") return valid_date(t);
    if (f == "time") return valid_time(t);
    if (f == "date-time") {
      const size_t at = t.find_first_of("Tt");
      return at != std::string::npos && valid_date(t.substr(0, at)) && valid_time(t.substr(at + 1));
    }
    if (f == "uuid") {
      static const std::regex uuid(
          "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
      return std::regex_match(t, uuid);
    }
    if (f == "ipv4") {
      static const std::regex ip(R"((\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3}))");
      std::smatch m;
      if (!std::regex_match(t, m, ip)) return false;
      for (int i = 1; i <= 4; ++i) {
        const std::string part = m[i];
        if ((part.size() > 1 && part[0] == '0') || std::stoi(part) > 255) return false;
      }
      return true;
    }
    if (f == "email") {
      // RFC 5321 Mailbox: dot-atom or quoted local part; domain names or an address literal.
      static const std::regex email(
          R"(([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|"([^"\\]|\\.)*")@)"
          R"(([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[^\]]*\]))");
      return std::regex_match(t, email);
    }
    unknown_ = true;
    return true;
  }

  bool valid_number(const Json& s, const Json& v) {
    auto bool_flag = [&](const char* k) {
      return s.contains(k) && s[k].is_boolean() && s[k].get<bool>();
    };
    if (s.contains("minimum")) {
      const int c = compare(v, s["minimum"]);
      if (c < 0 || (c == 0 && bool_flag("exclusiveMinimum"))) return false;
    }
    if (s.contains("maximum")) {
      const int c = compare(v, s["maximum"]);
      if (c > 0 || (c == 0 && bool_flag("exclusiveMaximum"))) return false;
    }
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
        compare(v, s["exclusiveMinimum"]) <= 0) {
      return false;
    }
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
        compare(v, s["exclusiveMaximum"]) >= 0) {
      return false;
    }
    if (s.contains("multipleOf")) {
      const double q = v.get<double>() / s["multipleOf"].get<double>();
      if (std::floor(q) != q) return false;
    }
    return true;
  }

  const Json& root_;
  bool unknown_ = false;
};

}  // namespace tandem::grammar::test
