// The generation pipeline against the real engine on the shipped default model: streamed deltas
// add up to the final text, which is the tokenizer's decode of the output ids; stop strings that
// span tokens cut the text and the token count where they complete; stop token ids; abort gives
// the KV pages back; seeded sampling is reproducible.
#include <gtest/gtest.h>

#include <thread>

#include "backends/init.h"
#include "default_model_routes.h"
#include "model/model.h"
#include "server/generation.h"

namespace tandem::server {
namespace {

class GenerationTest : public DefaultModelRoutes {
 protected:
  struct Outcome {
    std::vector<ChoiceResult> choices;
    std::vector<std::string> streamed;  // concatenated deltas per choice
  };

  static Outcome run(const std::vector<int32_t>& prompt, GenerationParams p) {
    Generation g(*state_, {PromptInput{prompt}}, p, Generation::Options{});
    Outcome r;
    r.streamed.resize(static_cast<size_t>(p.n));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    std::vector<ChoiceDelta> deltas;
    while (!g.done()) {
      EXPECT_LT(std::chrono::steady_clock::now(), deadline) << "generation timed out";
      if (std::chrono::steady_clock::now() > deadline) break;
      deltas.clear();
      g.poll(deltas, std::chrono::milliseconds(100));
      for (const ChoiceDelta& d : deltas) r.streamed[d.index] += d.text;
    }
    r.choices = g.choices();
    return r;
  }

