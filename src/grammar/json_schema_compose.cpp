// Composition: $ref resolution (one rule per referenced schema) and merging schemas that must
// hold together (allOf, and keywords next to $ref / anyOf / oneOf) where their keywords combine
// exactly.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "grammar/json_schema_internal.h"

namespace tandem::grammar::front {

const Json& SchemaConverter::resolve(const std::string& ref, const std::string& path,
                                     std::string& target_path) {
  if (ref.empty() || ref[0] != '#') {
    refuse("$ref", path,
           fmt::format("\"{}\": only references inside the schema (#...) are "
                       "supported",
                       ref));
  }
  // The fragment is URI-encoded (RFC 6901 section 6).
  std::string decoded;
  for (size_t i = 1; i < ref.size(); ++i) {
    if (ref[i] == '%' && i + 2 < ref.size() &&
        std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
      decoded += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += ref[i];
    }
  }
  if (!decoded.empty() && decoded[0] != '/') {
    refuse("$ref", path, fmt::format("\"{}\": anchors ($anchor names) are not supported", ref));
  }
  target_path = "#" + decoded;
  try {
    return root_.at(Json::json_pointer(decoded));
  } catch (const nlohmann::json::exception&) {
    refuse("$ref", path, fmt::format("\"{}\" does not point into the schema", ref));
  }
}

Expr SchemaConverter::ref(const Json& schema, const std::string& path) {
  if (!schema["$ref"].is_string()) refuse("$ref", path, "must be a string");
  std::string target_path;
  const Json& target = resolve(schema["$ref"].get<std::string>(), path, target_path);
  auto it = ref_rules_.find(target_path);
  if (it != ref_rules_.end()) return rule_ref(it->second);
  // The name is taken before the body is built, so the body may refer back to it.
  const size_t slash = target_path.rfind('/');
  const std::string name = rules_.reserve("def-" + target_path.substr(slash + 1));
  ref_rules_[target_path] = name;
  rules_.define(name, value(target, target_path));
  return rule_ref(name);
}

Json SchemaConverter::inline_refs_for_merge(const Json& schema, const std::string& path,
                                            int depth) {
  if (!schema.is_object() || !schema.contains("$ref")) return schema;
  if (depth > kMaxSchemaDepth) {
    throw GrammarError(fmt::format("JSON Schema at {}: $ref refers to itself", path));
  }
  if (!schema["$ref"].is_string()) refuse("$ref", path, "must be a string");
  std::string target_path;
  const Json& target = resolve(schema["$ref"].get<std::string>(), path, target_path);
  return merge(without(schema, "$ref"), inline_refs_for_merge(target, target_path, depth + 1),
               path);
}

Json SchemaConverter::merge(const Json& a, const Json& b, const std::string& path) {
  if (b.is_boolean()) {
    if (b.get<bool>()) return a;
    throw GrammarError(fmt::format("JSON Schema at {}: allOf contains false", path));
  }
  if (a.is_boolean()) return merge(b, a, path);
  if (!a.is_object() || !b.is_object()) {
    throw GrammarError(fmt::format("JSON Schema at {}: a schema must be an object", path));
  }
  // additionalProperties judges the properties of its own schema only, and items those after
  // its own prefixItems: merging them with another part's list would change their meaning.
  auto new_names = [](const Json& x, const Json& y) {
    if (!y.contains("properties") || !y["properties"].is_object()) return false;
    for (const auto& [k, v] : y["properties"].items()) {
      if (!x.contains("properties") || !x["properties"].contains(k)) return true;
    }
    return false;
  };
  if ((a.contains("additionalProperties") && new_names(a, b)) ||
      (b.contains("additionalProperties") && new_names(b, a))) {
    refuse("additionalProperties", path,
           "combining it (allOf, or keywords next to $ref / anyOf) with properties from another "
           "schema is not supported");
  }
  const bool a_items = a.contains("items") || a.contains("prefixItems");
  const bool b_items = b.contains("items") || b.contains("prefixItems");
  if (a_items && b_items &&
      (a.value("items", Json()) != b.value("items", Json()) ||
       a.value("prefixItems", Json()) != b.value("prefixItems", Json()))) {
    refuse("items", path, "combining different items / prefixItems is not supported");
  }
  Json out = a;
  for (const auto& [k, v] : b.items()) {
    if (is_annotation(k) && k != "$defs" && k != "definitions") continue;
    if (!out.contains(k) || out[k] == v) {
      out[k] = v;
      continue;
    }
    Json& mine = out[k];
    if (k == "$defs" || k == "definitions") continue;  // $ref resolves from the root anyway
    if (k == "type") {
      Json x = Json::object(), y = Json::object();
      x["type"] = mine;
      y["type"] = v;
      std::set<std::string> tx = type_set(x, path), ty = type_set(y, path);
      // integer is a subset of number.
      if (tx.count("number")) tx.insert("integer");
      if (ty.count("number")) ty.insert("integer");
      Json both = Json::array();
      for (const std::string& t : tx) {
        if (ty.count(t)) both.push_back(t);
      }
      if (both.empty()) refuse("type", path, "the combined schemas allow no common type");
      mine = both;
    } else if (k == "required") {
      for (const Json& name : v) {
        if (std::find(mine.begin(), mine.end(), name) == mine.end()) mine.push_back(name);
      }
    } else if (k == "properties") {
      for (const auto& [name, sub] : v.items()) {
        mine[name] = mine.contains(name) ? Json{{"allOf", Json::array({mine[name], sub})}} : sub;
      }
    } else if (k == "allOf") {
      for (const Json& part : v) mine.push_back(part);
    } else if (k == "enum") {
      Json both = Json::array();
      for (const Json& x : mine) {
        if (std::find(v.begin(), v.end(), x) != v.end()) both.push_back(x);
      }
      mine = both;
    } else if ((k == "minLength" || k == "minItems" || k == "minimum") && v.is_number() &&
               mine.is_number()) {
      if (v > mine) mine = v;
    } else if ((k == "maxLength" || k == "maxItems" || k == "maximum") && v.is_number() &&
               mine.is_number()) {
      if (v < mine) mine = v;
    } else if (k == "exclusiveMinimum" && v.is_number() && mine.is_number()) {
      if (v > mine) mine = v;
    } else if (k == "exclusiveMaximum" && v.is_number() && mine.is_number()) {
      if (v < mine) mine = v;
    } else {
      refuse(k, path,
             "appears with different values in schemas that must hold together (allOf, or "
             "keywords next to $ref / anyOf / oneOf); that is not supported");
    }
  }
  return out;
}

}  // namespace tandem::grammar::front
