// make_byte_level_tokenizer_json: any bytes survive encode -> token_bytes/decode unchanged.
#include <random>

#include "test_util.h"
#include "tokenizer/utf8.h"

namespace tandem::test {
namespace {

TEST(ByteLevelTokenizer, LayoutFollowsGpt2ByteOrder) {
  const Tokenizer t = load(byte_level({"<|endoftext|>", "<|user|>"}));
  EXPECT_EQ(t.vocab_size(), 258);
  EXPECT_EQ(t.token_to_id("!"), 33);
  EXPECT_EQ(t.token_to_id("\xC4\x80"), 0);     // U+0100 stands for byte 0
  EXPECT_EQ(t.id_to_token(' '), "\xC4\xA0");   // 'Ġ'
  EXPECT_EQ(t.id_to_token('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(t.token_to_id("<|user|>"), 257);
  EXPECT_EQ(t.id_to_token(256), "<|endoftext|>");
  EXPECT_TRUE(t.is_special(256));
  EXPECT_FALSE(t.is_special(65));
}

TEST(ByteLevelTokenizer, ArbitraryBytesRoundTrip) {
  const Tokenizer t = load(byte_level({"<|endoftext|>"}));
  std::mt19937 rng(7);
  std::vector<std::string> inputs;
  for (int b = 0; b < 256; ++b) inputs.emplace_back(1, static_cast<char>(b));
  for (int n = 0; n < 400; ++n) {
    std::string s(rng() % 300, '\0');
    for (char& c : s) c = static_cast<char>(rng() & 0xFF);
    inputs.push_back(s);
  }
  for (const std::string& s : inputs) {
    // No merges: every byte is its own token, and its id is the byte value.
    const std::vector<int32_t> ids = t.encode(s);
    ASSERT_EQ(ids, byte_ids(s));
    std::string bytes;
    for (int32_t id : ids) bytes += t.token_bytes(id);
    EXPECT_EQ(bytes, s);
    EXPECT_EQ(t.decode(ids), tok::to_valid_utf8(s));
  }
}

TEST(ByteLevelTokenizer, ValidUtf8RoundTripsThroughDecode) {
  const Tokenizer t = load(byte_level());
  std::mt19937 rng(11);
  const char32_t ranges[][2] = {{0x00, 0x7F},       {0x80, 0x7FF},      {0x300, 0x36F},
                                {0x2000, 0x206F},   {0x4E00, 0x9FFF},   {0xE000, 0xFFFF},
                                {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
  for (int n = 0; n < 300; ++n) {
    std::string s;
    for (int k = rng() % 60; k > 0; --k) {
      const auto& r = ranges[rng() % std::size(ranges)];
      const char32_t cp = r[0] + rng() % (r[1] - r[0] + 1);
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      tok::append_utf8(s, cp);
    }
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
}

TEST(ByteLevelTokenizer, SpecialTokensAreSplitOut) {
  const Tokenizer t = load(byte_level({"<|endoftext|>", "<|user|>"}));
  EXPECT_EQ(t.encode("a<|user|>b"), (std::vector<int32_t>{'a', 257, 'b'}));
  EXPECT_EQ(t.encode("<|endoftext|><|endoftext|>"), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(t.encode("<|user"), byte_ids("<|user"));
  const std::vector<int32_t> ids = t.encode("hi<|endoftext|>");
  EXPECT_EQ(t.decode(ids), "hi<|endoftext|>");
  EXPECT_EQ(t.decode(ids, /*skip_special_tokens=*/true), "hi");
  EXPECT_EQ(t.token_bytes(256), "<|endoftext|>");
}

TEST(ByteLevelTokenizer, PartialUtf8DecodesLikeRustLossy) {
  const Tokenizer t = load(byte_level());
  EXPECT_EQ(t.token_bytes(0xC3), "\xC3");
  EXPECT_EQ(t.decode({0xC3, 0xA9}), "\xC3\xA9");
  EXPECT_EQ(t.decode({0xC3}), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({0xC3, 'A'}),
            "\xEF\xBF\xBD"
            "A");
  // A truncated 4-byte sequence is one U+FFFD; a surrogate's bytes are three.
  EXPECT_EQ(t.decode({0xF0, 0x9F, 0x98}), "\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({0xED, 0xA0, 0x80}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(t.decode({0xFF, 'x'}), "\xEF\xBF\xBDx");
}

TEST(ByteLevelTokenizer, RejectsBadSpecialTokens) {
  expect_error([] { make_byte_level_tokenizer_json({"<a>", "<a>"}); }, {"'<a>'", "twice"});
  expect_error([] { make_byte_level_tokenizer_json({""}); }, {"empty"});
}

}  // namespace
}  // namespace tandem::test
