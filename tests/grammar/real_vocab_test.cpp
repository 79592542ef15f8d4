// fill_mask against brute force over real vocabularies (tokens that span rule ends, partial
// UTF-8, long runs of spaces, special tokens): a random subsample of Qwen3's vocabulary, every
// token checked with accept_token and a share with the Earley reference; then the whole Qwen3
// and DeepSeek-V3 vocabularies along walks that follow the tokenizer's own encoding of random
// JSON. Needs TANDEM_TOKENIZER_FIXTURES (the tokenizer fixtures, see tests/tokenizer); skipped
// without it.
#include <gtest/gtest.h>

#include <filesystem>

#include "grammar/earley.h"
#include "grammars.h"
#include "mask_check.h"
#include "test_util.h"

namespace tandem::grammar {
namespace {

std::filesystem::path tokenizer_path(const std::string& name) {
  const auto dir = testing::fixtures_dir();
  if (dir.empty()) return {};
  const auto p = dir / name / "tokenizer.json";
  return std::filesystem::exists(p) ? p : std::filesystem::path{};
}

TEST(RealVocab, Qwen3SubsampleEqualsBruteForce) {
  const auto path = tokenizer_path("qwen3");
  if (path.empty()) GTEST_SKIP() << "TANDEM_TOKENIZER_FIXTURES/qwen3/tokenizer.json not found";
  const uint64_t seed = testing::seed_from_env(31337);
  std::printf("seed %llu (TANDEM_GRAMMAR_SEED overrides)\n", static_cast<unsigned long long>(seed));
  const auto full = testing::vocab_of(Tokenizer::from_file(path.string()));
  std::mt19937_64 rng(seed);
  for (const testing::NamedGrammar& ng :
       {testing::kAll[0], testing::kAll[1], testing::kAll[5], testing::kAll[7]}) {
    SCOPED_TRACE(ng.name);
    // 8000 random tokens, every special token, and every token with a quote (the string rule's
    // end, where tokens become context-dependent).
    auto v = std::make_shared<TokenVocab>();
    for (int32_t id = 0; id < full->size(); ++id) {
      const std::string& b = full->bytes[id];
      if (full->special[id] || b.find('"') != std::string::npos || rng() % 19 == 0) {
        v->bytes.push_back(b);
        v->special.push_back(full->special[id]);
      }
    }
    const ir::Grammar g = ir::parse_ebnf(ng.ebnf);
    EarleyRecognizer oracle(g);
    testing::SentenceGenerator gen(g, rng());
    auto cg = compile(ng.ebnf, v);
    std::vector<int32_t> all(v->size());
    for (int32_t i = 0; i < v->size(); ++i) all[i] = i;
    testing::MaskCheck stats;
    for (int walk = 0; walk < 4; ++walk) {
      Matcher m(cg);
      auto chart = oracle.start();
      const std::string target = gen.sentence();
      size_t pos = 0;
      for (int step = 0; step < 25; ++step) {
        const std::string where = "walk " + std::to_string(walk) + " step " + std::to_string(step) +
                                  " after '" + chart.input + "'";
        testing::check_mask(m, *v, all, &oracle, &chart, stats, where, 97, 13);
        if (::testing::Test::HasFatalFailure()) return;
        const int32_t id = testing::next_token(m, *v, target, pos, gen.rng());
        if (id < 0) break;
        ASSERT_TRUE(m.accept_token(id));
        oracle.extend(chart, v->bytes[id]);
      }
    }
    std::printf("%s: %lld tokens checked, %lld allowed\n", ng.name,
                static_cast<long long>(stats.checked), static_cast<long long>(stats.allowed));
  }
}

// JSON as models write it: pretty-printed, escapes, non-ASCII, numbers in every form.
constexpr const char* kDocs[] = {
    R"({"name": "Ada Lovelace", "born": 1815, "tags": ["math", "poetry"], "bio": "She wrote the first \"program\" - for the Analytical Engine.\n", "ok": true})",
    "[\n  {\"id\": 1, \"score\": -0.25e+3, \"city\": \"Z\xC3\xBCrich\"},\n  {\"id\": 2, \"emoji\": "
    "\"\xF0\x9F\x98\x80 ok\", \"empty\": {}, \"list\": [null, false]}\n]",
    R"({"a":{"b":{"c":{"d":[[1,2],[3,{"e":"\u00e9\\\/"}]]}}}})",
};

void full_vocab_walks(const std::string& name, uint64_t seed) {
  const auto path = tokenizer_path(name);
  if (path.empty()) GTEST_SKIP() << "TANDEM_TOKENIZER_FIXTURES/" << name << " not found";
  std::printf("%s seed %llu\n", name.c_str(), static_cast<unsigned long long>(seed));
  const Tokenizer tok = Tokenizer::from_file(path.string());
  const auto v = testing::vocab_of(tok);
  auto cg = compile(testing::kJson, v);
  std::mt19937_64 rng(seed);
  std::vector<int32_t> all(v->size());
  for (int32_t i = 0; i < v->size(); ++i) all[i] = i;
  testing::MaskCheck stats;
  for (const char* doc : kDocs) {
    const std::vector<int32_t> ids = tok.encode(doc);
    Matcher m(cg);
    for (size_t i = 0; i < ids.size(); ++i) {
      // Every token at every third step; a random eighth of them at the others.
      std::vector<int32_t> sample;
      if (i % 3 != 0) {
        for (int32_t id : all)
          if (rng() % 8 == 0) sample.push_back(id);
      }
      testing::check_mask(m, *v, i % 3 == 0 ? all : sample, nullptr, nullptr, stats,
                          "token " + std::to_string(i) + " of '" + doc + "'");
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_TRUE(m.accept_token(ids[i]));
    }
    EXPECT_TRUE(m.can_terminate()) << doc;
  }
  std::printf("%s: %lld tokens checked, %lld allowed\n", name.c_str(),
              static_cast<long long>(stats.checked), static_cast<long long>(stats.allowed));
}

TEST(RealVocab, Qwen3FullVocabularyAlongTokenizedJson) {
  full_vocab_walks("qwen3", testing::seed_from_env(99));
}
TEST(RealVocab, DeepSeekV3FullVocabularyAlongTokenizedJson) {
  full_vocab_walks("deepseek_v3", testing::seed_from_env(100));
}

}  // namespace
}  // namespace tandem::grammar
