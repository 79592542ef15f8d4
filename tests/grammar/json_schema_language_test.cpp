// The JSON Schema front end's grammars against hand-written instance lists
// (tests/data/grammar/json_schema_cases.json, scripts/grammar_oracle/json_schema_cases.py) and
// against Python's re for `pattern` (regex_cases.json's search_json part), read by the engine's
// reference recognizer.
#include <gtest/gtest.h>

#include "front_test_util.h"
#include "grammar/json_schema.h"

namespace tandem::grammar {
namespace {

JsonGrammarOptions options_of(const test::Json& c) {
  JsonGrammarOptions opt;
  if (c.contains("options")) {
    opt.max_whitespace = c["options"].value("max_whitespace", opt.max_whitespace);
    opt.strict = c["options"].value("strict", opt.strict);
  }
  return opt;
}

TEST(JsonSchemaLanguage, HandWrittenCases) {
  const test::Json cases = test::read_data_json("json_schema_cases.json");
  ASSERT_TRUE(cases.is_array()) << "tests/data/grammar/json_schema_cases.json is missing";
  int checked = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE("case \"" + name + "\"");
    std::string ebnf;
    if (c.value("json_object", false)) {
      ebnf = json_object_ebnf(options_of(c));
    } else {
      ASSERT_NO_THROW(ebnf = json_schema_to_ebnf(c["schema"], options_of(c))) << c["schema"].dump();
    }
    SCOPED_TRACE("grammar:\n" + ebnf);
    test::Recognizer r(ebnf);
    for (const auto& text : c["valid"]) {
      EXPECT_TRUE(r.accepts(text.get<std::string>()))
          << "valid " << test::show(text.get<std::string>());
      ++checked;
    }
    for (const char* list : {"invalid", "policy_rejected"}) {
      for (const auto& text : c[list]) {
        EXPECT_FALSE(r.accepts(text.get<std::string>()))
            << list << " " << test::show(text.get<std::string>());
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 1500);
}

TEST(JsonSchemaLanguage, PatternIsASearchLikePythonRe) {
  const test::Json data = test::read_data_json("regex_cases.json");
  ASSERT_TRUE(data.contains("search_json")) << "tests/data/grammar/regex_cases.json is missing";
  int checked = 0;
  for (const auto& c : data["search_json"]) {
    const std::string pattern = c["pattern"];
    SCOPED_TRACE("pattern " + test::show(pattern));
    const std::string ebnf =
        json_schema_to_ebnf(test::Json{{"type", "string"}, {"pattern", pattern}});
    SCOPED_TRACE("grammar:\n" + ebnf);
    test::Recognizer r(ebnf);
    for (const auto& s : c["strings"]) {
      // [string, its JSON text, re.search found a match]
      EXPECT_EQ(r.accepts(s[1].get<std::string>()), s[2].get<bool>())
          << "string " << test::show(s[0].get<std::string>()) << " as "
          << test::show(s[1].get<std::string>());
      ++checked;
    }
  }
  EXPECT_GT(checked, 400);
}

}  // namespace
}  // namespace tandem::grammar
