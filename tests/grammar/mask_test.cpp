// fill_mask equals brute force (accept_token on every token, and the Earley reference) at every
// step of random walks, over a vocabulary of all single bytes plus random pieces of sentences
// and a few special tokens; rollback restores masks exactly; special and empty tokens.
#include <gtest/gtest.h>

#include <set>

#include "grammar/compiled_grammar.h"
#include "grammar/earley.h"
#include "grammars.h"
#include "mask_check.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

// Bytes, pieces of sentences (so multi-byte tokens cross rule ends, as real tokens do), and
// pieces of garbage.
std::shared_ptr<TokenVocab> synthetic_vocab(testing::SentenceGenerator& gen, int pieces) {
  auto v = testing::byte_vocab({"<tool_call>", "<|end|>"});
  auto& rng = gen.rng();
  std::set<std::string> seen(v->bytes.begin(), v->bytes.end());
  while (pieces > 0) {
    const std::string s = gen.sentence();
    if (s.size() < 2) continue;
    const size_t len = 2 + rng() % std::min<size_t>(8, s.size() - 1);
    const size_t at = rng() % (s.size() - len + 1);
    std::string piece = s.substr(at, len);
    if (rng() % 8 == 0) piece[rng() % piece.size()] = static_cast<char>(rng());
    if (seen.insert(piece).second) v->bytes.push_back(piece), v->special.push_back(0), --pieces;
  }
  v->bytes.push_back("");  // a token that decodes to nothing (e.g. an unused id)
  v->special.push_back(0);
  return v;
}

void walk_grammar(const testing::NamedGrammar& ng, int inline_max_nodes, uint64_t seed) {
  SCOPED_TRACE(std::string(ng.name) + " inline_max_nodes=" + std::to_string(inline_max_nodes) +
               " seed=" + std::to_string(seed));
  const ir::Grammar g = ir::parse_ebnf(ng.ebnf);
  EarleyRecognizer oracle(g);
  testing::SentenceGenerator gen(g, seed);
  auto vocab = synthetic_vocab(gen, 600);
  AutomatonOptions opt;
  opt.inline_max_nodes = inline_max_nodes;
  auto cg = compile_with(ng.ebnf, vocab, opt);
  std::vector<int32_t> all(vocab->size());
  for (int32_t i = 0; i < vocab->size(); ++i) all[i] = i;
  testing::MaskCheck stats;
  auto& rng = gen.rng();
  for (int walk = 0; walk < 12; ++walk) {
    Matcher m(cg);
    auto chart = oracle.start();
    const std::string target = gen.sentence();
    size_t pos = 0;
    for (int step = 0; step < 40; ++step) {
      const std::string where = "walk " + std::to_string(walk) + " step " + std::to_string(step) +
                                " after '" + chart.input + "'";
      testing::check_mask(m, *vocab, all, &oracle, &chart, stats, where, 5);
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_EQ(m.can_terminate(), oracle.complete(chart)) << where;
      const int32_t id = testing::next_token(m, *vocab, target, pos, rng);
      if (id < 0) break;
      ASSERT_TRUE(m.accept_token(id)) << where;
      oracle.extend(chart, vocab->bytes[id]);
    }
  }
  // Enough of the vocabulary was allowed at some point for the comparison to mean something.
  EXPECT_GT(stats.allowed, stats.checked / 100);
}

TEST(Masks, EqualBruteForceOnRandomWalks) {
  const uint64_t seed = testing::seed_from_env(777);
  std::printf("seed %llu (TANDEM_GRAMMAR_SEED overrides)\n", static_cast<unsigned long long>(seed));
  for (const auto& ng : testing::kAll) {
    walk_grammar(ng, AutomatonOptions{}.inline_max_nodes, seed);
    walk_grammar(ng, 0, seed + 1);
  }
}

