// JSON Schema keywords and values the front end refuses: each refusal is a GrammarError whose
// keyword() is the keyword at fault and whose message names it and its JSON path. Also the
// rule-name prefix, the whitespace option and the grammar's size.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "front_test_util.h"
#include "grammar/json_schema.h"

namespace tandem::grammar {
namespace {

using test::Json;
using ::testing::HasSubstr;

struct Refusal {
  std::string keyword, message;
};

Refusal refusal(const Json& schema, const JsonGrammarOptions& opt = {}) {
  try {
    json_schema_to_ebnf(schema, opt);
  } catch (const GrammarError& e) {
    return {e.keyword(), e.what()};
  }
  ADD_FAILURE() << "no error for " << schema.dump();
  return {};
}

// `inner` placed at #/properties/x/items.
Json nested(const Json& inner) {
  return Json{{"type", "object"}, {"properties", {{"x", {{"type", "array"}, {"items", inner}}}}}};
}

TEST(JsonSchemaErrors, EveryUnsupportedKeywordIsNamedWithItsPath) {
  const std::vector<std::pair<std::string, Json>> keywords = {
      {"not", {{"type", "null"}}},
      {"if", {{"type", "string"}}},
      {"then", {{"type", "string"}}},
      {"else", {{"type", "string"}}},
      {"patternProperties", {{"^a", {{"type", "string"}}}}},
      {"propertyNames", {{"maxLength", 3}}},
      {"minProperties", 1},
      {"maxProperties", 2},
      {"dependentRequired", {{"a", {"b"}}}},
      {"dependentSchemas", {{"a", {{"required", {"b"}}}}}},
      {"dependencies", {{"a", {"b"}}}},
      {"unevaluatedProperties", false},
      {"unevaluatedItems", false},
      {"contains", {{"type", "integer"}}},
      {"minContains", 1},
      {"maxContains", 1},
      {"$anchor", "a"},
      {"$dynamicRef", "#a"},
      {"$dynamicAnchor", "a"},
      {"$recursiveRef", "#"},
      {"contentEncoding", "base64"},
      {"contentMediaType", "application/json"},
      {"nullable", true},
      {"x-custom", 1},
  };
  for (const auto& [kw, value] : keywords) {
    const Refusal r = refusal(nested(Json{{kw, value}}));
    EXPECT_EQ(r.keyword, kw);
    EXPECT_THAT(r.message, HasSubstr("\"" + kw + "\""));
    EXPECT_THAT(r.message, HasSubstr("#/properties/x/items"));
    EXPECT_THAT(r.message, HasSubstr("not supported"));
  }
}

TEST(JsonSchemaErrors, UnsupportedValuesOfSupportedKeywords) {
  const std::vector<std::tuple<std::string, Json, std::string>> cases = {
      {"uniqueItems", {{"type", "array"}, {"uniqueItems", true}}, "compare items"},
      {"format", {{"type", "string"}, {"format", "hostname"}}, "\"hostname\" is not supported"},
      {"format", {{"type", "string"}, {"format", 3}}, "supported: date, date-time, email"},
      {"format", {{"type", "integer"}, {"format", "int32"}}, "\"int32\" is not supported"},
      {"multipleOf", {{"type", "integer"}, {"multipleOf", 2}}, "only as 1 on an integer"},
      {"multipleOf", {{"type", "number"}, {"multipleOf", 1}}, "only as 1 on an integer"},
      {"minimum", {{"type", "number"}, {"minimum", 0.5}}, "must be an integer"},
      {"exclusiveMaximum", {{"type", "number"}, {"exclusiveMaximum", 1.5}}, "must be an integer"},
      {"maximum", {{"type", "integer"}, {"maximum", 1e300}}, "out of the supported range"},
      {"minimum", {{"type", "integer"}, {"minimum", 5}, {"maximum", 4}}, "no integer lies"},
      {"exclusiveMinimum",
       {{"type", "number"}, {"exclusiveMinimum", 1}, {"exclusiveMaximum", 1}},
       "no number lies"},
      {"minimum", {{"type", "integer"}, {"minimum", "3"}}, "must be a number"},
      {"minLength",
       {{"type", "string"}, {"pattern", "a"}, {"minLength", 1}},
       "together with pattern"},
      {"maxLength",
       {{"type", "string"}, {"format", "date"}, {"maxLength", 3}},
       "together with format"},
      {"pattern",
       {{"type", "string"}, {"format", "date"}, {"pattern", "a"}},
       "together with format"},
      {"pattern", {{"type", "string"}, {"pattern", "a(?=b)"}}, "lookahead"},
      {"pattern", {{"type", "string"}, {"pattern", "(^a|b)c"}}, "only some alternatives"},
      {"pattern", {{"type", "string"}, {"pattern", 5}}, "must be a string"},
      {"minLength",
       {{"type", "string"}, {"minLength", 3}, {"maxLength", 2}},
       "greater than maxLength"},
      {"minLength", {{"type", "string"}, {"minLength", -1}}, "non-negative integer"},
      {"minItems", {{"type", "array"}, {"minItems", 3}, {"maxItems", 2}}, "at most 2"},
      {"minItems",
       {{"type", "array"}, {"prefixItems", {true}}, {"items", false}, {"minItems", 2}},
       "at most 1"},
      {"maxItems", {{"type", "array"}, {"maxItems", 1.5}}, "non-negative integer"},
      {"maxItems", {{"type", "array"}, {"maxItems", 10001}}, "largest repeat count"},
      {"maxLength", {{"type", "string"}, {"maxLength", 1u << 31}}, "largest repeat count"},
      {"additionalItems", {{"type", "array"}, {"additionalItems", false}}, "array-form items"},
      {"items",
       {{"type", "array"}, {"items", {true}}, {"prefixItems", {true}}},
       "together with prefixItems"},
      {"prefixItems", {{"type", "array"}, {"prefixItems", true}}, "must be an array"},
      {"$ref", {{"$ref", "http://example.com/s.json"}}, "only references inside the schema"},
      {"$ref", {{"$ref", "#/$defs/missing"}}, "does not point into the schema"},
      {"$ref", {{"$ref", "#node"}}, "anchors"},
      {"$ref", {{"$ref", 3}}, "must be a string"},
      {"type", {{"type", "date"}}, "\"date\" is not a JSON Schema type"},
      {"type", {{"type", Json::array()}}, "empty list of types"},
      {"enum", {{"enum", Json::array()}}, "no value is allowed"},
      {"enum", {{"type", "string"}, {"enum", {1, 2}}}, "no value is allowed"},
      {"enum", {{"enum", "a"}}, "must be an array"},
      {"const", {{"type", "integer"}, {"const", "a"}}, "no value is allowed"},
      {"minLength", {{"enum", {"a"}}, {"minLength", 1}}, "together with enum or const"},
      {"oneOf", {{"anyOf", {true}}, {"oneOf", {true}}}, "anyOf and oneOf"},
      {"anyOf", {{"anyOf", Json::array()}}, "non-empty array"},
      {"allOf", {{"allOf", Json::object()}}, "non-empty array"},
      {"pattern", {{"allOf", {{{"pattern", "a"}}, {{"pattern", "b"}}}}}, "different values"},
      {"additionalProperties",
       {{"allOf",
         {{{"properties", {{"a", true}}}, {"additionalProperties", false}},
          {{"properties", {{"b", true}}}}}}},
       "with properties from another schema"},
      {"items",
       {{"allOf", {{{"items", {{"type", "string"}}}}, {{"prefixItems", {true}}}}}},
       "different items / prefixItems"},
      {"type", {{"allOf", {{{"type", "string"}}, {{"type", "integer"}}}}}, "no common type"},
      {"required",
       {{"type", "object"}, {"properties", {{"a", true}}}, {"required", {"b"}}},
       "absent (treated as false)"},
      {"required",
       {{"type", "object"}, {"properties", {{"a", false}}}, {"required", {"a"}}},
       "its schema is false"},
      {"required", {{"type", "object"}, {"required", "a"}}, "array of property names"},
      {"properties", {{"type", "object"}, {"properties", {1, 2}}}, "must be an object"},
  };
  for (const auto& [kw, schema, text] : cases) {
    const Refusal r = refusal(schema);
    EXPECT_EQ(r.keyword, kw) << schema.dump() << ": " << r.message;
    EXPECT_THAT(r.message, HasSubstr(text)) << schema.dump();
    EXPECT_THAT(r.message, HasSubstr("\"" + kw + "\" at #")) << schema.dump();
  }
}

TEST(JsonSchemaErrors, StrictMode) {
  JsonGrammarOptions strict;
  strict.strict = true;
  const Json open = {
      {"type", "object"}, {"properties", {{"a", true}}}, {"additionalProperties", true}};
  const Refusal r = refusal(open, strict);
  EXPECT_EQ(r.keyword, "additionalProperties");
  EXPECT_THAT(r.message, HasSubstr("must be false in strict mode"));
  const Json unknown_required = {
      {"type", "object"}, {"properties", {{"a", true}}}, {"required", {"b"}}};
  EXPECT_EQ(refusal(unknown_required, strict).keyword, "required");
  EXPECT_NO_THROW(json_schema_to_ebnf(open));  // not strict: fine
}

TEST(JsonSchemaErrors, SchemasThatMatchNothingOrNeverEnd) {
  EXPECT_THAT(refusal(Json(false)).message, HasSubstr("is false: no value matches it"));
  EXPECT_EQ(refusal(Json(false)).keyword, "");
  EXPECT_THAT(refusal(Json{{"properties", {{"a", {{"allOf", {false}}}}}}}).message,
              HasSubstr("allOf contains false"));
  EXPECT_THAT(refusal(Json(3)).message, HasSubstr("must be an object or a boolean"));
  // A reference to itself with no value in between, and nesting past the depth limit.
  EXPECT_THAT(refusal(Json{{"$defs", {{"a", {{"$ref", "#/$defs/a"}, {"minimum", 1}}}}},
                           {"$ref", "#/$defs/a"}})
                  .message,
              HasSubstr("refers to itself"));
  Json deep = {{"type", "integer"}};
  for (int i = 0; i < 200; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_THAT(refusal(deep).message, HasSubstr("nests deeper than"));
}

std::vector<std::string> rule_names(const std::string& ebnf) {
  std::vector<std::string> out;
  static const std::regex rule(R"(^([A-Za-z_][A-Za-z0-9_-]*) ::= )", std::regex::multiline);
  for (auto it = std::sregex_iterator(ebnf.begin(), ebnf.end(), rule); it != std::sregex_iterator();
       ++it) {
    out.push_back((*it)[1]);
  }
  return out;
}

TEST(JsonSchemaRules, EveryRuleNameHasThePrefixSoSchemasCanShareAGrammar) {
  const Json weather = {
      {"type", "object"},
      {"properties",
       {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}, {"minimum", 1}}}}},
      {"required", {"city"}}};
  const Json search = {{"$defs", {{"q", {{"type", "string"}, {"format", "date"}}}}},
                       {"type", "object"},
                       {"properties", {{"when", {{"$ref", "#/$defs/q"}}}, {"any", true}}},
                       {"additionalProperties", {{"type", "boolean"}}}};
  const EbnfRules a = json_schema_rules(weather, "fn_weather-");
  const EbnfRules b = json_schema_rules(search, "fn_search-");
  EXPECT_EQ(a.root, "fn_weather-root");
  EXPECT_EQ(b.root, "fn_search-root");
  for (const EbnfRules* r : {&a, &b}) {
    const std::vector<std::string> names = rule_names(r->text);
    EXPECT_GT(names.size(), 2u);
    for (const std::string& n : names)
      EXPECT_EQ(n.rfind(r == &a ? "fn_weather-" : "fn_search-", 0), 0u) << n;
  }
  const std::string both = "root ::= " + a.root + " | " + b.root + "\n" + a.text + b.text;
  test::Recognizer r(both);
  EXPECT_TRUE(r.accepts(R"({"city": "Oslo", "days": 3})"));
  EXPECT_TRUE(r.accepts(R"({"when": "2024-02-29", "any": [1], "extra": true})"));
  EXPECT_FALSE(r.accepts(R"({"city": "Oslo", "days": 0})"));
  EXPECT_FALSE(r.accepts(R"({"when": "2023-02-29"})"));

