// Random instances of the hand-written cases' schemas (json_schema_cases.json): generated ones
// must be accepted, mutations that an independent validator finds invalid must be rejected, and
// sentences generated from the grammar itself must be valid (the grammar is sound). The
// validator also re-checks the hand-written expectations.
#include <gtest/gtest.h>

#include "front_test_util.h"
#include "grammar/json_schema.h"
#include "json_schema_instances.h"
#include "json_schema_validator.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

using test::Json;
using test::Verdict;

struct Case {
  std::string name;
  Json schema;
  JsonGrammarOptions opt;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& c : test::read_data_json("json_schema_cases.json")) {
    Case k;
    k.name = c["name"];
    k.schema = c.value("json_object", false)
                   ? Json{{"type", "object"}, {"additionalProperties", true}}
                   : c["schema"];
    if (c.contains("options")) {
      k.opt.max_whitespace = c["options"].value("max_whitespace", k.opt.max_whitespace);
      k.opt.strict = c["options"].value("strict", k.opt.strict);
    }
    out.push_back(std::move(k));
  }
  return out;
}

// The schema with strict mode's assumptions written out, for the validator.
Json as_validated(const Json& schema, bool strict) {
  if (!strict || !schema.is_object()) return schema;
  Json out = schema;
  if (out.contains("properties")) {
    out["required"] = Json::array();
    for (const auto& [k, v] : out["properties"].items()) out["required"].push_back(k);
    out["additionalProperties"] = false;
  }
  return out;
}

