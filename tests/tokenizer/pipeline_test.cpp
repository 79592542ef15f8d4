// The stages around the model: split behaviors, Oniguruma-compatible regexes, normalizers,
// the template post-processor, edge inputs, and concurrent use.
#include <random>
#include <thread>

#include "test_util.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_catchup.h"

namespace tandem::test {
namespace {

using Ids = std::vector<int32_t>;

std::vector<std::string> split(const std::string& text, tok::SplitBehavior behavior,
                               bool invert = false) {
  const tok::Pattern dash(std::make_shared<const tok::Regex>("-", true));
  std::vector<std::string> out;
  for (const tok::Span& s : tok::split_by(dash, text, behavior, invert)) {
    out.push_back(text.substr(s.start, s.end - s.start));
  }
  return out;
}

TEST(SplitBehavior, MatchesHuggingFaceDocs) {
  using B = tok::SplitBehavior;
  using V = std::vector<std::string>;
  const std::string text = "the-final--countdown";
  EXPECT_EQ(split(text, B::kRemoved), V({"the", "final", "countdown"}));
  EXPECT_EQ(split(text, B::kIsolated), V({"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(text, B::kMergedWithPrevious), V({"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(text, B::kMergedWithNext), V({"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(text, B::kContiguous), V({"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(text, B::kRemoved, /*invert=*/true), V({"-", "-", "-"}));
}

TEST(OnigRegex, WhitespaceAndHexClassesFollowOniguruma) {
  EXPECT_EQ(tok::onig_to_pcre2("a\\sb"), "a[" +
                                             std::string("\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}"
                                                         "\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
                                                         "\\x{202F}\\x{205F}\\x{3000}") +
                                             "]b");
  EXPECT_EQ(tok::onig_to_pcre2("[^\\h]\\\\s"), "[^0-9a-fA-F]\\\\s");
  auto matches = [](const std::string& pattern, const std::string& text) {
    std::vector<tok::Span> out;
    tok::Regex(pattern, false).find_all(text, out);
    return out.size();
  };
  EXPECT_EQ(matches("\\s", "\xE1\xA0\x8E"), 0u);  // U+180E: a space to PCRE2, not to Oniguruma
  EXPECT_EQ(matches("\\s", "\xE3\x80\x80"), 1u);  // U+3000
  EXPECT_EQ(matches("[^\\s\\p{L}]", "\xE1\xA0\x8E"), 1u);
  EXPECT_EQ(matches("\\h+", "xBeef"), 1u);
  EXPECT_EQ(matches("(?i:'s)", "'S'\xC5\xBF"), 2u);  // 'ſ' folds to 's' in both engines
}

TEST(UnicodeCatchup, TablesAreSortedAndAnswerLookups) {
  const auto& cats = tok::unicode_catchup_ranges();
  for (size_t i = 0; i < cats.size(); ++i) {
    EXPECT_LE(cats[i].first, cats[i].last);
    if (i > 0) {
      EXPECT_LT(cats[i - 1].last, cats[i].first);
    }
  }
  const auto& lower = tok::unicode_catchup_lowercase();
  for (size_t i = 1; i < lower.size(); ++i) EXPECT_LT(lower[i - 1].first, lower[i].first);
  const auto& opaque = tok::normalization_opaque_ranges();
  for (size_t i = 1; i < opaque.size(); ++i) EXPECT_LT(opaque[i - 1].second, opaque[i].first);

  EXPECT_STREQ(tok::catchup_category(0x1FA77), "So");  // pink heart, Unicode 15.0
  EXPECT_STREQ(tok::catchup_category(0x31350), "Lo");  // CJK Extension H
  EXPECT_EQ(tok::catchup_category('a'), nullptr);
  EXPECT_EQ(tok::catchup_lowercase(0x1C89), 0x1C8Au);
  EXPECT_EQ(tok::catchup_lowercase('A'), static_cast<char32_t>('A'));  // utf8proc's job
  EXPECT_TRUE(tok::is_normalization_opaque(0x32FF));                   // U+32FF, Unicode 12.1
  EXPECT_FALSE(tok::is_normalization_opaque(0x00E9));
  // \p{L} gains the new letters; PCRE2 alone would not match U+31350.
  auto matches = [](const std::string& pattern, const std::string& text) {
    std::vector<tok::Span> out;
    tok::Regex(pattern, false).find_all(text, out);
    return out.size();
  };
  EXPECT_EQ(matches("\\p{L}", "\xF0\xB1\x8D\x90"), 1u);
  EXPECT_EQ(matches("[^\\p{L}]", "\xF0\xB1\x8D\x90"), 0u);
  EXPECT_EQ(matches("\\P{L}", "\xF0\xB1\x8D\x90"), 0u);
}

TEST(OnigRegex, EmptyMatchesAdvanceLikeOnigFindIter) {
  std::vector<tok::Span> out;
  tok::Regex("\\d*", false).find_all("ab12c", out);
  std::vector<std::pair<size_t, size_t>> got;
  for (const tok::Span& s : out) got.emplace_back(s.start, s.end);
  EXPECT_EQ(got, (std::vector<std::pair<size_t, size_t>>{{0, 0}, {1, 1}, {2, 4}, {5, 5}}));
}

TEST(Normalizers, NfcMakesComposedAndDecomposedFormsEqual) {
  json j = byte_level();
  j["normalizer"] = {{"type", "NFC"}};
  const Tokenizer t = load(j);
  EXPECT_EQ(t.encode("e\xCC\x81"), t.encode("\xC3\xA9"));
  EXPECT_EQ(t.encode("e\xCC\x81"), byte_ids("\xC3\xA9"));
  EXPECT_EQ(t.encode("bad \xFF byte"), byte_ids("bad \xFF byte"));  // invalid bytes pass through
}

TEST(Normalizers, SequenceOfLowercasePrependReplace) {
  json j = byte_level();
  j["normalizer"] = {{"type", "Sequence"},
                     {"normalizers",
                      {{{"type", "Lowercase"}},
                       {{"type", "Replace"}, {"pattern", {{"String", "  "}}}, {"content", " "}},
                       {{"type", "Prepend"}, {"prepend", ">"}}}}};
  EXPECT_EQ(load(j).encode("A  B\xC4\xB0"), byte_ids(">a bi\xCC\x87"));  // İ -> i + U+0307
}

TEST(PostProcessor, TemplateAddsSpecialTokensOnlyWhenAsked) {
  json j = byte_level({"<bos>", "<eos>"});
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}},
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}},
           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
           {{"SpecialToken", {{"id", "<eos>"}, {"type_id", 0}}}}}},
         {"pair", json::array()},
         {"special_tokens",
          {{"<bos>", {{"id", "<bos>"}, {"ids", {256}}, {"tokens", {"<bos>"}}}},
           {"<eos>", {{"id", "<eos>"}, {"ids", {257}}, {"tokens", {"<eos>"}}}}}}}}}};
  const Tokenizer t = load(j);
  EXPECT_EQ(t.encode("hi", true), Ids({256, 'h', 'i', 257}));
  EXPECT_EQ(t.encode("hi"), Ids({'h', 'i'}));
  EXPECT_EQ(t.encode("", true), Ids({256, 257}));
}

