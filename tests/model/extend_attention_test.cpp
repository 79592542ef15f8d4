// Extend (prefill) batches run MLA in one of two forms (mla_attention.cpp): the naive one expands
// every cached latent to per-head keys and values, the absorbed one attends over the latent rows
// with W_UK folded into the queries and W_UV applied after. They are the same function; on the
// CPU (f32) they agree to rounding, with bf16 and FP8 cache rows alike, over a prompt longer
// than the tiny presets' index_topk (8) and in a second chunk that attends to cached rows.
#include <gtest/gtest.h>

#include "backends/init.h"
#include "model/decoder_layer.h"
#include "model/dummy_weights.h"
#include "model/layer_context.h"
#include "model/presets.h"
#include "model_test_util.h"
#include "ops/ops.h"
#include "runtime/batch_builder.h"

namespace tandem {
namespace {

struct ExtendRun {
  std::vector<float> first, second;  // one layer's output rows for each prefill chunk
};

// A 30-token prompt in two extend chunks (17 tokens, then 13 that attend to the cached 17)
// through layer 0 on a fresh cache, with the given form. `salt` changes the first chunk's
// tokens only.
ExtendRun run_extend(const ModelConfig& c, const ModelWeights& mw, DType kv_dtype,
                     ExtendAttention form, int salt = 0) {
  KvCacheOptions ko;
  ko.page_size = 16;
  ko.num_pages = 4;
  ko.with_mtp = false;
  ko.dtype = kv_dtype;
  KvCache cache(c, ko);
  const std::vector<int32_t> pages{2, 0, 3, 1};  // out of order: slots go through the table
  std::vector<int32_t> prompt;
  for (int i = 0; i < 30; ++i)
    prompt.push_back((i * 11 + 5 + (i < 17 ? salt : 0)) % static_cast<int>(c.vocab_size));
  const auto chunk = [&](int64_t start, int64_t n) {
    const std::vector<int32_t> toks(prompt.begin() + start, prompt.begin() + start + n);
    ForwardBatch fb = build_forward_batch(ForwardMode::kExtend,
                                          {SequenceChunk{&pages, start, toks, start + n == 30}}, 16,
                                          Device::cpu());
    Workspace ws(Device::cpu());
    LayerContext ctx{c, mw, fb, cache, ws};
    ctx.extend_attention = form;
    Tensor h = ops::embedding(ws, fb.input_ids, mw.embed);  // [n, D]
    Tensor topk;                                            // [n, K] once the indexer ran
    decoder_layer(ctx, mw.layers[0], 0, true, h, topk);
    return to_float_vector(h);
  };
  ExtendRun r;
  r.first = chunk(0, 17);
  r.second = chunk(17, 13);
  return r;
}

struct Case {
  std::string preset;
  bool fp8_kv;
};

class ExtendAttentionForms : public ::testing::TestWithParam<Case> {};

TEST_P(ExtendAttentionForms, NaiveAndAbsorbedAgree) {
  init_backends();
  const Case& k = GetParam();
  const ModelConfig c = preset_config(k.preset);
  LoadOptions o;
  const ModelWeights mw = dummy_weights(c, o, 21);
  const DType kv = k.fp8_kv ? DType::F8_E4M3 : DType::F32;
  const ExtendRun naive = run_extend(c, mw, kv, ExtendAttention::kNaive);
  const ExtendRun absorbed = run_extend(c, mw, kv, ExtendAttention::kAbsorbed);
  // Same math, different association: f32 rounding only (a wrong key set or position would be
  // off by O(1)).
  EXPECT_LT(test::rel_err(absorbed.first, naive.first), 2e-6);
  EXPECT_LT(test::rel_err(absorbed.second, naive.second), 2e-6);
  // Not vacuous: the second chunk's rows depend on the cached first chunk far above that
  // tolerance (other first-chunk tokens, same second-chunk tokens).
  const ExtendRun other = run_extend(c, mw, kv, ExtendAttention::kAbsorbed, 1);
  EXPECT_GT(test::rel_err(other.second, absorbed.second), 1e-3);

  // kAuto: absorbed on sparse (indexer) layers, naive on dense attention.
  const ExtendRun autom = run_extend(c, mw, kv, ExtendAttention::kAuto);
  const ExtendRun& want = c.has_indexer ? absorbed : naive;
  EXPECT_EQ(autom.first, want.first);
  EXPECT_EQ(autom.second, want.second);
}

INSTANTIATE_TEST_SUITE_P(Presets, ExtendAttentionForms,
                         ::testing::Values(Case{"tiny-glm5.2", false}, Case{"tiny-glm5.2", true},
                                           Case{"tiny-deepseek-v3.2", false},
                                           Case{"tiny-deepseek-v3", false}),
                         [](const auto& info) {
                           return test::test_name(info.param.preset) +
                                  (info.param.fp8_kv ? "_fp8_kv" : "");
                         });

}  // namespace
}  // namespace tandem
