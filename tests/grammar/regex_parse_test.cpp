// The regex front end's syntax: what it accepts beyond the Python oracle's reach (ECMAScript
// spellings), how the EBNF is written, and every refused construct with the error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "front_test_util.h"
#include "grammar/regex.h"

namespace tandem::grammar {
namespace {

using ::testing::HasSubstr;

std::string error_of(const std::string& regex) {
  try {
    regex_to_ebnf_expression(regex);
  } catch (const GrammarError& e) {
    EXPECT_EQ(e.keyword(), "regex") << regex;
    return e.what();
  }
  ADD_FAILURE() << "no error for " << regex;
  return "";
}

bool full_match(const std::string& regex, const std::string& text) {
  return test::Recognizer(regex_to_ebnf(regex)).accepts(text);
}

TEST(RegexParse, WritesCompactEbnf) {
  EXPECT_EQ(regex_to_ebnf_expression("abc"), "\"abc\"");
  EXPECT_EQ(regex_to_ebnf_expression("ab*"), "\"a\" \"b\"*");
  EXPECT_EQ(regex_to_ebnf_expression("[a-z]+\\d{2,3}"), "[a-z]+ [0-9]{2,3}");
  EXPECT_EQ(regex_to_ebnf_expression("(?:ab|cd)?"), "(\"ab\" | \"cd\")?");
  EXPECT_EQ(regex_to_ebnf_expression("a|"), "\"a\"?");
  EXPECT_EQ(regex_to_ebnf_expression("."), "[^\\n]");
  EXPECT_EQ(regex_to_ebnf_expression("[^\"\\\\]"), "[^\"\\\\]");
  EXPECT_EQ(regex_to_ebnf_expression("^x$"), "\"x\"");
  EXPECT_EQ(regex_to_ebnf_expression(""), "\"\"");
  EXPECT_EQ(regex_to_ebnf("a"), "root ::= \"a\"\n");
}

TEST(RegexParse, EscapesEverythingTheDialectNeeds) {
  EXPECT_EQ(regex_to_ebnf_expression("\"\\\\"), "\"\\\"\\\\\"");  // " and \ .
  EXPECT_EQ(regex_to_ebnf_expression("\\t\\n\\r\\x01\\x7f"), "\"\\t\\n\\r\\x01\\x7F\"");
  EXPECT_EQ(regex_to_ebnf_expression("\xC3\xA9\xF0\x9F\x98\x80"), "\"\\u00E9\\U0001F600\"");
  EXPECT_EQ(regex_to_ebnf_expression("[\\]\\-^a]"), "[\\-\\]\\^a]");
  EXPECT_TRUE(full_match("[\\]\\-^a]+", "]-^a"));
  EXPECT_EQ(regex_to_ebnf_expression("[\\x00-\\x1f]"), "[\\x00-\\x1F]");
}

TEST(RegexParse, EcmaScriptSpellings) {
  // Named groups in ECMAScript's form, \u{...}, surrogate pairs, \s's Unicode spaces.
  EXPECT_TRUE(full_match("(?<year>\\d{4})-(?<m>\\d\\d)", "2024-01"));
  EXPECT_TRUE(full_match("\\u{1F600}", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(full_match("\\uD83D\\uDE00", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(full_match("\\s", "\xEF\xBB\xBF"));  // U+FEFF
  EXPECT_FALSE(full_match("\\s", "\xC2\x85"));     // U+0085 is not ECMAScript whitespace
  EXPECT_FALSE(full_match("\\d", "\xD9\xA3"));     // Arabic-Indic 3: \d is ASCII
  EXPECT_FALSE(full_match("\\w", "\xC3\xA9"));     // \w is ASCII
  EXPECT_TRUE(full_match("[\\s\\S]", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(full_match("[\\s\\S]", "\n"));
  EXPECT_TRUE(full_match("\\/\\-\\ \\#", "/- #"));
  EXPECT_TRUE(full_match("a{2,3}?b+?c??", "aabb"));
}

TEST(RegexParse, RefusesLookaround) {
  EXPECT_THAT(error_of("a(?=b)"), HasSubstr("lookahead"));
  EXPECT_THAT(error_of("a(?!b)"), HasSubstr("lookahead"));
  EXPECT_THAT(error_of("(?<=a)b"), HasSubstr("lookbehind"));
  EXPECT_THAT(error_of("(?<!a)b"), HasSubstr("lookbehind"));
  EXPECT_THAT(error_of("\\bword"), HasSubstr("word boundary \\b"));
  EXPECT_THAT(error_of("a\\B"), HasSubstr("\\B"));
}

TEST(RegexParse, RefusesBackreferences) {
  EXPECT_THAT(error_of("(a)\\1"), HasSubstr("backreference"));
  EXPECT_THAT(error_of("(?<n>a)\\k<n>"), HasSubstr("backreference \\k"));
  EXPECT_THAT(error_of("(?P<n>a)(?P=n)"), HasSubstr("backreference (?P=...)"));
  EXPECT_THAT(error_of("(a)(?(1)b|c)"), HasSubstr("conditional group"));
}

TEST(RegexParse, RefusesAnchorsInTheMiddle) {
  EXPECT_THAT(error_of("a^b"), HasSubstr("'^' that is not at the start"));
  EXPECT_THAT(error_of("a$b"), HasSubstr("'$' that is not at the end"));
  EXPECT_THAT(error_of("(^a)*"), HasSubstr("'^' that is not at the start"));
  EXPECT_THAT(error_of("(a$)+"), HasSubstr("'$' that is not at the end"));
  EXPECT_THAT(error_of("a?^b"), HasSubstr("'^'"));
  EXPECT_THAT(error_of("\\Aab"), HasSubstr("anchor \\A"));
  EXPECT_THAT(error_of("ab\\Z"), HasSubstr("anchor \\Z"));
  EXPECT_THAT(error_of("ab\\z"), HasSubstr("anchor \\z"));
  EXPECT_THAT(error_of("\\Gab"), HasSubstr("anchor \\G"));
  EXPECT_THAT(error_of("^*"), HasSubstr("nothing to repeat"));
}

TEST(RegexParse, RefusesFlagsAndOtherGroups) {
  EXPECT_THAT(error_of("(?i)abc"), HasSubstr("inline flags"));
  EXPECT_THAT(error_of("(?i:abc)"), HasSubstr("inline flags"));
  EXPECT_THAT(error_of("(?>a+)b"), HasSubstr("atomic group"));
  EXPECT_THAT(error_of("a*+"), HasSubstr("possessive quantifier"));
  EXPECT_THAT(error_of("a{2}+"), HasSubstr("possessive quantifier"));
}

TEST(RegexParse, RefusesEscapesPythonAndEcmaScriptDisagreeOn) {
  EXPECT_THAT(error_of("\\p{L}"), HasSubstr("Unicode property escape \\p"));
  EXPECT_THAT(error_of("\\P{L}"), HasSubstr("Unicode property escape \\P"));
  EXPECT_THAT(error_of("\\cA"), HasSubstr("control escape \\c"));
  EXPECT_THAT(error_of("\\N{DASH}"), HasSubstr("named character escape \\N"));
  EXPECT_THAT(error_of("\\012"), HasSubstr("octal escape"));
  EXPECT_THAT(error_of("[\\1]"), HasSubstr("inside a character class"));
  EXPECT_THAT(error_of("x{,3}"), HasSubstr("\"{,n}\""));
  EXPECT_THAT(error_of("[]a]"), HasSubstr("']' first in a class"));
  EXPECT_THAT(error_of("[^]a]"), HasSubstr("']' first in a class"));
  EXPECT_THAT(error_of("\\uD800"), HasSubstr("lone surrogate"));
  EXPECT_THAT(error_of("\\q"), HasSubstr("bad escape \\q"));
}

TEST(RegexParse, RefusesMalformedPatterns) {
  EXPECT_THAT(error_of("*a"), HasSubstr("nothing to repeat"));
  EXPECT_THAT(error_of("a|+"), HasSubstr("nothing to repeat"));
  EXPECT_THAT(error_of("{2}"), HasSubstr("nothing to repeat"));
  EXPECT_THAT(error_of("a**"), HasSubstr("multiple repeat"));
  EXPECT_THAT(error_of("a{2}{3}"), HasSubstr("multiple repeat"));
  EXPECT_THAT(error_of("a{3,2}"), HasSubstr("min repeat greater than max repeat"));
  EXPECT_THAT(error_of("a{10001}"), HasSubstr("repeat count above 10000"));
  EXPECT_THAT(error_of("[abc"), HasSubstr("unterminated character set"));
  EXPECT_THAT(error_of("[b-a]"), HasSubstr("bad character range"));
  EXPECT_THAT(error_of("[\\d-z]"), HasSubstr("bad character range"));
  EXPECT_THAT(error_of("(ab"), HasSubstr("missing ), unterminated group"));
  EXPECT_THAT(error_of("ab)"), HasSubstr("unbalanced ')'"));
  EXPECT_THAT(error_of("a\\"), HasSubstr("bad escape (end of pattern)"));
  EXPECT_THAT(error_of("\\x4"), HasSubstr("incomplete escape"));
  EXPECT_THAT(error_of("(?P<1a>x)"), HasSubstr("bad character in group name"));
  EXPECT_THAT(error_of("a\xC3"), HasSubstr("invalid UTF-8"));
  EXPECT_THAT(error_of(std::string(100000, '(') + std::string(100000, ')')),
              HasSubstr("nesting groups deeper than 100"));
  EXPECT_NO_THROW(regex_to_ebnf(std::string(100, '(') + "a" + std::string(100, ')')));
  // The message quotes the pattern and says where.
  EXPECT_THAT(error_of("ab(?=c)"),
              HasSubstr("regex \"ab(?=c)\": lookahead \"(?=\" is not supported"));
  EXPECT_THAT(error_of("ab(?=c)"), HasSubstr("at offset 2"));
}

}  // namespace
}  // namespace tandem::grammar
