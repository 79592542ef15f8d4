// JSON Schema -> EBNF: keyword checks and dispatch (composition, $ref, enum/const, types). The
// per-type rules live in json_schema_{object,array,string,number}.cpp; the supported keywords
// and the policies (whitespace, property order, additionalProperties) are listed in
// docs/structured-outputs.md.
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

#include "grammar/json_schema_internal.h"

namespace tandem::grammar {
namespace front {
namespace {

const std::set<std::string_view> kObjectKeywords = {"properties", "required",
                                                    "additionalProperties"};
const std::set<std::string_view> kArrayKeywords = {"items",    "prefixItems", "additionalItems",
                                                   "minItems", "maxItems",    "uniqueItems"};
const std::set<std::string_view> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string_view> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum",
                                                    "exclusiveMaximum", "multipleOf"};
const std::set<std::string_view> kGeneralKeywords = {"type",  "enum",  "const", "anyOf",
                                                     "oneOf", "allOf", "$ref"};
const std::vector<std::string> kTypeNames = {"object",  "array",   "string", "number",
                                             "integer", "boolean", "null"};

bool is_known(const std::string& k) {
  return is_annotation(k) || kObjectKeywords.count(k) || kArrayKeywords.count(k) ||
         kStringKeywords.count(k) || kNumberKeywords.count(k) || kGeneralKeywords.count(k);
}

bool has_any(const Json& schema, const std::set<std::string_view>& keys) {
  for (const auto& [k, v] : schema.items()) {
    if (keys.count(k)) return true;
  }
  return false;
}

// The constraining keywords of `schema` other than `except`.
std::vector<std::string> constraints(const Json& schema, std::set<std::string_view> except = {}) {
  std::vector<std::string> out;
  for (const auto& [k, v] : schema.items()) {
    if (!is_annotation(k) && !except.count(k)) out.push_back(k);
  }
  return out;
}

bool value_has_type(const Json& v, const std::string& type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  if (type == "number") return v.is_number();
  // JSON Schema: an integer is any number with a zero fractional part (1.0 included).
  if (type == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                     std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

// RAII depth count: schemas nest (and $ref / allOf can loop) without bound otherwise.
struct DepthGuard {
  DepthGuard(int& depth, const std::string& path) : depth_(depth) {
    if (++depth_ > kMaxSchemaDepth) {
      throw GrammarError(fmt::format(
          "JSON Schema at {} nests deeper than {} levels (or a $ref / allOf refers to itself "
          "without a value in between)",
          path, kMaxSchemaDepth));
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};

}  // namespace

// Annotations: they describe the value without constraining it. "discriminator" is OpenAPI's
// (Pydantic writes it next to oneOf); the oneOf branches already carry the constraint it names.
bool is_annotation(std::string_view key) {
  static const std::set<std::string_view> annotations = {
      "title",         "description", "examples",   "default",  "$schema",
      "$id",           "$comment",    "deprecated", "readOnly", "writeOnly",
      "discriminator", "$defs",       "definitions"};
  return annotations.count(key) != 0;
}

Json without(const Json& schema, std::string_view key) {
  Json out = Json::object();
  for (const auto& [k, v] : schema.items()) {
    if (k != key) out[k] = v;
  }
  return out;
}

std::set<std::string> type_set(const Json& schema, const std::string& path) {
  std::set<std::string> out;
  const Json& t = schema.at("type");
  auto add = [&](const Json& name) {
    if (!name.is_string() || std::find(kTypeNames.begin(), kTypeNames.end(),
                                       name.get<std::string>()) == kTypeNames.end()) {
      refuse("type", path, fmt::format("{} is not a JSON Schema type", name.dump()));
    }
    out.insert(name.get<std::string>());
  };
  if (t.is_array()) {
    for (const Json& name : t) add(name);
    if (out.empty()) refuse("type", path, "an empty list of types matches nothing");
  } else {
    add(t);
  }
  return out;
}

std::string pointer_append(const std::string& path, const std::string& segment) {
  std::string out = path + "/";
  for (char c : segment) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

void refuse(const std::string& keyword, const std::string& path, const std::string& why) {
  throw GrammarError(fmt::format("JSON Schema keyword \"{}\" at {}: {}", keyword, path, why),
                     keyword);
}

SchemaConverter::SchemaConverter(const Json& root, const std::string& prefix,
                                 const JsonGrammarOptions& opt)
    : root_(root), opt_(opt), rules_(prefix) {
  const bool prefix_ok =
      std::all_of(prefix.begin(), prefix.end(),
                  [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                  }) &&
      (prefix.empty() ||
       !(std::isdigit(static_cast<unsigned char>(prefix[0])) || prefix[0] == '-'));
  if (!prefix_ok) {
    throw GrammarError(
        fmt::format("grammar rule prefix \"{}\" must match [A-Za-z_][A-Za-z0-9_-]*", prefix));
  }
  root_rule_ = rules_.reserve("root");
  ref_rules_["#"] = root_rule_;
}

EbnfRules SchemaConverter::finish(const Expr& root_value) {
  rules_.define(root_rule_, root_value);
  return {rules_.text(), root_rule_};
}

Expr SchemaConverter::value(const Json& schema, const std::string& path) {
  DepthGuard guard(depth_, path);
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return any_value();
    throw GrammarError(fmt::format("JSON Schema at {} is false: no value matches it", path));
  }
  if (!schema.is_object()) {
    throw GrammarError(fmt::format("JSON Schema at {} must be an object or a boolean, not {}", path,
                                   schema.type_name()));
  }
  for (const auto& [k, v] : schema.items()) {
    if (!is_known(k)) refuse(k, path, "this keyword is not supported");
  }
  if (schema.contains("allOf")) {
    const Json& parts = schema["allOf"];
    if (!parts.is_array() || parts.empty()) refuse("allOf", path, "must be a non-empty array");
    Json merged = without(schema, "allOf");
    for (size_t i = 0; i < parts.size(); ++i) {
      merged = merge(merged, inline_refs_for_merge(parts[i], path, 0), path);
    }
    return value(merged, path);
  }
  if (schema.contains("$ref")) {
    if (constraints(schema, {"$ref"}).empty()) return ref(schema, path);
    // Keywords next to $ref (allowed since draft 2019-09) constrain the same value.
    return value(merge(without(schema, "$ref"), inline_refs_for_merge(schema, path, 0), path),
                 path);
  }
  if (schema.contains("anyOf") && schema.contains("oneOf")) {
    refuse("oneOf", path, "anyOf and oneOf in the same schema are not supported together");
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    const Json& options = schema[key];
    if (!options.is_array() || options.empty()) {
      refuse(key, path, "must be a non-empty array");
    }
    // oneOf is matched as anyOf: a grammar cannot require that exactly one branch matches.
    const Json siblings = without(schema, key);
    const bool merge_siblings = !constraints(siblings).empty();
    std::vector<Expr> alternatives;
    for (size_t i = 0; i < options.size(); ++i) {
      const std::string sub = pointer_append(pointer_append(path, key), std::to_string(i));
      alternatives.push_back(
          merge_siblings
              ? value(merge(siblings, inline_refs_for_merge(options[i], sub, 0), sub), sub)
              : value(options[i], sub));
    }
    return alt(alternatives);
  }
  if (schema.contains("enum") || schema.contains("const")) return enum_or_const(schema, path);
  return value_of_types(schema, path);
}

Expr SchemaConverter::value_of_types(const Json& schema, const std::string& path) {
  check_format(schema, path);
  std::set<std::string> types;
  if (schema.contains("type")) {
    types = type_set(schema, path);
  } else {
    // No "type": JSON Schema would let values of the other types through untouched; we infer
    // the type from the keywords instead (a subset of the valid values, and the one meant).
    if (has_any(schema, kObjectKeywords)) types.insert("object");
    if (has_any(schema, kArrayKeywords)) types.insert("array");
    if (has_any(schema, kStringKeywords)) types.insert("string");
    if (has_any(schema, kNumberKeywords)) types.insert("number");
    if (types.empty()) return any_value();
  }
  if (types.count("number")) types.erase("integer");
  std::vector<Expr> options;
  for (const std::string& t : kTypeNames) {
    if (!types.count(t)) continue;
    // Objects and arrays get rules of their own: nested values then never nest parentheses.
    if (t == "object") options.push_back(rule_ref(rules_.add("obj", object(schema, path))));
    if (t == "array") options.push_back(rule_ref(rules_.add("arr", array(schema, path))));
    if (t == "string") options.push_back(string(schema, path));
    if (t == "number") options.push_back(number(schema, path, false));
    if (t == "integer") options.push_back(number(schema, path, true));
    if (t == "boolean") options.push_back(alt({literal("true"), literal("false")}));
    if (t == "null") options.push_back(literal("null"));
  }
  return alt(options);
}

Expr SchemaConverter::enum_or_const(const Json& schema, const std::string& path) {
  for (const std::string& k : constraints(schema, {"enum", "const", "type"})) {
    refuse(k, path, "is not supported together with enum or const");
  }
  std::vector<Json> values;
  if (schema.contains("enum")) {
    if (!schema["enum"].is_array()) refuse("enum", path, "must be an array");
    for (const Json& v : schema["enum"]) {
      if (!schema.contains("const") || v == schema["const"]) values.push_back(v);
    }
  } else {
    values.push_back(schema["const"]);
  }
  if (schema.contains("type")) {
    const std::set<std::string> types = type_set(schema, path);
    std::erase_if(values, [&](const Json& v) {
      return std::none_of(types.begin(), types.end(),
                          [&](const std::string& t) { return value_has_type(v, t); });
    });
  }
  const char* keyword = schema.contains("enum") ? "enum" : "const";
  if (values.empty()) refuse(keyword, path, "no value is allowed (check type, enum and const)");
  std::vector<Expr> options;
  try {
    for (const Json& v : values) options.push_back(json_literal(v));
  } catch (const nlohmann::json::exception& e) {
    refuse(keyword, path, std::string("cannot be written as JSON: ") + e.what());
  }
  return alt(options);
}

// One JSON value as text: scalars exactly as dump() writes them, objects and arrays with the
// same whitespace gaps as everywhere else (and their keys in the value's order).
Expr SchemaConverter::json_literal(const Json& v) {
  if (!v.is_object() && !v.is_array()) return literal(v.dump());
  const Expr sep = seq({ws(), literal(","), ws()});
  std::vector<Expr> parts;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!parts.empty()) parts.push_back(sep);
    if (v.is_object()) {
      parts.push_back(seq({literal(Json(it.key()).dump()), ws(), literal(":"), ws()}));
    }
    parts.push_back(json_literal(it.value()));
  }
  const Expr open = literal(v.is_object() ? "{" : "["), close = literal(v.is_object() ? "}" : "]");
  if (parts.empty()) return seq({open, ws(), close});
  return seq({open, ws(), seq(parts), ws(), close});
}

}  // namespace front

EbnfRules json_schema_rules(const nlohmann::ordered_json& schema, const std::string& prefix,
                            const JsonGrammarOptions& opt) {
  front::SchemaConverter conv(schema, prefix, opt);
  return conv.finish(conv.value(schema, "#"));
}

EbnfRules json_schema_rules(const nlohmann::json& schema, const std::string& prefix,
                            const JsonGrammarOptions& opt) {
  return json_schema_rules(nlohmann::ordered_json(schema), prefix, opt);
}

std::string json_schema_to_ebnf(const nlohmann::ordered_json& schema,
                                const JsonGrammarOptions& opt) {
  // With no prefix the value's rule is named "root", the grammar's start rule.
  return json_schema_rules(schema, "", opt).text;
}

std::string json_schema_to_ebnf(const nlohmann::json& schema, const JsonGrammarOptions& opt) {
  return json_schema_to_ebnf(nlohmann::ordered_json(schema), opt);
}

std::string json_object_ebnf(const JsonGrammarOptions& opt) {
  JsonGrammarOptions any = opt;
  any.strict = false;  // strict is about schemas; json_object has none
  return json_schema_to_ebnf(
      nlohmann::ordered_json{{"type", "object"}, {"additionalProperties", true}}, any);
}

}  // namespace tandem::grammar
