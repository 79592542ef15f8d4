// The reference recognizer itself, on hand-picked sentences and prefixes: the matcher tests trust
// it, so it must be right on its own.
#include <gtest/gtest.h>

#include "grammar/earley.h"
#include "grammars.h"

namespace tandem::grammar {
namespace {

TEST(Earley, JsonSentencesAndPrefixes) {
  EarleyRecognizer r(ir::parse_ebnf(testing::kJson));
  for (const char* s : {"{}", " [1, 2.5e-3, \"x\\u00e9\", true, null, {\"a\": []}] ", "\"\"", "-0",
                        "{\"k\":{\"k\":{\"k\":\"v\"}}}", "\"caf\xC3\xA9 \xF0\x9F\x98\x80\""}) {
    EXPECT_TRUE(r.is_sentence(s)) << s;
    EXPECT_TRUE(r.is_prefix(s)) << s;
  }
  for (const char* s : {"{", "[1,", "\"ab", "{\"a\"", "tr", "-", "1e", "\"\\u00"}) {
    EXPECT_FALSE(r.is_sentence(s)) << s;
    EXPECT_TRUE(r.is_prefix(s)) << s;
  }
  for (const char* s : {"}", "[1,]", "01", "{\"a\" 1}", "tru e", "\"\x01\"", "[1 2]", "\"\\x\""}) {
    EXPECT_FALSE(r.is_prefix(s)) << s;
  }
}

TEST(Earley, CutUtf8SequencesArePrefixes) {
  EarleyRecognizer r(ir::parse_ebnf(testing::kUnicode));
  EXPECT_TRUE(r.is_sentence("\xCE\xB1"));         // α
  EXPECT_TRUE(r.is_prefix("\xCE"));               // first byte of α..ω
  EXPECT_FALSE(r.is_prefix("\xCF\x8A"));          // ϊ is past ω
  EXPECT_TRUE(r.is_prefix("\xF0\x9F\x98"));       // three bytes of 😀
  EXPECT_FALSE(r.is_prefix("\xF0\x9F\x99\x90"));  // U+1F650 is outside the emoji class
  EXPECT_TRUE(r.is_sentence("<\xF4\x8F\xBF\xBF>"));
  EXPECT_FALSE(r.is_prefix("<\xED\xA0"));  // a surrogate's encoding is never valid
  EXPECT_FALSE(r.is_prefix("<\xC0"));      // overlong
  EXPECT_TRUE(r.is_prefix("\xE2\x86"));    // the literal "→x"
  EXPECT_TRUE(r.is_sentence("\xE2\x86\x92x\xC3\xA9"));
}

TEST(Earley, IncrementalExtendAndTruncate) {
  EarleyRecognizer r(ir::parse_ebnf(testing::kArith));
  auto c = r.start();
  r.extend(c, "1 + (2");
  EXPECT_TRUE(r.viable(c));
  EXPECT_FALSE(r.complete(c));
  r.extend(c, ")");
  EXPECT_TRUE(r.complete(c));
  r.extend(c, ")");
  EXPECT_FALSE(r.viable(c));
  r.truncate(c, 3);
  EXPECT_TRUE(r.viable(c));
  r.extend(c, "3*4");
  EXPECT_TRUE(r.complete(c));
  EXPECT_TRUE(r.is_sentence("1 + 3*4"));
}

TEST(Earley, NullableRulesAndRepeats) {
  EarleyRecognizer r(ir::parse_ebnf(testing::kRepeats));
  EXPECT_TRUE(r.is_sentence("x12-aba!"));
  EXPECT_TRUE(r.is_sentence("x1234-bbb.xyz!!!"));
  EXPECT_FALSE(r.is_prefix("x12345"));
  EXPECT_FALSE(r.is_prefix("x1-"));
  EXPECT_FALSE(r.is_prefix("x12-ab!"));
  EXPECT_FALSE(r.is_prefix("x12-abb.abcd"));
  EXPECT_TRUE(r.is_prefix("x12-abb.abc"));
  EXPECT_FALSE(r.is_sentence("x12-abb"));
  EarleyRecognizer b(ir::parse_ebnf(testing::kBrackets));
  EXPECT_TRUE(b.is_sentence(""));
  EXPECT_TRUE(b.is_sentence("([{a}]b)c"));
  EXPECT_FALSE(b.is_prefix("([)"));
}

}  // namespace
}  // namespace tandem::grammar
