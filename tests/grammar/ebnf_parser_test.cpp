// The EBNF dialect: what parses into which IR, and the errors (with line:column) for what doesn't.
#include <gtest/gtest.h>

#include "grammar/grammar.h"
#include "grammar/ir.h"
#include "grammars.h"

namespace tandem::grammar {
namespace {

std::string error_of(const std::string& ebnf) {
  try {
    ir::parse_ebnf(ebnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(EbnfParser, ParsesTheTestGrammars) {
  for (const char* g : {testing::kJson, testing::kArith, testing::kBrackets, testing::kRepeats,
                        testing::kSharedPrefixes, testing::kUnicode}) {
    EXPECT_NO_THROW(ir::parse_ebnf(g)) << g;
  }
  const ir::Grammar g = ir::parse_ebnf(testing::kJson);
  EXPECT_EQ(g.rules.size(), 9u);
  EXPECT_EQ(g.rules[g.root].name, "root");
}

TEST(EbnfParser, LiteralEscapesBecomeUtf8) {
  const ir::Grammar g =
      ir::parse_ebnf(R"(root ::= "a\"\\\n\r\t\/\x41\u00e9\U0001F600\ud83d\ude00")");
  const ir::Expr& e = g.exprs[g.rules[0].body];
  ASSERT_EQ(e.op, ir::Op::kLiteral);
  EXPECT_EQ(e.bytes, "a\"\\\n\r\t/A\xC3\xA9\xF0\x9F\x98\x80\xF0\x9F\x98\x80");
}

TEST(EbnfParser, ClassesAndNegation) {
  const ir::Grammar g = ir::parse_ebnf(R"(root ::= [^a-c\]\-x])");
  const ir::Expr& e = g.exprs[g.rules[0].body];
  ASSERT_EQ(e.op, ir::Op::kClass);
  EXPECT_TRUE(e.negated);
  ASSERT_EQ(e.ranges.size(), 4u);
  const auto cps = ir::class_code_points(e);
  // Everything but a-c, ], -, x and the surrogates.
  uint64_t total = 0;
  for (auto r : cps) total += r.hi - r.lo + 1;
  EXPECT_EQ(total, 0x110000u - 6 - 0x800);
}

TEST(EbnfParser, RepeatsAndGroups) {
  const ir::Grammar g =
      ir::parse_ebnf("root ::= (\"a\" | \"b\"){2,5} \"c\"{3} \"d\"{1,} x?\nx ::= \"x\"");
  const ir::Expr& seq = g.exprs[g.rules[0].body];
  ASSERT_EQ(seq.op, ir::Op::kSeq);
  ASSERT_EQ(seq.items.size(), 4u);
  const ir::Expr& r0 = g.exprs[seq.items[0]];
  EXPECT_EQ(r0.op, ir::Op::kRepeat);
  EXPECT_EQ(r0.min, 2);
  EXPECT_EQ(r0.max, 5);
  EXPECT_EQ(g.exprs[seq.items[1]].max, 3);
  EXPECT_EQ(g.exprs[seq.items[2]].max, ir::kUnbounded);
  EXPECT_EQ(g.exprs[seq.items[3]].max, 1);
}

TEST(EbnfParser, RulesSpanLinesAndCommentsAreSkipped) {
  const ir::Grammar g = ir::parse_ebnf(
      "# a comment\nroot ::= a\n   | b # trailing\n   b\na ::= \"a\"\nb ::=\n \"b\"\n");
  EXPECT_EQ(g.rules.size(), 3u);
}

TEST(EbnfParser, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar line 1:10: unterminated string literal");
  EXPECT_EQ(error_of("root ::= \"a\"\n  foo"), "grammar line 2:3: undefined rule 'foo'");
  EXPECT_EQ(error_of("foo ::= \"a\""), "the grammar has no rule named 'root'");
  EXPECT_EQ(error_of("root ::= [b-a]"), "grammar line 1:11: character range out of order");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar line 1:11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,2}"), "grammar line 1:13: repetition {n,m} with m < n");
  EXPECT_EQ(error_of("root ::= (\"a\""), "grammar line 1:10: unclosed '('");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""),
            "grammar line 2:1: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= [abc"), "grammar line 1:10: unterminated character class");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "grammar line 1:14: unbalanced ')'");
  EXPECT_EQ(error_of("root ::= \"\\ud800\""), "grammar line 1:11: lone surrogate in a literal");
  EXPECT_EQ(error_of("root ::= \"a\"{99999}"), "grammar line 1:18: repetition count above 10000");
  EXPECT_EQ(error_of("root ::= ="), "grammar line 1:10: unexpected '='");
  EXPECT_EQ(error_of("root = \"a\""), "grammar line 1:6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= " + std::string(501, '(') + "\"a\"" + std::string(501, ')')),
            "grammar line 1:510: parentheses nested deeper than 500");
}

TEST(EbnfParser, LeftRecursionIsRefused) {
  EXPECT_EQ(error_of("root ::= root \"a\" | \"b\""),
            "left recursion: root -> root (rewrite it right-recursively or with repetition)");
  // Indirect, and behind a nullable prefix.
  EXPECT_EQ(error_of("root ::= a \"x\"\na ::= b? \"y\"* root\nb ::= \"b\""),
            "left recursion: root -> a -> root (rewrite it right-recursively or with repetition)");
  EXPECT_NE(error_of("root ::= (e root)* \"z\"\ne ::= \"\"").find("left recursion"),
            std::string::npos);
  // Right recursion and recursion after a byte are fine.
  EXPECT_EQ(error_of("root ::= \"a\" root | \"\""), "(no error)");
  EXPECT_EQ(error_of("root ::= \"(\" root \")\" root | \"\""), "(no error)");
}

TEST(EbnfParser, GrammarThatMatchesNothingIsRefused) {
  EXPECT_EQ(error_of("root ::= x\nx ::= \"a\" x"), "the grammar matches nothing (root is empty)");
  EXPECT_EQ(error_of("root ::= [^\\x00-\\U0010FFFF]"),
            "the grammar matches nothing (root is empty)");
}

}  // namespace
}  // namespace tandem::grammar
