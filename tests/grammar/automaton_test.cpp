// The compiled automaton's shape: node counts stay small (shared UTF-8 suffixes, merged
// identical nodes, linear bounded repeats), small rules are inlined, dead paths are trimmed.
#include <gtest/gtest.h>

#include <string>

#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammars.h"

namespace tandem::grammar {
namespace {

Automaton build(const char* ebnf, int inline_max_nodes = AutomatonOptions{}.inline_max_nodes) {
  AutomatonOptions opt;
  opt.inline_max_nodes = inline_max_nodes;
  return build_automaton(ir::parse_ebnf(ebnf), opt);
}

int32_t rule_index(const Automaton& a, const std::string& name) {
  for (size_t r = 0; r < a.rule_names.size(); ++r)
    if (a.rule_names[r] == name) return static_cast<int32_t>(r);
  return -1;
}

TEST(Automaton, NegatedClassSharesContinuationSuffixes) {
  // start, end, and one node per distinct continuation suffix (7 for this class).
  EXPECT_EQ(build(R"(root ::= [^"\\\x00-\x1f])").num_nodes(), 9);
  // F0 [90-BF] .., [F1-F3] [80-BF] .., F4 [80-8F] ..: five suffixes.
  EXPECT_EQ(build(R"(root ::= [\U00010000-\U0010FFFF])").num_nodes(), 2 + 5);
}

TEST(Automaton, IdenticalStructureMerges) {
  // The two "abc" alternatives and the shared tails collapse; prefixes stay (not determinized).
  EXPECT_LE(build(R"(root ::= "abc" | "abd" | "abc" | "xbc")").num_nodes(), 7);
  // A bounded repeat costs a node per copy, not more.
  EXPECT_LE(build("root ::= [a-z]{0,100}").num_nodes(), 102);
  EXPECT_LE(build("root ::= [a-z]{100}").num_nodes(), 102);
}

TEST(Automaton, LongSharedSuffixesCollapseCompletely) {
  // Three 1,500-byte literals that differ in their first byte: the three tails are one chain
  // (start, 1,500 shared nodes, the end). merge_identical's first pass collapses such a chain at
  // once, where its fixpoint merged one layer per pass (docs/structured-outputs.md).
  const std::string tail(1500, 'a');
  const std::string g = "root ::= \"x" + tail + "\" | \"y" + tail + "\" | \"z" + tail + "\"";
  EXPECT_EQ(build(g.c_str()).num_nodes(), 1 + 1500 + 1);
  // Behind a loop the tails are one cycle with the start: the fixpoint merges them, a layer per
  // pass (the first pass only takes nodes outside cycles), to the same size.
  const std::string short_tail(200, 'a');
  const std::string h = "root ::= (\"x" + short_tail + "\" | \"y" + short_tail + "\")+";
  EXPECT_LE(build(h.c_str()).num_nodes(), 1 + 200 + 2);
}

TEST(Automaton, SmallRulesAreInlined) {
  const Automaton a = build(testing::kJson);
  EXPECT_EQ(a.rule_start[rule_index(a, "ws")], -1);    // inlined everywhere
  EXPECT_GE(a.rule_start[rule_index(a, "value")], 0);  // recursive: called
  EXPECT_LT(a.num_nodes(), 100);
  const Automaton plain = build(testing::kJson, 0);
  EXPECT_GE(plain.rule_start[rule_index(plain, "ws")], 0);
}

TEST(Automaton, ExplodingRepeatsAreRefused) {
  try {
    build(R"(root ::= (("a"{100}){100}){100})");
    FAIL() << "no error";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("grammar too large"), std::string::npos) << e.what();
  }
}

TEST(Automaton, StackedQuantifiersFoldIntoOne) {
  // Unfolded, each '+' doubles the copies of "ab": 2^20 of them, refused as too large (and the
  // grammar fuzzer's 13 took a minute to compile).
  const Automaton a = build(R"(root ::= "ab"++++++++++++++++++++ "c")");
  EXPECT_LE(a.num_nodes(), build(R"(root ::= "ab"+ "c")").num_nodes());
  EXPECT_LE(build(R"(root ::= ((("x"?)*)+)?)").num_nodes(), build(R"(root ::= "x"*)").num_nodes());
  // (x{2,})* cannot match one x: not folded, still correct (MatcherVsEarley, "stacked").
  EXPECT_GT(build(R"(root ::= ("x"{2,})*)").num_nodes(), build(R"(root ::= "x"*)").num_nodes());
}

TEST(Automaton, DeadPathsAreTrimmed) {
  // `never` matches nothing: the alternative through it disappears, and so does the rule.
  const Automaton a = build("root ::= \"a\" never | \"b\"\nnever ::= \"x\" never", 0);
  EXPECT_EQ(a.rule_start[rule_index(a, "never")], -1);
  EXPECT_EQ(a.num_nodes(), 2);
}

}  // namespace
}  // namespace tandem::grammar
