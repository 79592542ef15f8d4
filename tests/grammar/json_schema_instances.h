// Random instances of a JSON Schema written the way the front end's grammar promises to accept
// them (properties in schema order, extras only where additionalProperties allows, integers
// without a fraction, bounded numbers without an exponent), and their text with random
// whitespace. Schemas it cannot generate for (pattern, allOf, keywords next to $ref or anyOf)
// make value() return nullopt.
#pragma once

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "front_test_util.h"
#include "grammar/json_schema.h"

namespace tandem::grammar::test {

class InstanceGenerator {
 public:
  InstanceGenerator(const Json& root, const JsonGrammarOptions& opt, uint64_t seed)
      : root_(root), opt_(opt), rng_(seed) {}

  std::optional<Json> value() {
    try {
      return gen(root_, 0);
    } catch (const Unsupported&) {
      return std::nullopt;
    }
  }

  // `v` as JSON text with random whitespace in every gap between tokens; gap number
  // `overflow` (if any) gets one byte more than max_whitespace allows. gaps_ counts them.
  std::string text(const Json& v, int overflow = -1) {
    std::string out;
    gaps_ = 0;
    write(v, out, overflow);
    return out;
  }
  int gaps() const { return gaps_; }
  std::mt19937_64& rng() { return rng_; }

 private:
  struct Unsupported {};
  static constexpr int kDeep = 5;

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool coin() { return rng_() & 1; }

  static const std::set<std::string>& ignored() {
    static const std::set<std::string> s = {
        "title",         "description", "examples",   "default",  "$schema",
        "$id",           "$comment",    "deprecated", "readOnly", "writeOnly",
        "discriminator", "$defs",       "definitions"};
    return s;
  }
  static bool only(const Json& s, std::set<std::string> keys) {
    for (const auto& [k, v] : s.items()) {
      if (!keys.count(k) && !ignored().count(k)) return false;
    }
    return true;
  }

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

  static bool has_type(const Json& v, const std::string& t) {
    if (t == "integer") return v.is_number_integer();
    if (t == "number") return v.is_number();
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    return v.is_object();
  }

