// The server's side of constrained decoding: request specs to grammars (property order kept,
// reasoning before the answer), the grammar cache, refusals as 400s naming the field and the
// keyword, and the matcher as the engine's TokenConstraint over a byte-level vocabulary.
#include "server/grammar_constraint.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {
namespace {

// 256 byte tokens (ids 0..255 in GPT-2's byte order) and "</think>" as special token 256.
const Tokenizer& byte_tokenizer() {
  static const Tokenizer t =
      Tokenizer::from_json(make_byte_level_tokenizer_json({"</think>", "<|endoftext|>"}));
  return t;
}

// Feeds text byte by byte (each byte's token) into a fresh constraint; false at the first byte
// the grammar refuses.
bool accepts_text(GrammarConstraint& c, const std::string& text) {
  const Tokenizer& t = byte_tokenizer();
  for (unsigned char ch : text) {
    int32_t id = -1;
    for (int32_t v = 0; v < 256; ++v)
      if (t.token_bytes(v) == std::string(1, static_cast<char>(ch))) id = v;
    if (id < 0 || !c.accept(id)) return false;
  }
  return true;
}

ConstraintSpec spec(ConstraintSpec::Kind k, std::string source, bool after_reasoning = false) {
  ConstraintSpec s;
  s.kind = k;
  s.source = std::move(source);
  s.param = "response_format";
  s.after_reasoning = after_reasoning;
  return s;
}

TEST(GrammarConstraint, JsonSchemaKeepsThePropertyOrder) {
  GrammarCache cache(byte_tokenizer());
  const auto g = cache.get(spec(ConstraintSpec::Kind::kJsonSchema,
                                R"({"type":"object","properties":{"zeta":{"type":"integer"},)"
                                R"("alpha":{"type":"boolean"}},"required":["zeta","alpha"]})"));
  GrammarConstraint ok(g), wrong(g);
  EXPECT_TRUE(accepts_text(ok, R"({"zeta": 3, "alpha": true})"));
  EXPECT_TRUE(ok.can_terminate());
  EXPECT_TRUE(ok.is_terminated());
  EXPECT_FALSE(accepts_text(wrong, R"({"alpha")"));
}

TEST(GrammarConstraint, ReasoningComesBeforeTheAnswer) {
  GrammarCache cache(byte_tokenizer());
  const auto g = cache.get(spec(ConstraintSpec::Kind::kRegex, "(yes|no)", true));
  {
    GrammarConstraint c(g);
    // '<' and partial markers are fine inside the reasoning; the answer follows the marker.
    EXPECT_TRUE(accepts_text(c, "a < b, </thin and <</th> too\n</think>\nyes"));
    EXPECT_TRUE(c.can_terminate());
  }
  {
    GrammarConstraint c(g);
    EXPECT_TRUE(accepts_text(c, "short</think>"));
    EXPECT_FALSE(c.can_terminate());
    EXPECT_FALSE(accepts_text(c, "</think>"));  // the answer must follow, not another marker
  }
  {
    // The special token </think> closes the reasoning as its text does.
    GrammarConstraint c(g);
    EXPECT_TRUE(accepts_text(c, "hmm"));
    EXPECT_TRUE(c.accept(*byte_tokenizer().token_to_id("</think>")));
    EXPECT_TRUE(accepts_text(c, "no"));
    EXPECT_TRUE(c.is_terminated());
  }
  {
    // Without reasoning the answer starts at once.
    GrammarConstraint c(cache.get(spec(ConstraintSpec::Kind::kRegex, "(yes|no)")));
    EXPECT_FALSE(accepts_text(c, "hmm"));
  }
  // json_object after reasoning: any object.
  GrammarConstraint o(cache.get(spec(ConstraintSpec::Kind::kJsonObject, "", true)));
  EXPECT_TRUE(accepts_text(o, R"(ok</think>{"k": [1, {"x": null}]})"));
  EXPECT_TRUE(o.can_terminate());
}

TEST(GrammarConstraint, RefusalsNameTheFieldAndTheKeyword) {
  GrammarCache cache(byte_tokenizer());
  try {
    cache.get(spec(ConstraintSpec::Kind::kJsonSchema,
                   R"({"type":"object","patternProperties":{"^a":{}}})"));
    FAIL() << "patternProperties was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "response_format");
    EXPECT_NE(std::string(e.what()).find("patternProperties"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cache.get(spec(ConstraintSpec::Kind::kRegex, "(?=a)b")), ApiError);
  EXPECT_THROW(cache.get(spec(ConstraintSpec::Kind::kEbnf, "root ::= missing")), ApiError);
  EXPECT_THROW(cache.get(spec(ConstraintSpec::Kind::kJsonSchema, "{not json")), ApiError);
  // A grammar too large to compile for a request (a node per repeat) is refused, not compiled.
  try {
    cache.get(spec(ConstraintSpec::Kind::kRegex, "(a[bc]{1000}){30}"));
    FAIL() << "a 30,000-node grammar was compiled";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("too large"), std::string::npos) << e.what();
  }
}

TEST(GrammarConstraint, CacheReturnsTheSameGrammarAndEvictsTheOldest) {
  GrammarCache cache(byte_tokenizer(), 2);
  const auto a = cache.get(spec(ConstraintSpec::Kind::kRegex, "a+"));
  EXPECT_EQ(cache.get(spec(ConstraintSpec::Kind::kRegex, "a+")).grammar, a.grammar);
  cache.get(spec(ConstraintSpec::Kind::kRegex, "b+"));
  cache.get(spec(ConstraintSpec::Kind::kRegex, "c+"));  // evicts a+
  EXPECT_NE(cache.get(spec(ConstraintSpec::Kind::kRegex, "a+")).grammar, a.grammar);
  EXPECT_EQ(*a.ebnf, "root ::= \"a\"+\n");
}

// The model's vocabulary may be padded past the tokenizer's: those ids are never allowed, and
// the replica spec is the EBNF another rank compiles.
TEST(GrammarConstraint, MaskCoversThePaddedVocabulary) {
  GrammarCache cache(byte_tokenizer());
  const auto g = cache.get(spec(ConstraintSpec::Kind::kRegex, "[a-c]x"));
  GrammarConstraint c(g);
  const int64_t V = 300;  // tokenizer: 258 tokens
  std::vector<uint32_t> bits((V + 31) / 32, 0);
  c.fill_mask(bits.data(), V);
  int allowed = 0;
  for (int64_t v = 0; v < V; ++v) {
    const bool on = (bits[v / 32] >> (v % 32)) & 1u;
    if (v >= 258) {
      EXPECT_FALSE(on) << v;
    }
    if (on) {
      ++allowed;
      const std::string b = byte_tokenizer().token_bytes(static_cast<int32_t>(v));
      EXPECT_TRUE(b == "a" || b == "b" || b == "c") << b;
    }
  }
  EXPECT_EQ(allowed, 3);
  EXPECT_EQ(c.replica_spec(), *g.ebnf);
  const auto copy = follower_constraint_factory(byte_tokenizer())(c.replica_spec());
  std::vector<uint32_t> bits2((V + 31) / 32, 0);
  copy->fill_mask(bits2.data(), V);
  EXPECT_EQ(bits2, bits);
}

}  // namespace
}  // namespace tandem::server
