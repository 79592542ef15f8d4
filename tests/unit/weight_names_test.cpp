// The name table: checkpoint names per layer kind, the MTP layer's prefix, quantization rules.
#include <gtest/gtest.h>

#include <set>

#include "model/presets.h"
#include "model/weight_names.h"

namespace tandem {
namespace {

std::set<std::string> names(const std::vector<TensorSpec>& t) {
  std::set<std::string> s;
  for (const auto& e : t) s.insert(e.name());
  return s;
}

TEST(WeightNames, Glm52LayoutAndMtp) {
  const ModelConfig c = preset_config("glm5.2");
  const auto table = weight_name_table(c, true);
  const auto n = names(table);
  EXPECT_TRUE(n.count("model.embed_tokens.weight"));
  EXPECT_TRUE(n.count("lm_head.weight"));
  EXPECT_TRUE(n.count("model.layers.0.mlp.gate_proj.weight"));  // dense
  EXPECT_TRUE(n.count("model.layers.3.mlp.experts.255.down_proj.weight"));
  EXPECT_TRUE(n.count("model.layers.3.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(n.count("model.layers.3.mlp.shared_experts.up_proj.weight"));
  // IndexShare: shared layers carry no indexer tensors, full ones do.
  EXPECT_TRUE(n.count("model.layers.6.self_attn.indexer.wq_b.weight"));
  EXPECT_FALSE(n.count("model.layers.5.self_attn.indexer.wq_b.weight"));
  // MTP at model.layers.78 with its own indexer and MoE.
  EXPECT_TRUE(n.count("model.layers.78.eh_proj.weight"));
  EXPECT_TRUE(n.count("model.layers.78.enorm.weight"));
  EXPECT_TRUE(n.count("model.layers.78.shared_head.norm.weight"));
  EXPECT_TRUE(n.count("model.layers.78.self_attn.indexer.weights_proj.weight"));
  EXPECT_TRUE(n.count("model.layers.78.mlp.experts.0.gate_proj.weight"));
  for (const auto& s : table) {
    if (s.name() == "model.layers.3.self_attn.kv_b_proj.weight") {
      EXPECT_EQ(s.shape, (std::vector<int64_t>{28672, 512}));
    }
    if (s.name() == "model.layers.78.eh_proj.weight") {
      EXPECT_EQ(s.shape, (std::vector<int64_t>{6144, 12288}));
    }
    // GLM ships no MTP embed/head; they are optional in the table.
    if (s.slot == Slot::kMtpEmbed || s.slot == Slot::kMtpHead) {
      EXPECT_TRUE(s.optional);
    }
  }
  // Without MTP nothing under layer 78 is asked for.
  for (const auto& s : weight_name_table(c, false)) EXPECT_NE(s.layer, 78);
}

TEST(WeightNames, ExcludeRulesResolveThroughTheTable) {
  ModelConfig c = preset_config("glm5.2");
  c.quant.method = "quark";
  // amd/GLM-5-MXFP4 style: MoE experts only.
  c.quant.exclude = {
      "lm_head",          "re:.*mlp.gate$",        "re:model.layers.78.*",
      "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|down)_proj$"};
  int quantized = 0;
  for (const auto& s : weight_name_table(c, true)) {
    const bool q = expects_quantized(c, s);
    if (s.layer == 78) {
      EXPECT_FALSE(q) << s.name();
    }
    if (s.slot == Slot::kExpertGate && s.layer < 78) {
      EXPECT_TRUE(q) << s.name();
    }
    if (s.slot == Slot::kQaProj || s.slot == Slot::kRouter || s.slot == Slot::kMlpGate) {
      EXPECT_FALSE(q) << s.name();
    }
    quantized += q;
  }
  EXPECT_EQ(quantized, 75 * 256 * 3);
  // FP8: everything linear except the always-high-precision modules.
  c.quant.method = "fp8";
  c.quant.exclude = {"model.embed_tokens", "lm_head", "model.layers.3.self_attn.indexers_proj"};
  for (const auto& s : weight_name_table(c, true)) {
    if (s.slot == Slot::kMtpEhProj || s.slot == Slot::kIdxWeightsProj || s.slot == Slot::kRouter) {
      EXPECT_FALSE(expects_quantized(c, s)) << s.name();
    }
    if (s.slot == Slot::kOProj) {
      EXPECT_TRUE(expects_quantized(c, s)) << s.name();
    }
  }
}

TEST(WeightNames, DeepSeekShipsMtpDuplicatesAndNoIndexerOnV3) {
  const auto n = names(weight_name_table(preset_config("deepseek-v3"), true));
  EXPECT_TRUE(n.count("model.layers.61.embed_tokens.weight"));
  EXPECT_TRUE(n.count("model.layers.61.shared_head.head.weight"));
  for (const auto& name : n) EXPECT_EQ(name.find("indexer"), std::string::npos) << name;
}

}  // namespace
}  // namespace tandem