TEST(PostProcessor, BertAndRobertaWrapTheSequence) {
  json j = tiny_bpe({"a", "[CLS]", "[SEP]"}, json::array());
  j["post_processor"] = {{"type", "BertProcessing"},
                         {"sep", json::array({"[SEP]", 2})},
                         {"cls", json::array({"[CLS]", 1})}};
  EXPECT_EQ(load(j).encode("aa", true), Ids({1, 0, 0, 2}));
  j["post_processor"]["type"] = "RobertaProcessing";
  EXPECT_EQ(load(j).encode("a", true), Ids({1, 0, 2}));
  EXPECT_EQ(load(j).encode("a", false), Ids({0}));
}

TEST(Decoder, ReplaceAndFusePerToken) {
  json j = tiny_bpe({"\xE2\x96\x81hi", "\xE2\x96\x81there"}, json::array());
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
        {{"type", "Fuse"}}}}};
  const Tokenizer t = load(j);
  EXPECT_EQ(t.decode({0, 1}), " hi there");
  EXPECT_EQ(t.token_bytes(1), " there");
}

TEST(Tokenizer, EdgeInputsAndUnknownIds) {
  const Tokenizer t = load(byte_level({"<s>"}));
  EXPECT_TRUE(t.encode("").empty());
  EXPECT_EQ(t.decode({}), "");
  EXPECT_EQ(t.decode({'a', -1, 100000, 'b'}), "ab");  // ids no token has are skipped, as HF
  EXPECT_EQ(t.token_bytes(-1), "");
  EXPECT_EQ(t.id_to_token(100000), "");
  EXPECT_FALSE(t.token_to_id("no such token").has_value());
  EXPECT_FALSE(t.is_special(-5));
}

TEST(Tokenizer, NoDecoderJoinsTokensWithSpaces) {
  const Tokenizer t = load(tiny_bpe({"a", "b", "ab"}, {"a b"}));
  EXPECT_EQ(t.decode({2, 0}), "ab a");
}

TEST(Tokenizer, ConcurrentEncodeAndDecodeAgreeWithSerial) {
  // A pipeline with every shared piece: regex split, byte-level mapping, merges, cache, specials.
  json j = byte_level();
  j["model"]["merges"] = {"Ġ t", "h e", "Ġt he", "i n", "Ġ a"};
  for (const char* t : {"Ġt", "he", "Ġthe", "in", "Ġa"}) {
    j["model"]["vocab"][t] = j["model"]["vocab"].size();  // 256, 257, ...
  }
  j["added_tokens"].push_back(added_token("<|endoftext|>", 261, {{"special", true}}));
  const Tokenizer t = load(j);
  std::mt19937 rng(3);
  const std::vector<std::string> words = {
      "the", " the", " in", " a", "<|endoftext|>", " x", "\n", " \xC3\xA9t\xC3\xA9", " 123", "  "};
  std::vector<std::string> texts(200);
  for (std::string& s : texts) {
    for (int k = rng() % 40; k > 0; --k) s += words[rng() % words.size()];
  }
  std::vector<Ids> serial;
  for (const std::string& s : texts) serial.push_back(t.encode(s));

  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const Ids ids = t.encode(texts[i]);
          mismatches[w] += ids != serial[i] || t.decode(ids) != texts[i];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace tandem::test
