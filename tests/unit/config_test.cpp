// Parsing config.json for the three architectures, and errors that name the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/config.h"
#include "model/presets.h"

namespace tandem {
namespace {

using json = nlohmann::json;

json glm52_json() {
  return preset_config("glm5.2").to_json();
}

std::string error_of(const json& j) {
  try {
    ModelConfig::from_json(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, Glm52IndexShareFromFreqAndOffset) {
  json j = preset_config("glm5").to_json();
  j.erase("indexer_types");
  j["index_topk_freq"] = 4;
  j["index_skip_topk_offset"] = 3;
  const ModelConfig c = ModelConfig::from_json(j, "t");
  std::vector<int> full;
  for (int i = 0; i < 78; ++i)
    if (c.indexer_full[i]) full.push_back(i);
  // {0, 1, 2, 6, 10, ..., 74}: 21 full layers, 57 shared.
  ASSERT_EQ(full.size(), 21u);
  EXPECT_EQ(full[0], 0);
  EXPECT_EQ(full[2], 2);
  EXPECT_EQ(full[3], 6);
  EXPECT_EQ(full.back(), 74);
  // MTP layer 78 is full under the same rule.
  EXPECT_TRUE(indexshare_layer_is_full(78, 4, 3));
}

TEST(Config, ExplicitListsWinAndPatternsWork) {
  json j = glm52_json();
  const ModelConfig c = ModelConfig::from_json(j, "t");
  EXPECT_EQ(c.layer_is_moe[2], false);
  EXPECT_EQ(c.layer_is_moe[3], true);
  EXPECT_TRUE(c.indexer_rope_interleave);
  EXPECT_DOUBLE_EQ(c.rope.theta, 8e6);
  EXPECT_DOUBLE_EQ(c.softmax_scale(), 1.0 / 16.0);
  j.erase("indexer_types");
  std::string pat(78, 'S');
  pat[0] = 'F';
  pat[5] = 'F';
  j["index_topk_pattern"] = pat;
  const ModelConfig p = ModelConfig::from_json(j, "t");
  EXPECT_TRUE(p.indexer_full[5]);
  EXPECT_FALSE(p.indexer_full[4]);
}

TEST(Config, DeepSeekYarnAndGroupedRouting) {
  const ModelConfig c = preset_config("deepseek-v3.2");
  EXPECT_EQ(c.arch, Arch::kDeepseekV32);
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_FALSE(c.indexer_rope_interleave);  // V3.2's indexer pairs halves (NeoX)
  EXPECT_NEAR(c.softmax_scale(), 0.1352338, 1e-6);
  const ModelConfig v3 = preset_config("deepseek-v3");
  EXPECT_FALSE(v3.has_indexer);
}

TEST(Config, LegacyRopeScalingIsRead) {
  json j = preset_config("deepseek-v3").to_json();
  j.erase("rope_parameters");
  j["rope_theta"] = 10000;
  j["rope_scaling"] = {{"type", "yarn"},
                       {"factor", 40},
                       {"original_max_position_embeddings", 4096},
                       {"mscale", 1.0},
                       {"mscale_all_dim", 1.0}};
  const ModelConfig c = ModelConfig::from_json(j, "t");
  EXPECT_EQ(c.rope.type, "yarn");
  EXPECT_DOUBLE_EQ(c.rope.factor, 40);
}

TEST(Config, RoundTripsThroughJson) {
  for (const auto& name : preset_names()) {
    const ModelConfig a = preset_config(name);
    const ModelConfig b = ModelConfig::from_json(a.to_json(), name);
    EXPECT_EQ(a.to_json().dump(), b.to_json().dump()) << name;
  }
}

TEST(Config, ErrorsNameTheField) {
  json j = glm52_json();
  j["architectures"] = {"LlamaForCausalLM"};
  EXPECT_NE(error_of(j).find("'architectures'"), std::string::npos) << error_of(j);
  j = glm52_json();
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("'hidden_size'"), std::string::npos);
  j = glm52_json();
  j["n_group"] = 3;  // does not divide 256 experts
  EXPECT_NE(error_of(j).find("'n_group'"), std::string::npos);
  j = glm52_json();
  j["num_experts_per_tok"] = 300;
  EXPECT_NE(error_of(j).find("'num_experts_per_tok'"), std::string::npos);
  j = glm52_json();
  j["indexer_types"][0] = "shared";
  EXPECT_NE(error_of(j).find("'indexer_types[0]'"), std::string::npos);
  j = glm52_json();
  j["mlp_layer_types"][5] = "moe";
  EXPECT_NE(error_of(j).find("'mlp_layer_types[5]'"), std::string::npos);
  j = glm52_json();
  j["hidden_size"] = "big";
  EXPECT_NE(error_of(j).find("'hidden_size'"), std::string::npos);
  j = glm52_json();
  j["scoring_func"] = "softmax";
  EXPECT_NE(error_of(j).find("'scoring_func'"), std::string::npos);
  j = glm52_json();
  j["qk_rope_head_dim"] = 63;
  EXPECT_NE(error_of(j).find("'qk_rope_head_dim'"), std::string::npos);
  j = glm52_json();
  j.erase("index_topk");
  EXPECT_NE(error_of(j).find("'index_topk'"), std::string::npos);
  j = glm52_json();
  j["quantization_config"] = {{"quant_method", "gptq"}};
  EXPECT_NE(error_of(j).find("quant_method"), std::string::npos);
}

TEST(Config, QuantizationExcludeRules) {
  QuantConfig q;
  q.exclude = {"lm_head", "re:.*mlp.gate$", "re:model.layers.78.*", "model.layers.3.mlp.experts",
               "model.embed_tokens"};
  EXPECT_TRUE(q.is_excluded("lm_head"));
  EXPECT_TRUE(q.is_excluded("model.layers.5.mlp.gate"));
  EXPECT_FALSE(q.is_excluded("model.layers.5.mlp.gate_proj"));
  // The MTP layer keeps its checkpoint prefix, so the rule written for it applies.
  EXPECT_TRUE(q.is_excluded("model.layers.78.self_attn.q_a_proj"));
  EXPECT_TRUE(q.is_excluded("model.layers.78.mlp.experts.3.up_proj"));
  EXPECT_FALSE(q.is_excluded("model.layers.7.self_attn.q_a_proj"));
  // A fused-experts prefix covers every expert under it.
  EXPECT_TRUE(q.is_excluded("model.layers.3.mlp.experts.17.down_proj"));
  EXPECT_FALSE(q.is_excluded("model.layers.30.mlp.experts.17.down_proj"));
}

}  // namespace
}  // namespace tandem
