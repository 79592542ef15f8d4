// The paged cache path against full recomputes, chunked prefill, batch invariance (a token's
// logits do not depend on what else is in the batch or how many query tokens a step carries),
// and random checkpoints in every storage format.
#include <filesystem>

#include "core/rng.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "model_test_util.h"
#include "runtime/generator.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

std::string tiny_checkpoint(const std::string& preset, const std::string& quant = "",
                            const std::string& dtype = "f32") {
  const std::string dir = (fs::temp_directory_path() / ("tandem_" + preset + "_" + quant + dtype +
                                                        "_" + std::to_string(::getpid())))
                              .string();
  if (!fs::exists(dir + "/config.json")) {
    RandomCheckpointOptions o;
    o.seed = 3;
    o.dtype = dtype;
    o.quant = quant;
    write_random_checkpoint(preset_config(preset), dir, o);
  }
  return dir;
}

std::vector<float> row(const std::vector<float>& v, int64_t r, int64_t V) {
  return {v.begin() + r * V, v.begin() + (r + 1) * V};
}

// Decode steps against a full recompute, worst over the 280 steps, measured on the CPU backend
// (x86-64, this build): 1.18e-6 (tiny-glm5.2), 9.6e-7 (tiny-deepseek-v3.2), 1.01e-6
// (tiny-deepseek-v3); ~4x headroom. (Chunked prefill is bitwise equal to one shot: checked
// exactly below.)
constexpr double kDecodeTol = 5e-6;

class PagedDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(PagedDecode, FewHundredTokensMatchAFullRecompute) {
  const std::string dir = tiny_checkpoint(GetParam());
  Harness h(dir, 2048, 16, false);
  const int64_t V = h.model->config().vocab_size;
  Rng rng(11);
  std::vector<int32_t> seq;
  for (int i = 0; i < 20; ++i) seq.push_back(static_cast<int32_t>(rng.next_u64() % 256));
  const int64_t total = 300;
  auto pages = h.pages_for(total);
  ForwardResult r = h.run(ForwardMode::kExtend, pages, 0, seq, false);
  std::vector<std::vector<float>> step_logits = {to_float_vector(r.logits)};
  while (static_cast<int64_t>(seq.size()) < total) {
    // Greedy on the model's own logits keeps the text in-distribution for the model.
    const auto& l = step_logits.back();
    const int32_t next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    seq.push_back(next);
    if (static_cast<int64_t>(seq.size()) == total) break;
    r = h.run(ForwardMode::kDecode, pages, static_cast<int64_t>(seq.size()) - 1, {next}, false);
    step_logits.push_back(to_float_vector(r.logits));
  }
  ASSERT_EQ(static_cast<int64_t>(step_logits.size()), total - 20);  // positions 19 .. 298
  auto pages2 = h.pages_for(total);
  ForwardResult full = h.run(ForwardMode::kExtend, pages2, 0, seq, true);
  const auto all = to_float_vector(full.logits);
  double worst = 0;
  for (size_t s = 0; s < step_logits.size(); ++s) {
    const int64_t pos = 19 + static_cast<int64_t>(s);
    const double e = rel_err(step_logits[s], row(all, pos, V));
    worst = std::max(worst, e);
    EXPECT_LT(e, kDecodeTol) << GetParam() << ": decode step at position " << pos;
  }
  std::printf("  %s: %zu decode steps vs full recompute, worst rel err %.2e\n", GetParam().c_str(),
              step_logits.size(), worst);
}

TEST_P(PagedDecode, ChunkedPrefillMatchesOneShot) {
  const std::string dir = tiny_checkpoint(GetParam());
  LoadOptions lo;
  lo.load_mtp = false;
  lo.show_progress = false;
  init_backends();
  auto model = Model::load(dir, lo);
  GenerateRequest req;
  Rng rng(5);
  for (int i = 0; i < 45; ++i) req.prompt.push_back(static_cast<int32_t>(rng.next_u64() % 256));
  req.max_new_tokens = 12;
  Generator g(*model, 128, 8);
  const GenerateResult whole = g.generate(req);
  req.prefill_chunk = 7;
  const GenerateResult chunked = g.generate(req);
  EXPECT_EQ(whole.tokens, chunked.tokens);
  ASSERT_EQ(whole.logits.size(), 12u);
  ASSERT_EQ(chunked.logits.size(), whole.logits.size());
  // Bitwise: the CPU backend computes each query row in a fixed order whatever the chunking
  // (measured rel err 0 on all three presets).
  for (size_t i = 0; i < whole.logits.size(); ++i) {
    ASSERT_FALSE(whole.logits[i].empty()) << i;
    ASSERT_EQ(chunked.logits[i].size(), whole.logits[i].size()) << i;
    EXPECT_TRUE(chunked.logits[i] == whole.logits[i])
        << GetParam() << ": step " << i << " rel err "
        << rel_err(chunked.logits[i], whole.logits[i]);
  }
}

