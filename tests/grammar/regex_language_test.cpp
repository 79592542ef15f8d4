// The regex front end against Python's re (tests/data/grammar/regex_cases.json, written by
// scripts/grammar_oracle/regex_oracle.py): for every regex, regex_to_ebnf's grammar must accept
// exactly the strings re.fullmatch accepts, as the engine's reference recognizer reads it.
#include <gtest/gtest.h>

#include "front_test_util.h"
#include "grammar/regex.h"

namespace tandem::grammar {
namespace {

TEST(RegexLanguage, MatchesPythonFullmatch) {
  const test::Json data = test::read_data_json("regex_cases.json");
  ASSERT_TRUE(data.contains("fullmatch")) << "tests/data/grammar/regex_cases.json is missing";
  int checked = 0, accepted = 0;
  for (const auto& c : data["fullmatch"]) {
    const std::string regex = c["regex"];
    SCOPED_TRACE("regex " + test::show(regex));
    std::string ebnf;
    ASSERT_NO_THROW(ebnf = regex_to_ebnf(regex));
    SCOPED_TRACE("grammar " + ebnf);
    test::Recognizer r(ebnf);
    for (const auto& s : c["strings"]) {
      const std::string text = s[0];
      const bool expected = s[1];
      EXPECT_EQ(r.accepts(text), expected) << "string " << test::show(text);
      ++checked;
      accepted += expected;
    }
  }
  EXPECT_GT(checked, 3000);
  EXPECT_GT(accepted, 400);
}

}  // namespace
}  // namespace tandem::grammar
