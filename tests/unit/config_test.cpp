// Parsing config.json for the three architectures, and errors that name the field.
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

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

// Integer fields take JSON integers and integral floats within int64; anything else names the
// field. A float such as 1.7e114 used to reach a C++ cast (undefined behaviour, found by
// fuzz/config.cpp), and a non-string architecture escaped as a JSON type error.
TEST(Config, NumbersAndStringsOfTheWrongKindNameTheField) {
  json j = glm52_json();
  j["moe_intermediate_size"] = 1.7e114;
  EXPECT_NE(error_of(j).find("'moe_intermediate_size'"), std::string::npos) << error_of(j);
  j = glm52_json();
  j["hidden_size"] = 5.5;
  EXPECT_NE(error_of(j).find("'hidden_size'"), std::string::npos);
  j = glm52_json();
  j["hidden_size"] = 0x1p63;
  EXPECT_NE(error_of(j).find("'hidden_size'"), std::string::npos);
  j = glm52_json();
  j["vocab_size"] = std::numeric_limits<uint64_t>::max();
  EXPECT_NE(error_of(j).find("'vocab_size'"), std::string::npos);
  j = glm52_json();
  j["hidden_size"] = true;
  EXPECT_NE(error_of(j).find("'hidden_size'"), std::string::npos);
  j = glm52_json();
  j["architectures"] = {5};
  EXPECT_NE(error_of(j).find("'architectures[0]'"), std::string::npos);
  j = glm52_json();
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {1e300, 128}}};
  EXPECT_NE(error_of(j).find("'quantization_config.weight_block_size'"), std::string::npos)
      << error_of(j);
  j = glm52_json();
  j["quantization_config"] = {{"quant_method", "mxfp4"}, {"exclude", {"lm_head", 7}}};
  EXPECT_NE(error_of(j).find("quantization_config.exclude"), std::string::npos) << error_of(j);

  // An integral float is the integer it holds.
  j = glm52_json();
  const int64_t hidden = j["hidden_size"].get<int64_t>();
  j["hidden_size"] = static_cast<double>(hidden);
  EXPECT_EQ(ModelConfig::from_json(j, "config.json").hidden_size, hidden);
}

// Each load-time range check refuses the config and names the field, before anything is sized
// from it (a billion layers or experts used to end in std::bad_alloc after a minute).
TEST(Config, RangeChecksNameTheField) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::string, json>> cases = {
      {"max_position_embeddings", 0},
      {"max_position_embeddings", -5},
      {"max_position_embeddings", int64_t{1} << 40},
      {"num_hidden_layers", 1e9},
      {"num_hidden_layers", 0},
      {"hidden_size", 0},
      {"hidden_size", int64_t{1} << 20},
      {"vocab_size", int64_t{1} << 30},
      {"num_attention_heads", 1000000},
      {"kv_lora_rank", -1},
      {"kv_lora_rank", int64_t{1} << 30},
      {"qk_nope_head_dim", int64_t{1} << 30},
      {"qk_rope_head_dim", int64_t{1} << 30},
      {"v_head_dim", 0},
      {"v_head_dim", int64_t{1} << 30},
      {"intermediate_size", int64_t{1} << 30},
      {"moe_intermediate_size", 0},
      {"moe_intermediate_size", int64_t{1} << 30},
      {"n_routed_experts", 1e9},
      {"n_routed_experts", 0},
      {"num_experts_per_tok", 0},
      {"num_experts_per_tok", 257},  // > n_routed_experts = 256
      {"index_n_heads", 0},
      {"index_n_heads", 1000000},
      {"index_head_dim", int64_t{1} << 30},
      {"index_topk", 0},
      {"index_topk", int64_t{1} << 30},
      {"n_group", 3},     // does not divide 256
      {"topk_group", 2},  // > n_group = 1
      {"rms_norm_eps", 0.0},
      {"rms_norm_eps", -1e-6},
      {"rms_norm_eps", inf},
      {"routed_scaling_factor", 0.0},
      {"routed_scaling_factor", -inf},
      {"bos_token_id", 154880},  // == vocab_size
  };
  for (const auto& [field, value] : cases) {
    json j = glm52_json();
    j[field] = value;
    const std::string e = error_of(j);
    EXPECT_NE(e.find("'" + field + "'"), std::string::npos) << field << "=" << value << ": " << e;
    EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  }
  // rope_theta lives in rope_parameters (and in legacy configs at the top level).
  for (const double theta : {0.0, -1.0, inf}) {
    json j = glm52_json();
    j["rope_parameters"]["rope_theta"] = theta;
    EXPECT_NE(error_of(j).find("'rope_theta'"), std::string::npos) << theta << ": " << error_of(j);
  }
  json legacy = preset_config("deepseek-v3").to_json();
  legacy.erase("rope_parameters");
  legacy["rope_theta"] = 0;
  EXPECT_NE(error_of(legacy).find("'rope_theta'"), std::string::npos) << error_of(legacy);
  // Every eos id must be a token.
  for (const json& eos : {json(154880), json{154820, -1}, json{1, 1 << 30}}) {
    json j = glm52_json();
    j["eos_token_id"] = eos;
    EXPECT_NE(error_of(j).find("'eos_token_id'"), std::string::npos) << eos << ": " << error_of(j);
  }
  // The real presets stay inside every limit.
  for (const auto& name : preset_names())
    EXPECT_EQ(error_of(preset_config(name).to_json()), "") << name;
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
