// Added tokens: leftmost-longest matching and the lstrip/rstrip/single_word/normalized options,
// on a byte-level vocabulary (id == byte value), following HF's own examples.
#include "test_util.h"

namespace tandem::test {
namespace {

using Ids = std::vector<int32_t>;
constexpr int kTok = 256;  // the id of the first token added in each test

Tokenizer with_added(std::vector<json> tokens, json normalizer = nullptr) {
  json j = byte_level();
  for (json& t : tokens) j["added_tokens"].push_back(std::move(t));
  j["normalizer"] = std::move(normalizer);
  return load(j);
}

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(AddedTokens, LstripSwallowsWhitespaceOnTheLeft) {
  const Tokenizer t = with_added({added_token("<m>", kTok, {{"lstrip", true}})});
  EXPECT_EQ(t.encode("a \t <m>b"), Ids({'a', kTok, 'b'}));
  EXPECT_EQ(t.encode("<m> <m>"), Ids({kTok, kTok}));
  EXPECT_EQ(t.encode("a<m> "), Ids({'a', kTok, ' '}));
}

TEST(AddedTokens, RstripSwallowsWhitespaceOnTheRight) {
  const Tokenizer t = with_added({added_token("<r>", kTok, {{"rstrip", true}})});
  EXPECT_EQ(t.encode("<r>  \nb"), Ids({kTok, 'b'}));
  EXPECT_EQ(t.encode("a <r>"), Ids({'a', ' ', kTok}));
  EXPECT_EQ(t.encode("<r>\xE3\x80\x80x"), Ids({kTok, 'x'}));  // U+3000 is whitespace too
}

TEST(AddedTokens, SingleWordMatchesOnlyWholeWords) {
  const Tokenizer t = with_added({added_token("<mask>", kTok, {{"single_word", true}})});
  const std::string text = "<mask> My name <mask> A<mask> <mask>ony <mask>";
  const Ids ids = t.encode(text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), kTok), 3);
  EXPECT_EQ(ids.front(), kTok);
  EXPECT_EQ(ids.back(), kTok);
  EXPECT_EQ(t.decode(ids), text);
  // Punctuation does not make a word; a combining mark does (Unicode \w).
  const Ids marks = t.encode("<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>");
  EXPECT_EQ(std::count(marks.begin(), marks.end(), kTok), 2);
}

TEST(AddedTokens, AllOptionsWithUnicodeSpaces) {
  const Tokenizer t = with_added(
      {added_token("<mask>", kTok, {{"lstrip", true}, {"rstrip", true}, {"single_word", true}})});
  // HF: "Hi", " <mask> ", "there", "\t<mask>\t", "<mask>\u2000"
  EXPECT_EQ(t.encode("Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80"),
            concat({byte_ids("Hi"), {kTok}, byte_ids("there"), {kTok, kTok}}));
}

TEST(AddedTokens, LongestMatchWins) {
  const Tokenizer t = with_added({added_token("<a>", kTok), added_token("<a><b>", kTok + 1)});
  EXPECT_EQ(t.encode("x<a><b>y"), Ids({'x', kTok + 1, 'y'}));
  EXPECT_EQ(t.encode("<a><c>"), concat({{kTok}, byte_ids("<c>")}));
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  const json lowercase = {{"type", "Lowercase"}};
  const Tokenizer normalized =
      with_added({added_token("Hello", kTok, {{"normalized", true}})}, lowercase);
  EXPECT_EQ(normalized.encode("say HELLO"), concat({byte_ids("say "), {kTok}}));
  const Tokenizer raw = with_added({added_token("Hello", kTok)}, lowercase);
  EXPECT_EQ(raw.encode("say HELLO"), byte_ids("say hello"));
  EXPECT_EQ(raw.encode("say Hello"), concat({byte_ids("say "), {kTok}}));
}

TEST(AddedTokens, LookupAndSpecialFlags) {
  const Tokenizer t =
      with_added({added_token("<s>", kTok, {{"special", true}}), added_token("<plain>", kTok + 1)});
  EXPECT_EQ(t.token_to_id("<s>"), kTok);
  EXPECT_EQ(t.id_to_token(kTok + 1), "<plain>");
  EXPECT_TRUE(t.is_special(kTok));
  EXPECT_FALSE(t.is_special(kTok + 1));
  EXPECT_EQ(t.vocab_size(), kTok + 2);
  EXPECT_EQ(t.decode({kTok, 'a', kTok + 1}, /*skip_special_tokens=*/true), "a<plain>");
}

TEST(AddedTokens, IdsFollowHuggingFaceNotTheFile) {
  // HF tokenizers 0.23.2 gives this file's tokens the ids 4, 2, 5: a content in the vocab takes
  // the vocab id, others count up from the number of vocab entries; the "id" fields only warn.
  json j = tiny_bpe({"a", "b", "ab"}, {"a b"});
  j["model"]["vocab"]["zz"] = 10;
  j["added_tokens"] = {added_token("<x>", 999, {{"special", true}}),
                       added_token("ab", 5, {{"special", true}}), added_token("<y>", 3)};
  const Tokenizer t = load(j);
  EXPECT_EQ(t.token_to_id("<x>"), 4);
  EXPECT_EQ(t.token_to_id("ab"), 2);
  EXPECT_EQ(t.token_to_id("<y>"), 5);
  EXPECT_EQ(t.encode("<x>ab<y>"), Ids({4, 2, 5}));
  EXPECT_TRUE(t.is_special(2));
  EXPECT_EQ(t.vocab_size(), 11);  // max id + 1: "zz" is 10
}

}  // namespace
}  // namespace tandem::test