  EXPECT_THROW(json_schema_rules(weather, "9bad"), GrammarError);
  EXPECT_THROW(json_schema_rules(weather, "bad prefix"), GrammarError);
  EXPECT_THROW(json_schema_rules(weather, "-x"), GrammarError);
  EXPECT_NO_THROW(json_schema_rules(weather, "_x"));
}

TEST(JsonSchemaRules, WholeGrammarRootIsTheValue) {
  const std::string ebnf = json_schema_to_ebnf(Json{{"type", "integer"}});
  EXPECT_EQ(rule_names(ebnf).front(), "root");
  EXPECT_TRUE(test::Recognizer(ebnf).accepts("-12"));
}

TEST(JsonSchemaRules, PropertiesKeepSchemaOrderWithOrderedJson) {
  const Json schema = Json::parse(R"({"type": "object", "properties": {"z": {"type": "integer"},
      "a": {"type": "integer"}}, "required": ["z", "a"]})");
  test::Recognizer ordered(json_schema_to_ebnf(schema));
  EXPECT_TRUE(ordered.accepts(R"({"z": 1, "a": 2})"));
  EXPECT_FALSE(ordered.accepts(R"({"a": 2, "z": 1})"));
  // A plain nlohmann::json has sorted its keys before the converter sees them.
  test::Recognizer sorted(json_schema_to_ebnf(nlohmann::json::parse(schema.dump())));
  EXPECT_TRUE(sorted.accepts(R"({"a": 2, "z": 1})"));
}

