// The front ends' grammars through the real engine: every hand-written JSON Schema case and
// every regex and pattern case is compiled against a byte-level vocabulary and its instances are
// fed to a Matcher byte by byte. The Earley tests check the language; this checks that the engine
// takes the generated EBNF as written (escapes, large repeats, classes) and agrees.
#include <gtest/gtest.h>

#include "front_test_util.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

// Whether the matcher takes all of `text` and may stop after it.
bool matcher_accepts(const std::shared_ptr<const CompiledGrammar>& g,
                     const std::vector<int32_t>& ids, const std::string& text) {
  Matcher m(g);
  for (unsigned char c : text) {
    if (!m.accept_token(ids[c])) return false;
  }
  return m.can_terminate();
}

TEST(FrontEndsOnEngine, JsonSchemaCases) {
  const auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  const test::Json cases = test::read_data_json("json_schema_cases.json");
  ASSERT_TRUE(cases.is_array());
  for (const auto& c : cases) {
    SCOPED_TRACE("case \"" + c["name"].get<std::string>() + "\"");
    JsonGrammarOptions opt;
    if (c.contains("options")) {
      opt.max_whitespace = c["options"].value("max_whitespace", opt.max_whitespace);
      opt.strict = c["options"].value("strict", opt.strict);
    }
    const std::string ebnf = c.value("json_object", false) ? json_object_ebnf(opt)
                                                           : json_schema_to_ebnf(c["schema"], opt);
    std::shared_ptr<const CompiledGrammar> g;
    ASSERT_NO_THROW(g = compile(ebnf, vocab)) << ebnf;
    for (const auto& t : c["valid"]) {
      EXPECT_TRUE(matcher_accepts(g, ids, t.get<std::string>()))
          << "valid " << test::show(t.get<std::string>());
    }
    for (const char* list : {"invalid", "policy_rejected"}) {
      for (const auto& t : c[list]) {
        EXPECT_FALSE(matcher_accepts(g, ids, t.get<std::string>()))
            << list << " " << test::show(t.get<std::string>());
      }
    }
  }
}

TEST(FrontEndsOnEngine, RegexCases) {
  const auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  const test::Json data = test::read_data_json("regex_cases.json");
  ASSERT_TRUE(data.contains("fullmatch"));
  for (const auto& c : data["fullmatch"]) {
    const std::string regex = c["regex"];
    SCOPED_TRACE("regex " + test::show(regex));
    const std::string ebnf = regex_to_ebnf(regex);
    std::shared_ptr<const CompiledGrammar> g;
    ASSERT_NO_THROW(g = compile(ebnf, vocab)) << ebnf;
    for (const auto& s : c["strings"]) {
      EXPECT_EQ(matcher_accepts(g, ids, s[0].get<std::string>()), s[1].get<bool>())
          << "string " << test::show(s[0].get<std::string>());
    }
  }
}

TEST(FrontEndsOnEngine, PatternCases) {
  const auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  const test::Json data = test::read_data_json("regex_cases.json");
  ASSERT_TRUE(data.contains("search_json"));
  for (const auto& c : data["search_json"]) {
    const std::string pattern = c["pattern"];
    SCOPED_TRACE("pattern " + test::show(pattern));
    const std::string ebnf =
        json_schema_to_ebnf(test::Json{{"type", "string"}, {"pattern", pattern}});
    std::shared_ptr<const CompiledGrammar> g;
    ASSERT_NO_THROW(g = compile(ebnf, vocab)) << ebnf;
    for (const auto& s : c["strings"]) {
      EXPECT_EQ(matcher_accepts(g, ids, s[1].get<std::string>()), s[2].get<bool>())
          << "JSON text " << test::show(s[1].get<std::string>());
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