// Decode and multi-token decode (the speculative verify shape) must give bitwise the logits a
// token gets alone, whatever shares its batch: the CPU backend reduces in a fixed order.
TEST_P(PagedDecode, BatchAndQueryCountInvariance) {
  const std::string dir = tiny_checkpoint(GetParam());
  Harness h(dir, 4096, 16, false);
  Rng rng(9);
  auto prompt = [&](int n) {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng.next_u64() % 256));
    return p;
  };
  const std::vector<int32_t> a = prompt(30), b = prompt(13), c = prompt(41), extra = prompt(4);
  auto pa = h.pages_for(64), pb = h.pages_for(64), pc = h.pages_for(64);
  h.run(ForwardMode::kExtend, pa, 0, a, false);
  h.run(ForwardMode::kExtend, pb, 0, b, false);
  h.run(ForwardMode::kExtend, pc, 0, c, false);
  // A alone: four single-token decode steps.
  std::vector<std::vector<float>> alone;
  for (int i = 0; i < 4; ++i)
    alone.push_back(
        to_float_vector(h.run(ForwardMode::kDecode, pa, 30 + i, {extra[i]}, false).logits));
  // A again on a copy of its prefix, as one 4-token step batched with B (1 token) and C (3).
  auto pa2 = h.pages_for(64);
  h.run(ForwardMode::kExtend, pa2, 0, a, false);
  std::vector<SequenceChunk> chunks = {{&pb, 13, {extra[0]}, true},
                                       {&pa2, 30, extra, true},
                                       {&pc, 41, {extra[1], extra[2], extra[3]}, true}};
  ForwardBatch fb = build_forward_batch(ForwardMode::kDecode, chunks, h.page_size, Device::cpu());
  Workspace ws(Device::cpu());
  const auto batched = to_float_vector(h.model->forward(ws, fb, *h.cache).logits);
  const int64_t V = h.model->config().vocab_size;
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(row(batched, 1 + i, V), alone[i]) << "token " << i << " of A differs";
}

INSTANTIATE_TEST_SUITE_P(Presets, PagedDecode,
                         ::testing::Values("tiny-glm5.2", "tiny-deepseek-v3.2", "tiny-deepseek-v3"),
                         [](const auto& info) { return test::test_name(info.param); });