TEST(JsonSchemaRules, WhitespaceOption) {
  JsonGrammarOptions none;
  none.max_whitespace = 0;
  const std::string compact = json_schema_to_ebnf(Json{{"type", "array"}}, none);
  EXPECT_EQ(compact.find("ws"), std::string::npos) << compact;
  JsonGrammarOptions three;
  three.max_whitespace = 3;
  EXPECT_THAT(json_schema_to_ebnf(Json{{"type", "array"}}, three),
              HasSubstr("ws ::= [\\t\\n\\r ]{0,3}"));
  EXPECT_THAT(json_object_ebnf(), HasSubstr("ws ::= [\\t\\n\\r ]{0,20}"));
}

TEST(JsonSchemaRules, ManyOptionalPropertiesStayLinear) {
  // Every subset of 300 optional properties, in order, with commas right: the grammar grows
  // linearly (one rule per property), not with the number of subsets.
  Json props = Json::object();
  for (int i = 0; i < 300; ++i) {
    std::string name = "p";
    name += std::to_string(i);
    props[name] = {{"type", "integer"}};
  }
  const std::string ebnf = json_schema_to_ebnf(Json{{"type", "object"}, {"properties", props}});
  EXPECT_LT(ebnf.size(), 300u * 200u);
  test::Recognizer r(ebnf);
  EXPECT_TRUE(r.accepts("{}"));
  EXPECT_TRUE(r.accepts(R"({"p299":1})"));
  EXPECT_TRUE(r.accepts(R"({"p0":1,"p150":2,"p299":3})"));
  EXPECT_FALSE(r.accepts(R"({"p150":2,"p0":1})"));
  EXPECT_FALSE(r.accepts(R"({"p0":1,,"p1":1})"));
}

