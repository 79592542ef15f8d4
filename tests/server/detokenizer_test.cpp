// Incremental detokenization: deltas are always whole UTF-8 characters, and their concatenation
// is exactly Tokenizer::decode of the same ids, for tokens that split characters, invalid bytes,
// and special tokens.
#include <gtest/gtest.h>

#include <random>

#include "server/detokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem::server {
namespace {

Tokenizer byte_tokenizer() {
  return Tokenizer::from_json(
      make_byte_level_tokenizer_json({"<|endoftext|>", "<think>", "</think>"}));
}

std::string source_path(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/" + rel;
}

// Feeds ids one at a time; checks every delta is valid UTF-8 and returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip,
                   std::unordered_set<int32_t> keep = {}) {
  IncrementalDetokenizer d(tok, skip, std::move(keep));
  std::string all;
  for (int32_t id : ids) {
    const std::string delta = d.push(id);
    EXPECT_TRUE(tok::is_valid_utf8(delta)) << "delta after id " << id;
    all += delta;
  }
  const std::string tail = d.flush();
  EXPECT_TRUE(tok::is_valid_utf8(tail));
  return all + tail;
}

TEST(Utf8StablePrefix, HoldsOnlyTruncatedValidSequences) {
  EXPECT_EQ(utf8_stable_prefix("abc"), 3u);
  EXPECT_EQ(utf8_stable_prefix("ab\xC3"), 2u);            // é's lead byte alone
  EXPECT_EQ(utf8_stable_prefix("ab\xE4\xBD"), 2u);        // 2 of 3 bytes of 你
  EXPECT_EQ(utf8_stable_prefix("\xF0\x9F\x8E"), 0u);      // 3 of 4 bytes of 🎉
  EXPECT_EQ(utf8_stable_prefix("\xF0\x9F\x8E\x89"), 4u);  // complete
  EXPECT_EQ(utf8_stable_prefix("a\x80"), 2u);             // stray continuation: final
  EXPECT_EQ(utf8_stable_prefix("a\xFF"), 2u);             // never valid: final
  EXPECT_EQ(utf8_stable_prefix("\xE4\xBDx"), 3u);         // broken by 'x': final
  EXPECT_EQ(utf8_stable_prefix("\xE0\x80"), 2u);          // overlong prefix: final
  EXPECT_EQ(utf8_stable_prefix("\xED\xA0"), 2u);          // surrogate prefix: final
  EXPECT_EQ(utf8_stable_prefix(""), 0u);
}

TEST(Detokenizer, MultiByteTextSplitAcrossByteTokens) {
  const Tokenizer tok = byte_tokenizer();
  const std::string text = "héllo 你好, wörld 🎉!";
  const std::vector<int32_t> ids = tok.encode(text);
  ASSERT_EQ(ids.size(), text.size());  // one token per byte: every character is split
  IncrementalDetokenizer d(tok, true);
  std::vector<std::string> deltas;
  for (int32_t id : ids) deltas.push_back(d.push(id));
  EXPECT_EQ(d.flush(), "");
  std::string joined;
  for (const auto& s : deltas) joined += s;
  EXPECT_EQ(joined, text);
  // "你" is 3 bytes: the first two pushes of it give nothing, the third gives the character.
  const size_t at = text.find("你");
  EXPECT_EQ(deltas[at], "");
  EXPECT_EQ(deltas[at + 1], "");
  EXPECT_EQ(deltas[at + 2], "你");
}

TEST(Detokenizer, TruncatedCharacterAtEndBecomesReplacement) {
  const Tokenizer tok = byte_tokenizer();
  std::vector<int32_t> ids = tok.encode("ok \xE4\xBD\xA0");
  ids.pop_back();  // drop the last byte of 你
  EXPECT_EQ(stream(tok, ids, true), "ok \xEF\xBF\xBD");
  EXPECT_EQ(stream(tok, ids, true), tok.decode(ids, true));
}

TEST(Detokenizer, SpecialTokensSkippedOrKept) {
  const Tokenizer tok = byte_tokenizer();
  const int32_t eot = *tok.token_to_id("<|endoftext|>");
  const int32_t think = *tok.token_to_id("<think>");
  std::vector<int32_t> ids = tok.encode("a");
  ids.push_back(think);
  ids.push_back(eot);
  const std::vector<int32_t> b = tok.encode("b");
  ids.insert(ids.end(), b.begin(), b.end());
  EXPECT_EQ(stream(tok, ids, true), "ab");
  EXPECT_EQ(stream(tok, ids, false), "a<think><|endoftext|>b");
  EXPECT_EQ(stream(tok, ids, true, {think}), "a<think>b");
}

TEST(Detokenizer, SpecialTokenInsideASplitCharacter) {
  // decode drops skipped specials before joining bytes, so the character reassembles.
  const Tokenizer tok = byte_tokenizer();
  std::vector<int32_t> ids = tok.encode("\xE4\xBD\xA0");
  ids.insert(ids.begin() + 1, *tok.token_to_id("<|endoftext|>"));
  EXPECT_EQ(stream(tok, ids, true), tok.decode(ids, true));
  EXPECT_EQ(stream(tok, ids, false), tok.decode(ids, false));
}

TEST(Detokenizer, RandomIdsMatchDecode) {
  // Random byte tokens make every kind of broken sequence; the stream must still agree with
  // decode's U+FFFD repair byte for byte.
  const Tokenizer tok = byte_tokenizer();
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> ids(rng() % 24);
    for (int32_t& id : ids) {
      // Mostly high bytes (lead and continuation bytes), some ASCII and specials.
      const uint32_t r = rng() % 10;
      id = r < 7 ? static_cast<int32_t>(
                       tok.encode(std::string(1, static_cast<char>(0x80 + rng() % 0x80)))[0])
           : r < 9 ? static_cast<int32_t>(rng() % 256)
                   : 256 + static_cast<int32_t>(rng() % 3);
    }
    for (bool skip : {true, false})
      ASSERT_EQ(stream(tok, ids, skip), tok.decode(ids, skip)) << "trial " << trial;
  }
}

TEST(Detokenizer, RealTokenizerRandomIdsMatchDecode) {
  const Tokenizer tok = Tokenizer::from_file(source_path("models/tandem-austen/tokenizer.json"));
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> ids(1 + rng() % 40);
    for (int32_t& id : ids) id = static_cast<int32_t>(rng() % tok.vocab_size());
    ASSERT_EQ(stream(tok, ids, true), tok.decode(ids, true)) << "trial " << trial;
  }
  const std::string text = "“Café,” said Mr. Darcy — naïvely — 你好 🎉.";
  EXPECT_EQ(stream(tok, tok.encode(text), true), text);
}

}  // namespace
}  // namespace tandem::server