  Json gen(const Json& s, int depth) {
    if (depth > 40) throw Unsupported{};
    if (s.is_boolean()) {
      if (!s.get<bool>()) throw Unsupported{};
      return any(depth);
    }
    if (s.contains("allOf") || s.contains("pattern")) throw Unsupported{};
    if (s.contains("$ref")) {
      if (!only(s, {"$ref"})) throw Unsupported{};
      return gen(resolve(s["$ref"]), depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      if (!only(s, {key})) throw Unsupported{};
      // Deep down, prefer branches that do not recurse.
      std::vector<const Json*> options;
      for (const Json& o : s[key]) {
        if (depth < kDeep || !o.contains("$ref")) options.push_back(&o);
      }
      if (options.empty()) throw Unsupported{};
      return gen(*options[uniform(0, options.size() - 1)], depth + 1);
    }
    if (s.contains("enum") || s.contains("const")) {
      std::vector<Json> values;
      if (s.contains("enum")) {
        for (const Json& v : s["enum"]) {
          if (!s.contains("const") || v == s["const"]) values.push_back(v);
        }
      } else {
        values.push_back(s["const"]);
      }
      if (s.contains("type")) {
        std::vector<std::string> types;
        if (s["type"].is_array()) {
          for (const Json& t : s["type"]) types.push_back(t);
        } else {
          types.push_back(s["type"]);
        }
        std::erase_if(values, [&](const Json& v) {
          return std::none_of(types.begin(), types.end(),
                              [&](const std::string& t) { return has_type(v, t); });
        });
      }
      return values[uniform(0, values.size() - 1)];
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_array()) {
        for (const Json& t : s["type"]) types.push_back(t);
      } else {
        types.push_back(s["type"]);
      }
    } else {
      if (s.contains("properties") || s.contains("required") ||
          s.contains("additionalProperties")) {
        types.push_back("object");
      }
      if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
          s.contains("maxItems")) {
        types.push_back("array");
      }
      if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
        types.push_back("string");
      }
      if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
          s.contains("exclusiveMaximum")) {
        types.push_back("number");
      }
      if (types.empty()) return any(depth);
    }
    const std::string t = types[uniform(0, types.size() - 1)];
    if (t == "object") return object(s, depth);
    if (t == "array") return array(s, depth);
    if (t == "string") return string(s);
    if (t == "integer" || t == "number") return number(s, t == "integer");
    if (t == "boolean") return coin();
    return nullptr;
  }

  Json any(int depth) {
    switch (uniform(0, depth > 3 ? 3 : 5)) {
      case 0:
        return nullptr;
      case 1:
        return coin();
      case 2:
        return uniform(-1000, 1000);
      case 3:
        return random_text(0, 6);
      case 4: {
        Json a = Json::array();
        for (int i = uniform(0, 3); i > 0; --i) a.push_back(any(depth + 1));
        return a;
      }
      default: {
        Json o = Json::object();
        for (int i = uniform(0, 3); i > 0; --i) o[random_text(0, 4)] = any(depth + 1);
        return o;
      }
    }
  }

  Json object(const Json& s, int depth) {
    Json out = Json::object();
    const Json props = s.value("properties", Json::object());
    std::vector<std::string> required;
    for (const Json& r : s.value("required", Json::array())) required.push_back(r);
    auto is_required = [&](const std::string& name) {
      return opt_.strict || std::find(required.begin(), required.end(), name) != required.end();
    };
    std::set<std::string> names;
    for (const auto& [name, sub] : props.items()) {
      names.insert(name);
      if (sub == Json(false)) continue;
      if (is_required(name) || (depth < kDeep && coin())) out[name] = gen(sub, depth + 1);
    }
    const Json extra = s.value("additionalProperties", Json(false));
    for (const std::string& name : required) {
      if (props.contains(name)) continue;
      names.insert(name);
      out[name] = gen(extra, depth + 1);
    }
    if (extra != Json(false) && depth < kDeep) {
      for (int i = uniform(0, 2); i > 0; --i) {
        std::string key = random_text(0, 4);
        if (names.count(key) || out.contains(key)) continue;
        out[key] = gen(extra, depth + 1);
      }
    }
    return out;
  }

  Json array(const Json& s, int depth) {
    Json prefix = s.value("prefixItems", Json::array());
    std::optional<Json> items;
    if (s.contains("items") && s["items"].is_array()) {
      prefix = s["items"];
      if (s.contains("additionalItems")) items = s["additionalItems"];
    } else if (s.contains("items")) {
      items = s["items"];
    } else if (prefix.empty()) {
      items = Json(true);
    }
    if (items && *items == Json(false)) items.reset();
    const int64_t lo = s.value("minItems", int64_t{0});
    int64_t hi = s.value("maxItems", int64_t{lo + 3});
    if (!items) hi = std::min<int64_t>(hi, prefix.size());
    hi = std::min(hi, lo + 3);
    const int64_t n = depth >= kDeep ? lo : uniform(lo, hi);
    Json out = Json::array();
    for (int64_t i = 0; i < n; ++i) {
      out.push_back(gen(i < static_cast<int64_t>(prefix.size()) ? prefix[i] : *items, depth + 1));
    }
    return out;
  }

  std::string random_text(int64_t lo, int64_t hi) {
    static const std::vector<std::string> pool = {"a",
                                                  "b",
                                                  "Z",
                                                  "0",
                                                  "7",
                                                  " ",
                                                  "-",
                                                  "_",
                                                  ".",
                                                  "/",
                                                  "\"",
                                                  "\\",
                                                  "\n",
                                                  "\t",
                                                  "\x01",
                                                  "\x1f",
                                                  "\x7f",
                                                  "\xc3\xa9",
                                                  "\xe4\xb8\xad",
                                                  "\xf0\x9f\x98\x80",
                                                  "\xe2\x80\xa8",
                                                  "{",
                                                  "]"};
    std::string out;
    for (int64_t n = uniform(lo, hi); n > 0; --n) out += pool[uniform(0, pool.size() - 1)];
    return out;
  }

  std::string two(int64_t v) { return (v < 10 ? "0" : "") + std::to_string(v); }

  Json string(const Json& s) {
    if (s.contains("format")) {
      const std::string f = s["format"];
      auto date = [&] {
        const int64_t y = uniform(0, 9999), m = uniform(1, 12);
        const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        std::string ys = std::to_string(y);
        ys = std::string(4 - ys.size(), '0') + ys;
        return ys + "-" + two(m) + "-" + two(uniform(1, days[m - 1]));
      };
      auto time = [&] {
        std::string t = two(uniform(0, 23)) + ":" + two(uniform(0, 59)) + ":" + two(uniform(0, 59));
        if (coin()) t += "." + std::to_string(uniform(0, 999));
        return t + (coin()
                        ? "Z"
                        : (coin() ? "+" : "-") + two(uniform(0, 23)) + ":" + two(uniform(0, 59)));
      };
      if (f == "date") return date();
      if (f == "time") return time();
      if (f == "date-time") return date() + "T" + time();
      if (f == "ipv4") {
        return std::to_string(uniform(0, 255)) + "." + std::to_string(uniform(0, 255)) + "." +
               std::to_string(uniform(0, 255)) + "." + std::to_string(uniform(0, 255));
      }
      if (f == "uuid") {
        std::string u;
        for (int i : {8, 4, 4, 4, 12}) {
          if (!u.empty()) u += "-";
          for (int k = 0; k < i; ++k) u += "0123456789abcdefABCDEF"[uniform(0, 21)];
        }
        return u;
      }
      if (f == "email") {
        static const std::vector<std::string> locals = {"a", "first.last", "x+tag", "o'neil"};
        static const std::vector<std::string> domains = {"b.co", "localhost", "mail.example.org",
                                                         "x-y.z9"};
        return locals[uniform(0, 3)] + "@" + domains[uniform(0, 3)];
      }
      throw Unsupported{};
    }
    const int64_t lo = s.value("minLength", int64_t{0});
    const int64_t hi = std::min(s.value("maxLength", lo + 8), lo + 8);
    return random_text(lo, hi);
  }

  Json number(const Json& s, bool integer) {
    // Bounds as the grammar reads them: inclusive integer ends after rounding inward.
    int64_t lo = -100000, hi = 100000;
    bool lo_ex = false, hi_ex = false;
    auto bound = [&](const char* key, bool lower, bool exclusive) {
      if (!s.contains(key) || s[key].is_boolean()) return;
      const double d = s[key].get<double>();
      const bool excl = exclusive || (std::string(key) == (lower ? "minimum" : "maximum") &&
                                      s.value(lower ? "exclusiveMinimum" : "exclusiveMaximum",
                                              Json(false)) == Json(true));
      const int64_t v =
          lower ? static_cast<int64_t>(std::ceil(d)) : static_cast<int64_t>(std::floor(d));
      if (lower && (v > lo || (v == lo && excl))) lo = v, lo_ex = excl && std::floor(d) == d;
      if (!lower && (v < hi || (v == hi && excl))) hi = v, hi_ex = excl && std::floor(d) == d;
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (integer) {
      if (lo_ex) ++lo;
      if (hi_ex) --hi;
      const int64_t pick = uniform(0, 3);
      if (pick == 0) return lo;
      if (pick == 1) return hi;
      return uniform(lo, hi);
    }
    // Quarters between the bounds: exact in binary, printed without an exponent.
    for (int tries = 0; tries < 100; ++tries) {
      const int64_t q = uniform(lo * 4, hi * 4);
      if ((q == lo * 4 && lo_ex) || (q == hi * 4 && hi_ex)) continue;
      if (q % 4 == 0 && coin()) return q / 4;
      return static_cast<double>(q) / 4;
    }
    throw Unsupported{};
  }

  void gap(std::string& out, int overflow) {
    int n = opt_.max_whitespace <= 0 ? 0 : uniform(0, opt_.max_whitespace);
    if (gaps_++ == overflow) n = std::max(opt_.max_whitespace, 0) + 1;
    for (int i = 0; i < n; ++i) out += " \t\n\r"[uniform(0, 3)];
  }

  void write(const Json& v, std::string& out, int overflow) {
    if (!v.is_object() && !v.is_array()) {
      out += v.dump();
      return;
    }
    out += v.is_object() ? "{" : "[";
    gap(out, overflow);
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) {
        out += ",";
        gap(out, overflow);
      }
      first = false;
      if (v.is_object()) {
        out += Json(it.key()).dump();
        gap(out, overflow);
        out += ":";
        gap(out, overflow);
      }
      write(it.value(), out, overflow);
      gap(out, overflow);
    }
    out += v.is_object() ? "}" : "]";
  }

  const Json& root_;
  JsonGrammarOptions opt_;
  std::mt19937_64 rng_;
  int gaps_ = 0;
};

}  // namespace tandem::grammar::test