TEST(JsonSchemaRules, DeepAndLongSchemasStayWithinTheDialectsLimits) {
  // 120 nested objects and a 600-item tuple: the EBNF parser takes both (it refuses
  // parentheses nested deeper than 500).
  Json deep = {{"type", "integer"}};
  for (int i = 0; i < 120; ++i) {
    deep = {{"type", "object"}, {"properties", {{"a", deep}}}, {"required", {"a"}}};
  }
  std::string text = "1";
  for (int i = 0; i < 120; ++i) text = "{\"a\":" + text + "}";
  EXPECT_TRUE(test::Recognizer(json_schema_to_ebnf(deep)).accepts(text));
  Json tuple = {{"type", "array"}, {"prefixItems", Json::array()}};
  for (int i = 0; i < 600; ++i) tuple["prefixItems"].push_back({{"const", i}});
  test::Recognizer r(json_schema_to_ebnf(tuple));
  EXPECT_TRUE(r.accepts("[0,1,2]"));
  EXPECT_FALSE(r.accepts("[0,2]"));
  EXPECT_TRUE(r.accepts("[]"));
}

TEST(JsonSchemaRules, JsonObjectIsAnyObject) {
  test::Recognizer r(json_object_ebnf());
  EXPECT_TRUE(r.accepts(R"({"a": {"b": [1, "x", null, true, {}]}})"));
  EXPECT_FALSE(r.accepts("[1]"));
  JsonGrammarOptions strict;
  strict.strict = true;  // no schema, so nothing for strict to refuse
  EXPECT_NO_THROW(json_object_ebnf(strict));
}

}  // namespace
}  // namespace tandem::grammar
