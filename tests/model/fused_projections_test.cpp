// The fused attention projection (q_a | kv_a | indexer wk in one weight) and the strided views it
// relies on: a layer computes exactly what it computes with the separate weights, on the CPU.
#include <gtest/gtest.h>

#include "backends/init.h"
#include "core/error.h"
#include "model/decoder_layer.h"
#include "model/dummy_weights.h"
#include "model/fused_projections.h"
#include "model/layer_context.h"
#include "model/presets.h"
#include "model/rope.h"
#include "model_test_util.h"
#include "ops/ops.h"
#include "runtime/batch_builder.h"

namespace tandem {
namespace {

TEST(TensorView, UnflattenSplitsAStridedDim) {
  // [4, 10] -> columns [2, 8) -> [4, 2, 3]: row stride 10 kept, the split dim 3 contiguous.
  std::vector<float> v(40);
  for (int i = 0; i < 40; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor t = Tensor::from_vector(v, {4, 10}).narrow(1, 2, 6).unflatten(1, 2, 3);
  ASSERT_EQ(t.ndim(), 3);
  EXPECT_EQ(t.size(0), 4);
  EXPECT_EQ(t.size(1), 2);
  EXPECT_EQ(t.size(2), 3);
  EXPECT_EQ(t.stride(0), 10);
  EXPECT_EQ(t.stride(1), 3);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_FALSE(t.is_contiguous());
  const std::vector<float> got = to_float_vector(t);  // row-major over [4, 2, 3]
  for (int r = 0; r < 4; ++r)
    for (int j = 0; j < 6; ++j)
      EXPECT_EQ(got[static_cast<size_t>(r * 6 + j)], static_cast<float>(r * 10 + 2 + j));
  EXPECT_THROW(t.unflatten(2, 2, 2), Error);  // 4 != 3
}

// One prefill chunk and one decode step of one layer, with the given attention weights and a
// fresh cache: the layer's output rows and the cached latent and index-key rows.
struct LayerRun {
  std::vector<float> prefill, decode, latent, index_keys;
};

LayerRun run_layer(const ModelConfig& c, const ModelWeights& mw, const LayerWeights& lw) {
  KvCacheOptions ko;
  ko.page_size = 16;
  ko.num_pages = 4;
  ko.with_mtp = false;
  KvCache cache(c, ko);
  const std::vector<int32_t> pages{0, 1, 2, 3};
  std::vector<int32_t> prompt;
  for (int i = 0; i < 21; ++i) prompt.push_back((i * 7 + 3) % static_cast<int>(c.vocab_size));
  LayerRun r;
  auto step = [&](ForwardMode mode, int64_t start, const std::vector<int32_t>& toks) {
    ForwardBatch fb =
        build_forward_batch(mode, {SequenceChunk{&pages, start, toks, true}}, 16, Device::cpu());
    Workspace ws(Device::cpu());
    const LayerContext ctx{c, mw, fb, cache, ws};
    Tensor h = ops::embedding(ws, fb.input_ids, mw.embed);  // [T, D]
    Tensor topk;
    decoder_layer(ctx, lw, 0, true, h, topk);
    return to_float_vector(h);
  };
  r.prefill = step(ForwardMode::kExtend, 0, prompt);
  r.decode = step(ForwardMode::kDecode, 21, {5});
  r.latent = to_float_vector(cache.latent(0));
  if (c.has_indexer) r.index_keys = to_float_vector(cache.index_keys(0));
  return r;
}

class FusedProjections : public ::testing::TestWithParam<std::string> {};

TEST_P(FusedProjections, LayerIsExactlyTheUnfusedLayer) {
  init_backends();
  const ModelConfig c = preset_config(GetParam());
  LoadOptions o;
  ModelWeights mw = dummy_weights(c, o, 11);
  const LayerWeights separate = mw.layers[0];
  LayerWeights fused = separate;  // shares the tensors; fusing rebinds fused's parts only
  fuse_attention_projections(fused.attn);

  const AttentionWeights& f = fused.attn;
  ASSERT_TRUE(f.qkv_a_proj.defined());
  const int64_t rq = c.q_lora_rank, rkv = c.kv_lora_rank + c.qk_rope_head_dim;
  const int64_t Di = c.has_indexer ? c.index_head_dim : 0;
  EXPECT_EQ(f.qkv_a_proj.out_features(), rq + rkv + Di);
  EXPECT_EQ(f.qkv_a_proj.in_features(), c.hidden_size);
  // The parts are views of the fused rows with the original values.
  EXPECT_EQ(f.q_a_proj.w.raw(), f.qkv_a_proj.w.raw());
  EXPECT_EQ(to_float_vector(f.q_a_proj.w), to_float_vector(separate.attn.q_a_proj.w));
  EXPECT_EQ(to_float_vector(f.kv_a_proj.w), to_float_vector(separate.attn.kv_a_proj.w));
  if (c.has_indexer) {
    EXPECT_EQ(to_float_vector(f.indexer->wk.w), to_float_vector(separate.attn.indexer->wk.w));
  }

  const LayerRun a = run_layer(c, mw, separate), b = run_layer(c, mw, fused);
  EXPECT_EQ(a.prefill, b.prefill);
  EXPECT_EQ(a.decode, b.decode);
  EXPECT_EQ(a.latent, b.latent);
  EXPECT_EQ(a.index_keys, b.index_keys);
}

TEST(FusedProjections, MixedFormatsAreLeftAlone) {
  init_backends();
  const ModelConfig c = preset_config("tiny-glm5.2");
  LoadOptions o;
  ModelWeights mw = dummy_weights(c, o, 12);
  AttentionWeights a = mw.layers[0].attn;
  a.kv_a_proj.format = WeightFormat::kFp8Block;  // as a quantized checkpoint part would be
  fuse_attention_projections(a);
  EXPECT_FALSE(a.qkv_a_proj.defined());
  EXPECT_EQ(a.q_a_proj.w.raw(), mw.layers[0].attn.q_a_proj.w.raw());
}

INSTANTIATE_TEST_SUITE_P(Presets, FusedProjections,
                         ::testing::Values("tiny-glm5.2", "tiny-deepseek-v3.2", "tiny-deepseek-v3"),
                         [](const auto& info) { return test::test_name(info.param); });

}  // namespace
}  // namespace tandem