std::optional<Json> parse(const std::string& text) {
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// A random structural change somewhere in v.
Json mutate(Json v, std::mt19937_64& rng) {
  std::vector<Json::json_pointer> paths;
  std::function<void(const Json&, const Json::json_pointer&)> walk =
      [&](const Json& x, const Json::json_pointer& p) {
        paths.push_back(p);
        if (x.is_object()) {
          for (const auto& [k, y] : x.items()) walk(y, p / k);
        } else if (x.is_array()) {
          for (size_t i = 0; i < x.size(); ++i) walk(x[i], p / i);
        }
      };
  walk(v, Json::json_pointer());
  Json& node = v[paths[rng() % paths.size()]];
  static const std::vector<Json> replacements = {
      nullptr, true, 12345, -7, 0.5, "zz", Json::array(), Json::object(), 1000000};
  switch (rng() % 4) {
    case 0:
      node = replacements[rng() % replacements.size()];
      break;
    case 1:
      if (node.is_object() && !node.empty()) {
        node.erase(std::next(node.begin(), rng() % node.size()).key());
      } else if (node.is_object()) {
        node["zz_extra"] = 1;
      } else if (node.is_array()) {
        node.push_back(node.empty() ? Json(nullptr) : node[0]);
      } else if (node.is_string()) {
        node = node.get<std::string>() + "xxxxxxxxx";
      } else if (node.is_number_integer()) {
        node = node.get<int64_t>() + 1;
      } else {
        node = "zz";
      }
      break;
    case 2:
      if (node.is_object()) {
        node["zz_extra"] = 1;
      } else if (node.is_array() && !node.empty()) {
        node.erase(node.size() - 1);
      } else if (node.is_number_integer()) {
        node = node.get<int64_t>() - 1;
      } else if (node.is_string()) {
        node = "";
      } else {
        node = Json::array();
      }
      break;
    default:
      if (node.is_number()) {
        node = -node.get<double>() - 0.25;
      } else {
        node = nullptr;
      }
  }
  return v;
}

TEST(JsonSchemaRandom, GeneratedInstancesAreAcceptedAndMutationsRejected) {
  const std::vector<Case> all = cases();
  ASSERT_FALSE(all.empty()) << "tests/data/grammar/json_schema_cases.json is missing";
  int generated_schemas = 0, accepted = 0, rejected = 0;
  for (const Case& c : all) {
    SCOPED_TRACE("case \"" + c.name + "\"");
    const std::string ebnf = json_schema_to_ebnf(c.schema, c.opt);
    SCOPED_TRACE("grammar:\n" + ebnf);
    test::Recognizer r(ebnf);
    const Json validated = as_validated(c.schema, c.opt.strict);
    test::SchemaValidator validator(validated);
    test::InstanceGenerator gen(c.schema, c.opt, testing::seed_from_env(1234) + generated_schemas);
    if (!gen.value()) continue;
    ++generated_schemas;
    for (int i = 0; i < 25; ++i) {
      const std::optional<Json> v = gen.value();
      ASSERT_TRUE(v.has_value());
      ASSERT_NE(validator.check(*v), Verdict::kInvalid) << "generator bug: " << v->dump();
      const std::string text = gen.text(*v);
      EXPECT_TRUE(r.accepts(text)) << "generated " << test::show(text);
      ++accepted;
      // Whitespace past the limit in one gap.
      if (gen.gaps() > 0) {
        const std::string wide = gen.text(*v, static_cast<int>(gen.rng()() % gen.gaps()));
        EXPECT_FALSE(r.accepts(wide)) << "too much whitespace " << test::show(wide);
        ++rejected;
      }
      // Cut short or followed by more text: never one JSON value, or an invalid one.
      const std::string cut = text.substr(0, gen.rng()() % text.size());
      const std::optional<Json> cut_value = parse(cut);
      if (!cut_value || validator.check(*cut_value) == Verdict::kInvalid) {
        EXPECT_FALSE(r.accepts(cut)) << "cut " << test::show(cut);
        ++rejected;
      }
      EXPECT_FALSE(r.accepts(text + "}")) << "trailing text " << test::show(text);
      ++rejected;
      for (int m = 0; m < 4; ++m) {
        const Json bad = mutate(*v, gen.rng());
        if (validator.check(bad) != Verdict::kInvalid) continue;
        const std::string bad_text = gen.text(bad);
        EXPECT_FALSE(r.accepts(bad_text)) << "mutated " << test::show(bad_text);
        ++rejected;
      }
    }
  }
  EXPECT_GT(generated_schemas, 60);
  EXPECT_GT(accepted, 1500);
  EXPECT_GT(rejected, 4000);
}

TEST(JsonSchemaRandom, GrammarSentencesAreValidInstances) {
  int checked = 0, index = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE("case \"" + c.name + "\"");
    const std::string ebnf = json_schema_to_ebnf(c.schema, c.opt);
    const ir::Grammar g = ir::parse_ebnf(ebnf);
    testing::SentenceGenerator sentences(g, testing::seed_from_env(99) + index++, 8);
    const Json validated = as_validated(c.schema, c.opt.strict);
    test::SchemaValidator validator(validated);
    for (int i = 0; i < 20; ++i) {
      const std::string text = sentences.sentence();
      std::optional<Json> v;
      try {
        v = Json::parse(text);
      } catch (const nlohmann::json::out_of_range&) {
        continue;  // a number too large for a double: valid JSON the parser will not hold
      } catch (const nlohmann::json::exception& e) {
        ADD_FAILURE() << "not JSON: " << test::show(text) << ": " << e.what();
        continue;
      }
      EXPECT_NE(validator.check(*v), Verdict::kInvalid) << "invalid sentence " << test::show(text);
      ++checked;
    }
  }
  EXPECT_GT(checked, 1500);
}

TEST(JsonSchemaRandom, ValidatorAgreesWithHandWrittenExpectations) {
  for (const auto& c : test::read_data_json("json_schema_cases.json")) {
    SCOPED_TRACE("case \"" + c["name"].get<std::string>() + "\"");
    const bool strict = c.contains("options") && c["options"].value("strict", false);
    const Json schema = c.value("json_object", false)
                            ? Json{{"type", "object"}, {"additionalProperties", true}}
                            : as_validated(c["schema"], strict);
    test::SchemaValidator validator(schema);
    for (const char* list : {"valid", "policy_rejected"}) {
      for (const auto& t : c[list]) {
        const std::optional<Json> v = parse(t.get<std::string>());
        ASSERT_TRUE(v.has_value()) << list << " but not JSON: " << t;
        EXPECT_NE(validator.check(*v), Verdict::kInvalid) << list << " " << t;
      }
    }
    for (const auto& t : c["invalid"]) {
      const std::optional<Json> v = parse(t.get<std::string>());
      // Whitespace beyond the limit is a grammar matter, not a schema one.
      if (v && !(c.contains("options") && c["options"].contains("max_whitespace"))) {
        EXPECT_EQ(validator.check(*v), Verdict::kInvalid) << "invalid " << t;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