  static std::vector<int32_t> prompt(const std::string& text) { return tok().encode(text, true); }
  static const Tokenizer& tok() { return state_->tokenizer(); }
};

GenerationParams greedy(int64_t max_new) {
  GenerationParams p;
  p.temperature = 0;
  p.max_new_tokens = max_new;
  p.ignore_eos = true;
  return p;
}

TEST_F(GenerationTest, StreamedTextIsTheDecodedOutput) {
  const Outcome r = run(prompt("It is a truth universally acknowledged"), greedy(40));
  const ChoiceResult& c = r.choices[0];
  EXPECT_EQ(c.finish_reason, FinishReason::kLength);
  EXPECT_EQ(c.completion_tokens, 40);
  EXPECT_EQ(c.output_ids.size(), 40u);
  EXPECT_EQ(c.text, tok().decode(c.output_ids, true));
  EXPECT_EQ(r.streamed[0], c.text);
  EXPECT_FALSE(c.text.empty());
}

TEST_F(GenerationTest, StopStringSpanningTokens) {
  const std::vector<int32_t> ids = prompt("My dear Mr. Bennet, said his lady to him one day,");
  const Outcome full = run(ids, greedy(48));
  const ChoiceResult& f = full.choices[0];
  const std::string& text = f.text;
  // A stop string that starts two bytes before the end of token k and ends three bytes into
  // what follows, at its first occurrence.
  for (size_t k = 8; k + 8 < f.output_ids.size(); ++k) {
    const std::vector<int32_t> head(f.output_ids.begin(),
                                    f.output_ids.begin() + static_cast<long>(k));
    const size_t b = tok().decode(head, true).size();
    if (b < 2 || b + 3 > text.size()) continue;
    const std::string stop = text.substr(b - 2, 5);
    if (text.find(stop) != b - 2) continue;
    // The token that completes the stop string.
    size_t j = k;
    while (tok()
               .decode({f.output_ids.begin(), f.output_ids.begin() + static_cast<long>(j)}, true)
               .size() < b + 3)
      ++j;
    GenerationParams p = greedy(48);
    p.stop = {stop};
    const Outcome r = run(ids, p);
    const ChoiceResult& c = r.choices[0];
    EXPECT_EQ(c.finish_reason, FinishReason::kStop);
    ASSERT_TRUE(c.matched_string.has_value());
    EXPECT_EQ(*c.matched_string, stop);
    EXPECT_EQ(c.text, text.substr(0, b - 2));
    EXPECT_EQ(r.streamed[0], c.text);
    EXPECT_EQ(c.completion_tokens, static_cast<int64_t>(j));
    EXPECT_EQ(c.matched_stop(), Json(stop));

    p.no_stop_trim = true;
    const Outcome kept = run(ids, p);
    EXPECT_EQ(kept.choices[0].text, text.substr(0, b + 3));
    return;
  }
  FAIL() << "no usable stop string in: " << text;
}

TEST_F(GenerationTest, StopTokenIds) {
  const std::vector<int32_t> ids = prompt("Emma Woodhouse, handsome, clever, and rich,");
  const Outcome full = run(ids, greedy(32));
  const std::vector<int32_t>& out = full.choices[0].output_ids;
  // The first token from index 3 on that did not occur before it.
  size_t i = 3;
  while (i < out.size() && std::find(out.begin(), out.begin() + static_cast<long>(i), out[i]) !=
                               out.begin() + static_cast<long>(i))
    ++i;
  ASSERT_LT(i, out.size());
  GenerationParams p = greedy(32);
  p.stop_token_ids = {out[i]};
  const ChoiceResult c = run(ids, p).choices[0];
  EXPECT_EQ(c.finish_reason, FinishReason::kStop);
  EXPECT_EQ(c.completion_tokens, static_cast<int64_t>(i + 1));
  ASSERT_TRUE(c.matched_token.has_value());
  EXPECT_EQ(*c.matched_token, out[i]);
  // The stop token's own text is trimmed.
  EXPECT_EQ(c.text, tok().decode({out.begin(), out.begin() + static_cast<long>(i)}, true));
}

TEST_F(GenerationTest, AbortReturnsKvPages) {
  Engine& e = state_->engine();
  {
    Generation g(*state_, {PromptInput{prompt("The next morning Elinor")}}, greedy(3000),
                 Generation::Options{});
    std::vector<ChoiceDelta> d;
    int64_t tokens = 0;
    while (tokens < 20 && !g.done()) {
      d.clear();
      g.poll(d, std::chrono::milliseconds(100));
      for (auto& x : d) tokens += x.new_tokens;
    }
    EXPECT_GE(e.metrics().kv_pages_used, 1);
    g.abort();
    EXPECT_TRUE(g.done());
    EXPECT_EQ(g.choices()[0].finish_reason, FinishReason::kAbort);
  }
  // The engine applies aborts between steps.
  EngineMetrics m;
  for (int i = 0; i < 200; ++i) {
    m = e.metrics();
    if (m.num_running == 0 && m.num_waiting == 0 && m.kv_pages_used == m.kv_pages_cached) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(m.num_running, 0);
  EXPECT_EQ(m.kv_pages_used, m.kv_pages_cached);
  EXPECT_TRUE(e.flush_cache());
  // Metrics are published once per engine loop iteration, just after the flush.
  for (int i = 0; i < 200 && e.metrics().kv_pages_used != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(e.metrics().kv_pages_used, 0);
}

TEST_F(GenerationTest, SeededSamplingIsReproducible) {
  GenerationParams p;
  p.temperature = 1.0f;
  p.max_new_tokens = 24;
  p.ignore_eos = true;
  p.seed = 0;  // 0 is a seed like any other
  p.n = 2;
  const std::vector<int32_t> ids = prompt("She was");
  const Outcome a = run(ids, p), b = run(ids, p);
  ASSERT_EQ(a.choices.size(), 2u);
  EXPECT_EQ(a.choices[0].output_ids, b.choices[0].output_ids);
  EXPECT_EQ(a.choices[1].output_ids, b.choices[1].output_ids);
  EXPECT_NE(a.choices[0].output_ids, a.choices[1].output_ids);
  EXPECT_EQ(a.streamed[1], a.choices[1].text);
}

TEST_F(GenerationTest, ContextLimits) {
  const int64_t ctx = state_->engine().context_length();
  try {
    Generation g(*state_, {PromptInput{prompt("Hello there")}}, greedy(ctx), Generation::Options{});
    ADD_FAILURE() << "accepted prompt + max_tokens beyond the context";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_NE(std::string(e.what()).find(std::to_string(ctx)), std::string::npos) << e.what();
    EXPECT_EQ(e.param(), "max_tokens");
  }
  EXPECT_THROW(Generation(*state_, {PromptInput{{}}}, greedy(4), Generation::Options{}), ApiError);
  // Without max_tokens the completion may use the rest of the context.
  GenerationParams p = greedy(1);
  p.max_new_tokens.reset();
  std::vector<int32_t> long_prompt(static_cast<size_t>(ctx - 2), prompt("a")[0]);
  const Outcome r = run(long_prompt, p);
  EXPECT_EQ(r.choices[0].completion_tokens, 2);
  EXPECT_EQ(r.choices[0].finish_reason, FinishReason::kLength);
}

}  // namespace
}  // namespace tandem::server
