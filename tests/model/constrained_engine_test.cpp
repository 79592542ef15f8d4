// Constrained decoding in the engine, with a token-level automaton standing in for a grammar
// (the grammar engine has its own tests in tests/grammar; here only the runtime's side counts):
// every committed token is one the constraint allowed; plain constrained greedy equals a
// reference loop that masks the generator's logits by hand; MTP (S = 1, 3, 5) commits exactly
// the tokens of plain constrained greedy; sampled constrained tokens follow the exact masked
// distribution, with and without speculation; stop tokens only where the constraint may end.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine_test_util.h"
#include "runtime/generator.h"
#include "table_constraint.h"

namespace tandem::test {
namespace {

constexpr int64_t kMaxLen = 24;

std::vector<Request> constrained(std::vector<Request> reqs, int percent) {
  for (size_t i = 0; i < reqs.size(); ++i)
    reqs[i].constraint = std::make_shared<TableConstraint>(mix(i + 7), percent, 4, kMaxLen);
  return reqs;
}

void expect_allowed(const Request& r, const Result& got) {
  TableConstraint replay(*static_cast<const TableConstraint*>(r.constraint.get()));
  replay.rollback(static_cast<int64_t>(replay.history().size()));
  for (size_t j = 0; j < got.tokens.size(); ++j)
    ASSERT_TRUE(replay.accept(got.tokens[j]))
        << "token " << j << " (" << got.tokens[j] << ") is not allowed by the constraint";
}

// logits[t] = -inf for every token t the constraint does not allow next (the engine's masking,
// done independently on the host).
void mask_by_hand(TableConstraint& c, std::vector<float>& logits) {
  const int64_t V = static_cast<int64_t>(logits.size());
  std::vector<uint32_t> bits(static_cast<size_t>((V + 31) / 32), 0);
  c.fill_mask(bits.data(), V);
  for (int64_t t = 0; t < V; ++t)
    if (!((bits[t >> 5] >> (t & 31)) & 1u)) logits[t] = -std::numeric_limits<float>::infinity();
}

// The reference: the plain generator's logits, masked by hand, argmax, one token at a time.
std::vector<int32_t> reference_greedy(const Model& model, const Request& r, int percent,
                                      uint64_t salt) {
  TableConstraint c(salt, percent, 4, kMaxLen);
  Generator g(model, 512, 16);
  std::vector<int32_t> ctx = r.prompt, out;
  while (static_cast<int64_t>(out.size()) < r.max_new_tokens && !c.is_terminated()) {
    GenerateRequest gr;
    gr.prompt = ctx;
    gr.max_new_tokens = 1;
    std::vector<float> l = g.generate(gr).logits[0];
    mask_by_hand(c, l);
    const int32_t tok = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_TRUE(c.accept(tok));
    out.push_back(tok);
    ctx.push_back(tok);
  }
  return out;
}

TEST(Constrained, PlainGreedyEqualsMaskedReference) {
  auto model = load_model("models/tandem-austen");
  auto reqs = constrained(prompts(model->config(), 3, 10, 40, 30, 11), 30);
  EngineOptions o;
  Engine e(model, o);
  const auto got = run_all(e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_allowed(reqs[i], got[i]);
    EXPECT_EQ(got[i].tokens, reference_greedy(*model, reqs[i], 30, mix(i + 7))) << "request " << i;
    // No stop tokens: the request ends where the constraint is terminated.
    EXPECT_EQ(got[i].tokens.size(), static_cast<size_t>(kMaxLen));
    EXPECT_EQ(got[i].reason, FinishReason::kStop);
  }
}

class ConstrainedSpec : public ::testing::TestWithParam<int> {};

// Speculation is lossless under a constraint: MTP with S drafts commits exactly plain
// constrained greedy's tokens, over a batch that mixes constrained and free requests, with
// static padded batches (the CUDA-graph shapes) as on GPUs.
TEST_P(ConstrainedSpec, GreedyIdenticalToPlainConstrained) {
  const int steps = GetParam();
  auto model = load_model("models/tandem-austen");
  auto reqs = constrained(prompts(model->config(), 4, 40, 100, 30, 200 + steps), 40);
  reqs[1].constraint = nullptr;  // one free request in the batch
  auto run = [&](bool spec) {
    EngineOptions o;
    o.max_running_requests = 8;
    o.static_batches = true;
    if (spec) {
      o.spec.algorithm = "EAGLE";
      o.spec.num_steps = steps;
      o.spec.num_draft_tokens = steps + 1;
    }
    // Fresh constraints per run: each follows its own request's tokens.
    auto rs = reqs;
    for (size_t i = 0; i < rs.size(); ++i)
      if (rs[i].constraint)
        rs[i].constraint = std::make_shared<TableConstraint>(mix(i + 7), 40, 4, kMaxLen);
    Engine e(model, o);
    auto out = run_all(e, rs);
    for (size_t i = 0; i < rs.size(); ++i)
      if (rs[i].constraint) expect_allowed(rs[i], out[i]);
    if (spec) {
      std::printf("  S=%d: accept length %.3f\n", steps, e.metrics().avg_spec_accept_length());
      EXPECT_GT(e.metrics().spec_verify_steps, 0u);
    }
    return out;
  };
  const auto plain = run(false), spec = run(true);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(plain[i].tokens, spec[i].tokens) << "request " << i << " S=" << steps;
    EXPECT_EQ(plain[i].reason, spec[i].reason) << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Steps, ConstrainedSpec, ::testing::Values(1, 3, 5));

// A stop token is masked until the constraint may end: it never appears in the first 4 tokens,
// and a request whose constraint allows it ends on it.
TEST(Constrained, StopTokensOnlyWhereTheConstraintMayEnd) {
  auto model = load_model("models/tandem-austen");
  auto reqs = constrained(prompts(model->config(), 6, 10, 30, kMaxLen + 4, 31), 30);
  for (auto& r : reqs) {
    // The stop token: the reference's favourite among allowed tokens is likely; use several.
    for (int32_t t = 0; t < 64; ++t) r.stop_token_ids.push_back(t);
  }
  Engine e(model, EngineOptions{});
  const auto got = run_all(e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const auto& s = reqs[i].stop_token_ids;
    for (size_t j = 0; j + 1 < got[i].tokens.size(); ++j)
      EXPECT_EQ(std::count(s.begin(), s.end(), got[i].tokens[j]), 0) << "request " << i;
    if (got[i].reason == FinishReason::kStop && got[i].tokens.size() <= kMaxLen) {
      const int32_t last = got[i].tokens.back();
      if (std::count(s.begin(), s.end(), last)) {
        EXPECT_GE(got[i].tokens.size(), 5u);
      }
    }
  }
}

// Sampled constrained decoding follows the exact masked distribution (temperature 1, top-k 8
// over the masked logits): the joint of the first two tokens and the marginal of the third,
// with and without speculation (S = 3).
TEST(Constrained, SampledTokensFollowTheMaskedDistribution) {
  auto model = load_model("models/tandem-austen");
  const ModelConfig& c = model->config();
  const std::vector<int32_t> prompt = {263, 2318, 295, 1120, 302, 276, 1535, 13, 291, 3145};
  const SamplingParams sp{1.0f, 8, 1.0f, 0};
  constexpr int kPercent = 25;
  const uint64_t salt = 99;
  Generator g(*model, 64, 16);
  const ThreeTokenLaw law = three_token_law(
      [&](const std::vector<int32_t>& generated) {
        GenerateRequest r;
        r.prompt = prompt;
        r.prompt.insert(r.prompt.end(), generated.begin(), generated.end());
        r.max_new_tokens = 1;
        std::vector<float> l = g.generate(r).logits[0];
        TableConstraint tc(salt, kPercent, 4, kMaxLen);
        for (int32_t t : generated) EXPECT_TRUE(tc.accept(t));
        mask_by_hand(tc, l);
        std::vector<float> p;
        sampling_distribution(l.data(), c.vocab_size, sp, p);
        return p;
      },
      c.vocab_size);
  expect_three_token_law(model, prompt, sp, law, 3000, 5000, [&] {
    return std::make_shared<TableConstraint>(salt, kPercent, 4, kMaxLen);
  });
}

}  // namespace
}  // namespace tandem::test