TEST(Masks, RollbackRestoresMasksExactly) {
  const uint64_t seed = testing::seed_from_env(4242);
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  const ir::Grammar g = ir::parse_ebnf(testing::kJson);
  testing::SentenceGenerator gen(g, seed);
  auto vocab = synthetic_vocab(gen, 400);
  auto cg = compile(testing::kJson, vocab);
  auto& rng = gen.rng();
  Matcher m(cg);
  std::vector<std::vector<uint32_t>> masks{testing::mask_of(m)};
  std::vector<bool> term{m.can_terminate()};
  const std::string target = gen.sentence() + gen.sentence();
  size_t pos = 0;
  int accepted = 0;
  for (int step = 0; step < 200; ++step) {
    if (step % 7 == 6 && m.num_tokens() > 0) {
      // Back a few tokens; the masks there must be exactly as they were.
      const int64_t n = 1 + static_cast<int64_t>(rng() % std::min<int64_t>(4, m.num_tokens()));
      m.rollback(n);
      masks.resize(masks.size() - n);
      term.resize(term.size() - n);
      ASSERT_EQ(testing::mask_of(m), masks.back()) << "step " << step << " rollback " << n;
      ASSERT_EQ(m.can_terminate(), term.back());
      continue;
    }
    const int32_t id = testing::next_token(m, *vocab, target, pos, rng);
    if (id < 0) break;
    ASSERT_TRUE(m.accept_token(id));
    ++accepted;
    masks.push_back(testing::mask_of(m));
    term.push_back(m.can_terminate());
  }
  EXPECT_GT(accepted, 100);
  EXPECT_EQ(m.num_tokens() + 1, static_cast<int64_t>(masks.size()));
  EXPECT_THROW(m.rollback(m.num_tokens() + 1), std::out_of_range);
  m.rollback(m.num_tokens());
  EXPECT_EQ(testing::mask_of(m), masks.front());
}

TEST(Masks, SpecialTokensOnlyInsideLiterals) {
  auto vocab = testing::byte_vocab({"<tool_call>", "</tool_call>", "<|im_end|>", "<s>"});
  auto id_of = [&](const std::string& s) {
    for (int32_t i = 0; i < vocab->size(); ++i)
      if (vocab->special[i] && vocab->bytes[i] == s) return i;
    return -1;
  };
  const int32_t call = id_of("<tool_call>"), end_call = id_of("</tool_call>"),
                im_end = id_of("<|im_end|>"), s_tok = id_of("<s>");
  // <tool_call> is a literal, <s> occurs inside one; free text ([^\n]*) could spell <|im_end|>
  // and </tool_call> byte by byte, but the special tokens themselves never match it.
  auto cg = compile(R"(root ::= "<tool_call>" [^\n]* "\n" "a<s>b"?)", vocab);
  Matcher m(cg);
  auto mask = testing::mask_of(m);
  EXPECT_TRUE(testing::bit(mask, call));
  EXPECT_FALSE(testing::bit(mask, im_end));
  ASSERT_TRUE(m.accept_token(call));
  mask = testing::mask_of(m);
  EXPECT_FALSE(testing::bit(mask, im_end));
  EXPECT_FALSE(testing::bit(mask, end_call));
  EXPECT_FALSE(m.accept_token(im_end));
  EXPECT_FALSE(m.accept_token(end_call));
  // An allowed special token matches as its text anywhere that text may appear.
  EXPECT_TRUE(testing::bit(mask, s_tok));
  const auto ids = testing::byte_ids(*vocab);
  ASSERT_TRUE(m.accept_token(ids['\n']));
  ASSERT_TRUE(m.accept_token(ids['a']));
  EXPECT_TRUE(testing::bit(testing::mask_of(m), s_tok));
  ASSERT_TRUE(m.accept_token(s_tok));
  ASSERT_TRUE(m.accept_token(ids['b']));
  EXPECT_TRUE(m.is_terminated());
}

TEST(Masks, EmptyTokensNeverAllowed) {
  auto vocab = testing::byte_vocab();
  vocab->bytes.insert(vocab->bytes.begin() + 10, "");  // an empty token among the bytes
  vocab->special.insert(vocab->special.begin() + 10, 0);
  vocab->bytes.push_back("");
  vocab->special.push_back(1);
  auto cg = compile(R"(root ::= [a-z]* | "")", vocab);
  Matcher m(cg);
  for (int step = 0; step < 3; ++step) {
    const auto mask = testing::mask_of(m);
    EXPECT_FALSE(testing::bit(mask, 10));
    EXPECT_FALSE(testing::bit(mask, vocab->size() - 1));
    EXPECT_FALSE(m.accept_token(10));
    EXPECT_FALSE(m.accept_token(vocab->size() - 1));
    ASSERT_TRUE(m.accept_token(testing::byte_ids(*vocab)['q']));
  }
  EXPECT_FALSE(m.accept_token(-1));
  EXPECT_FALSE(m.accept_token(vocab->size()));
}

}  // namespace
}  // namespace tandem::grammar