// Every storage format loads and runs; quantized formats stay close to their bf16 source, both
// as the checkpoint's numerics (FP8 W8A8, Quark MXFP4 W4A4: weights kept quantized) and
// weight-only after dequantizing at load (LoadOptions::keep_quantized = false).
TEST(RandomCheckpoint, AllFormatsLoadAndAgree) {
  init_backends();
  std::vector<int32_t> prompt;
  for (int i = 0; i < 6; ++i) prompt.push_back(i * 17 % 256);
  std::map<std::string, std::vector<float>> out;
  for (const std::string fmt : {"bf16", "fp8", "mxfp4"})
    for (bool keep : {true, false}) {
      if (fmt == "bf16" && !keep) continue;
      LoadOptions lo;
      lo.show_progress = false;
      lo.keep_quantized = keep;
      const std::string dir = tiny_checkpoint("tiny-glm5.2", fmt == "bf16" ? "" : fmt, "bf16");
      auto model = Model::load(dir, lo);
      EXPECT_TRUE(model->has_mtp());
      // FP8 quantizes the projections; Quark's MXFP4 layout only the routed experts.
      const auto& layers = model->weights().layers;
      const auto moe = std::find_if(layers.begin(), layers.end(),
                                    [](const LayerWeights& l) { return l.moe.has_value(); });
      ASSERT_NE(moe, layers.end());
      const Weight& probe = fmt == "mxfp4" ? moe->moe->experts_gate_up : layers[0].attn.q_b_proj;
      EXPECT_EQ(probe.quantized(), keep && fmt != "bf16") << fmt;
      if (fmt == "fp8" && keep) {
        // gate and up of 32 rows each: their 128-row scale blocks are re-blocked to 32 rows so
        // that [gate; up] stays FP8 (a block may not span both).
        for (const Weight* w : {&moe->moe->experts_gate_up, &moe->moe->shared->gate_up}) {
          EXPECT_TRUE(w->quantized());
          EXPECT_EQ(w->block_n, 32);
        }
        EXPECT_TRUE(moe->moe->experts_down.quantized());
      }
      Generator g(*model, 64, 16);
      GenerateRequest req;
      req.prompt = prompt;
      req.max_new_tokens = 1;
      out[fmt + (keep ? "" : "-weight-only")] = g.generate(req).logits[0];
    }
  // Same seed, so the quantized checkpoints hold the same underlying weights. The prompt stays
  // within index_topk: past it, small weight differences can flip top-k selections.
  const auto err = [&](const std::string& k) { return rel_err(out[k], out["bf16"]); };
  std::printf("fp8 %g (weight-only %g), mxfp4 %g (weight-only %g)\n", err("fp8"),
              err("fp8-weight-only"), err("mxfp4"), err("mxfp4-weight-only"));
  EXPECT_LT(err("fp8-weight-only"), 0.1);
  // W8A8 with ue8m0 activation scales (scale_fmt of GLM-5.x-FP8, as make-checkpoint writes):
  // measured 0.164 on this random model, whose layers amplify any perturbation.
  EXPECT_LT(err("fp8"), 0.2);
  EXPECT_LT(err("mxfp4-weight-only"), 0.5);
  EXPECT_LT(err("mxfp4"), 0.8);
  EXPECT_GT(err("mxfp4-weight-only"), 0.0);  // it really used the fp4 weights
  // The activation rules really apply: quantized inputs move the logits.
  EXPECT_GT(rel_err(out["fp8"], out["fp8-weight-only"]), 1e-3);
  EXPECT_GT(rel_err(out["mxfp4"], out["mxfp4-weight-only"]), 1e-2);

  // --weight-only-quant: the MXFP4 experts stay quantized but take their inputs unquantized
  // (W4A16), so the logits are those of the dequantized weights, not W4A4's.
  LoadOptions lo;
  lo.show_progress = false;
  lo.online_quant.weight_only = true;
  auto model = Model::load(tiny_checkpoint("tiny-glm5.2", "mxfp4", "bf16"), lo);
  for (const LayerWeights& l : model->weights().layers)
    if (l.moe) {
      EXPECT_TRUE(l.moe->experts_gate_up.quantized());
      EXPECT_EQ(l.moe->experts_gate_up.act, ActQuant::kNone);
      EXPECT_EQ(l.moe->experts_down.act, ActQuant::kNone);
    }
  Generator g(*model, 64, 16);
  GenerateRequest req;
  req.prompt = prompt;
  req.max_new_tokens = 1;
  const std::vector<float> w4a16 = g.generate(req).logits[0];
  std::printf("mxfp4 --weight-only-quant against dequantized at load %g, against W4A4 %g\n",
              rel_err(w4a16, out["mxfp4-weight-only"]), rel_err(w4a16, out["mxfp4"]));
  EXPECT_LT(rel_err(w4a16, out["mxfp4-weight-only"]), 1e-4);
  EXPECT_GT(rel_err(w4a16, out["mxfp4"]), 1e-2);
}

// Largest |a - b| over two tensors of the same size.
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = to_float_vector(a), y = to_float_vector(b);
  if (x.size() != y.size()) return 1e30;
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(double{x[i]} - y[i]));
  return m;
}

// The re-blocked FP8 [gate; up] (the loader's reblock_rows) dequantizes to exactly what the
// parts dequantize to on their own. Experts of 192 rows, as the default model's: each part has
// a whole and a partial 128-row block, which become three 64-row blocks.
TEST(RandomCheckpoint, Fp8GateUpReblockedExactly) {
  init_backends();
  const std::string dir =
      (fs::temp_directory_path() / ("tandem_reblock_" + std::to_string(::getpid()))).string();
  ModelConfig c = preset_config("tiny-glm5.2");
  c.moe_intermediate_size = 192;
  RandomCheckpointOptions o;
  o.seed = 5;
  o.quant = "fp8";
  write_random_checkpoint(c, dir, o);
  LoadOptions kept, dense;
  kept.show_progress = dense.show_progress = false;
  dense.keep_quantized = false;
  const auto q = Model::load(dir, kept), d = Model::load(dir, dense);
  int checked = 0;
  for (size_t l = 0; l < q->weights().layers.size(); ++l) {
    const auto& mq = q->weights().layers[l].moe;
    const auto& md = d->weights().layers[l].moe;
    if (!mq) continue;
    ASSERT_TRUE(mq->shared->gate_up.quantized());
    EXPECT_EQ(max_abs_diff(dequantize_to_f32(mq->shared->gate_up), md->shared->gate_up.w), 0.0)
        << "layer " << l;
    const Weight& gu = mq->experts_gate_up;
    ASSERT_TRUE(gu.quantized());
    EXPECT_EQ(gu.block_n, 64);
    for (int64_t e = 0; e < gu.experts(); ++e, ++checked)
      EXPECT_EQ(max_abs_diff(dequantize_to_f32(gu.expert(e)), md->experts_gate_up.w.select(0, e)),
                0.0)
          << "layer " << l << " expert " << e;
  }
  EXPECT_GT(checked, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tandem::test
