// The BPE model on handmade vocabularies: merge formats, rank order, ignore_merges, subword
// prefix/suffix, unknown characters, byte fallback, and long inputs.
#include <chrono>

#include "test_util.h"

namespace tandem::test {
namespace {

using Ids = std::vector<int32_t>;

TEST(Bpe, BothMergeFormatsGiveTheSameTokens) {
  const std::vector<std::string> vocab = {"a", "b", "c", "ab", "abc", "bc"};
  const Tokenizer strings = load(tiny_bpe(vocab, {"a b", "ab c"}));
  const Tokenizer pairs = load(tiny_bpe(vocab, merge_pairs({{"a", "b"}, {"ab", "c"}})));
  for (const Tokenizer* t : {&strings, &pairs}) {
    EXPECT_EQ(t->encode("abc"), Ids({4}));
    EXPECT_EQ(t->encode("abab"), Ids({3, 3}));
    EXPECT_EQ(t->encode("cab"), Ids({2, 3}));
    EXPECT_EQ(t->encode("ba"), Ids({1, 0}));
  }
}

TEST(Bpe, LowerRankMergesFirst) {
  const std::vector<std::string> vocab = {"a", "b", "c", "ab", "bc"};
  EXPECT_EQ(load(tiny_bpe(vocab, {"b c", "a b"})).encode("abc"), Ids({0, 4}));
  EXPECT_EQ(load(tiny_bpe(vocab, {"a b", "b c"})).encode("abc"), Ids({3, 2}));
  // Equal pairs merge left to right: "aaa" -> "aa" + "a".
  EXPECT_EQ(load(tiny_bpe({"a", "aa"}, {"a a"})).encode("aaa"), Ids({1, 0}));
}

TEST(Bpe, PairFormatAllowsSpacesInTokens) {
  const Tokenizer t =
      load(tiny_bpe({"a", " ", "b", "a ", "a b"}, merge_pairs({{"a", " "}, {"a ", "b"}})));
  EXPECT_EQ(t.encode("a b"), Ids({4}));
}

TEST(Bpe, IgnoreMergesTakesWholeWordsFromTheVocab) {
  // The merges reach "bc" first and then have no way to "abc"; the vocab has it anyway.
  json j = tiny_bpe({"a", "b", "c", "ab", "bc", "abc"}, {"b c", "a b"});
  EXPECT_EQ(load(j).encode("abc"), Ids({0, 4}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(j).encode("abc"), Ids({5}));
  EXPECT_EQ(load(j).encode("abcc"), Ids({0, 4, 2}));  // not in the vocab: merges as usual
}

TEST(Bpe, ContinuingSubwordPrefix) {
  json j = tiny_bpe({"a", "##b", "##c", "ab", "abc", "c"}, {"a ##b", "ab ##c"});
  j["model"]["continuing_subword_prefix"] = "##";
  const Tokenizer t = load(j);
  EXPECT_EQ(t.encode("abc"), Ids({4}));
  EXPECT_EQ(t.encode("ac"), Ids({0, 2}));
  EXPECT_EQ(t.encode("ca"), Ids({5}));  // "##a" is unknown and, without unk, dropped (as HF)
}

TEST(Bpe, EndOfWordSuffix) {
  json j = tiny_bpe({"a", "b", "b</w>", "ab</w>", "a</w>"}, {"a b</w>"});
  j["model"]["end_of_word_suffix"] = "</w>";
  const Tokenizer t = load(j);
  EXPECT_EQ(t.encode("ab"), Ids({3}));
  EXPECT_EQ(t.encode("ba"), Ids({1, 4}));
}

TEST(Bpe, UnknownCharactersUseUnkAndFuseUnk) {
  json j = tiny_bpe({"a", "<unk>"}, json::array());
  j["model"]["unk_token"] = "<unk>";
  EXPECT_EQ(load(j).encode("axxa"), Ids({0, 1, 1, 0}));
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(j).encode("axxa"), Ids({0, 1, 0}));
}

TEST(Bpe, ByteFallback) {
  json j = tiny_bpe({"a", "<unk>", "<0xC3>", "<0xA9>"}, json::array());
  j["model"]["unk_token"] = "<unk>";
  j["model"]["byte_fallback"] = true;
  j["decoder"] = {{"type", "Sequence"},
                  {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}};
  const Tokenizer t = load(j);
  EXPECT_EQ(t.encode("a\xC3\xA9"), Ids({0, 2, 3}));
  EXPECT_EQ(t.encode("\xE2\x82\xAC"), Ids({1}));  // a byte without a token: unk instead
  EXPECT_EQ(t.decode({0, 2, 3}), "a\xC3\xA9");
  EXPECT_EQ(t.token_bytes(2), "\xC3");
}

TEST(Bpe, LongWordsStayFast) {
  // A merge ladder a, aa, aaaa, ... on a 200k-character word: a rescanning BPE is quadratic
  // here (minutes); the priority queue takes milliseconds.
  std::vector<std::string> vocab = {"a"};
  json merges = json::array();
  for (int k = 0; k < 10; ++k) {
    merges.push_back(vocab.back() + " " + vocab.back());
    vocab.push_back(vocab.back() + vocab.back());
  }
  const Tokenizer t = load(tiny_bpe(vocab, merges));
  const auto start = std::chrono::steady_clock::now();
  const Ids ids = t.encode(std::string(200000, 'a'));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  size_t chars = 0;
  for (int32_t id : ids) chars += t.id_to_token(id).size();
  EXPECT_EQ(chars, 200000u);
  EXPECT_EQ(ids.front(), 10);  // the 1024-character token
  EXPECT_LT(seconds, 2.0);
}

TEST(Bpe, RepeatedWordsUseTheCacheConsistently) {
  const Tokenizer t = load(tiny_bpe({"a", "b", "ab"}, {"a b"}));
  const Ids first = t.encode("abab");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.encode("abab"), first);
}

}  // namespace
}  // namespace tandem::test
