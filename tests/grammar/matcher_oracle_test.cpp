// The matcher against the Earley reference, byte by byte, on many random strings per grammar:
// sentences, their mutations and byte soup over the grammar's alphabet. After every byte the
// matcher must be alive exactly when the prefix is viable, and at the end may terminate
// exactly when it is a sentence. Inlining on and off (two automaton shapes, one language).
#include <gtest/gtest.h>

#include <set>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammars.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

// Sentences, cut sentences, sentences mutated by a few random edits, and soups of bytes seen in
// sentences.
std::vector<std::string> random_strings(testing::SentenceGenerator& gen, int n) {
  auto& rng = gen.rng();
  std::vector<std::string> sentences;
  for (int i = 0; i < n / 2; ++i) sentences.push_back(gen.sentence());
  std::string alphabet;
  for (const auto& s : sentences) alphabet += s;
  alphabet += "\x80\xBF\xC3\xE2\xF0\xFF \"\\";
  std::vector<std::string> out = sentences;
  for (int i = 0; i < n / 4; ++i) {
    std::string s = sentences[rng() % sentences.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
      const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0:
          s.insert(s.begin() + at, c);
          break;
        case 1:
          if (at < s.size()) s.erase(at, 1);
          break;
        default:
          if (at < s.size()) s[at] = c;
      }
    }
    out.push_back(s);
  }
  for (int i = 0; i < n / 8; ++i) {  // proper prefixes, cut anywhere (inside UTF-8 too)
    const std::string& s = sentences[rng() % sentences.size()];
    out.push_back(s.substr(0, s.empty() ? 0 : rng() % s.size()));
  }
  while (static_cast<int>(out.size()) < n) {
    std::string s;
    for (int k = static_cast<int>(rng() % 24); k >= 0; --k) s += alphabet[rng() % alphabet.size()];
    out.push_back(s);
  }
  return out;
}

void check_language(const testing::NamedGrammar& ng, int inline_max_nodes, uint64_t seed) {
  SCOPED_TRACE(std::string(ng.name) + " inline_max_nodes=" + std::to_string(inline_max_nodes) +
               " seed=" + std::to_string(seed));
  const ir::Grammar g = ir::parse_ebnf(ng.ebnf);
  EarleyRecognizer oracle(g);
  auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  AutomatonOptions opt;
  opt.inline_max_nodes = inline_max_nodes;
  auto cg = compile_with(ng.ebnf, vocab, opt);
  testing::SentenceGenerator gen(g, seed);
  int sentences = 0, alive_to_end = 0;
  for (const std::string& s : random_strings(gen, 400)) {
    Matcher m(cg);
    auto chart = oracle.start();
    bool alive = true;
    for (size_t i = 0; i < s.size() && alive; ++i) {
      oracle.extend(chart, s.substr(i, 1));
      const bool viable = oracle.viable(chart);
      alive = m.accept_token(ids[static_cast<uint8_t>(s[i])]);
      ASSERT_EQ(alive, viable) << "after " << i + 1 << " bytes of '" << s << "'";
    }
    if (!alive) continue;
    ++alive_to_end;
    ASSERT_EQ(m.can_terminate(), oracle.complete(chart)) << "'" << s << "'";
    sentences += m.can_terminate();
  }
  // The generator must actually produce sentences, or the test proves little.
  EXPECT_GT(sentences, 150);
  EXPECT_GE(alive_to_end, sentences);
}

TEST(MatcherVsEarley, RandomStringsPerGrammar) {
  const uint64_t seed = testing::seed_from_env(20250601);
  std::printf("seed %llu (TANDEM_GRAMMAR_SEED overrides)\n", static_cast<unsigned long long>(seed));
  for (const auto& ng : testing::kAll) {
    check_language(ng, AutomatonOptions{}.inline_max_nodes, seed);
    check_language(ng, 0, seed + 1);
  }
}

TEST(MatcherVsEarley, AmbiguousRecursionStaysSmall) {
  auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  EarleyRecognizer oracle(ir::parse_ebnf(testing::kAmbiguous));
  Matcher m(compile(testing::kAmbiguous, vocab));
  // 2^200 ways to read this; the merged stacks make it a few per bracket.
  std::string s(200, '[');
  s += "a]b]";
  for (char c : s) ASSERT_TRUE(m.accept_token(ids[static_cast<uint8_t>(c)]));
  EXPECT_TRUE(oracle.is_prefix(s));
  EXPECT_FALSE(m.can_terminate());
  const auto mask = testing::mask_of(m);
  EXPECT_TRUE(testing::bit(mask, ids[']']));
  EXPECT_TRUE(testing::bit(mask, ids['[']));
  EXPECT_FALSE(testing::bit(mask, ids[')']));
}

// Every pair and triple of quantifiers stacked on "x", exhaustively on x^0 .. x^14: the
// automaton folds some stacks into one quantifier, and a fold that changed which counts are
// sentences would show here (the Earley oracle reads them as written).
TEST(MatcherVsEarley, StackedQuantifiersOnEveryCount) {
  auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  const char* quantifiers[] = {"?", "*", "+", "{2,}", "{0,2}", "{2,3}", "{1,}", "{3}", "{0,}"};
  std::vector<std::string> grammars;
  for (const char* q1 : quantifiers)
    for (const char* q2 : quantifiers) {
      grammars.push_back(std::string("root ::= ((\"x\")") + q1 + ")" + q2);
      for (const char* q3 : {"?", "+", "{2,}", "*"})
        grammars.push_back(std::string("root ::= (((\"x\")") + q1 + ")" + q2 + ")" + q3);
    }
  for (const std::string& ebnf : grammars) {
    SCOPED_TRACE(ebnf);
    EarleyRecognizer oracle(ir::parse_ebnf(ebnf));
    Matcher m(compile(ebnf, vocab));
    auto chart = oracle.start();
    for (int n = 0; n <= 14; ++n) {
      if (n > 0) {
        oracle.extend(chart, "x");
        const bool viable = oracle.viable(chart);
        ASSERT_EQ(m.accept_token(ids['x']), viable) << "at x^" << n;
        if (!viable) break;
      }
      ASSERT_EQ(m.can_terminate(), oracle.complete(chart)) << "x^" << n;
    }
  }
}

TEST(MatcherVsEarley, IsTerminated) {
  auto vocab = testing::byte_vocab();
  const auto ids = testing::byte_ids(*vocab);
  Matcher m(compile(R"(root ::= "ab" "c"?)", vocab));
  EXPECT_FALSE(m.can_terminate());
  ASSERT_TRUE(m.accept_token(ids['a']));
  ASSERT_TRUE(m.accept_token(ids['b']));
  EXPECT_TRUE(m.can_terminate());
  EXPECT_FALSE(m.is_terminated());
  ASSERT_TRUE(m.accept_token(ids['c']));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token(ids['c']));
  EXPECT_EQ(m.num_tokens(), 3);
}

}  // namespace
}  // namespace tandem::grammar
