#include "model/presets.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tandem {

namespace {

using json = nlohmann::json;

json glm5_real() {
  return {{"architectures", {"GlmMoeDsaForCausalLM"}},
          {"hidden_size", 6144},
          {"num_hidden_layers", 78},
          {"vocab_size", 154880},
          {"num_attention_heads", 64},
          {"q_lora_rank", 2048},
          {"kv_lora_rank", 512},
          {"qk_nope_head_dim", 192},
          {"qk_rope_head_dim", 64},
          {"v_head_dim", 256},
          {"intermediate_size", 12288},
          {"moe_intermediate_size", 2048},
          {"n_routed_experts", 256},
          {"n_shared_experts", 1},
          {"num_experts_per_tok", 8},
          {"first_k_dense_replace", 3},
          {"n_group", 1},
          {"topk_group", 1},
          {"routed_scaling_factor", 2.5},
          {"norm_topk_prob", true},
          {"rms_norm_eps", 1e-5},
          {"rope_parameters", {{"rope_theta", 1e6}, {"rope_type", "default"}}},
          {"rope_interleave", true},
          {"indexer_rope_interleave", true},
          {"max_position_embeddings", 202752},
          {"num_nextn_predict_layers", 1},
          {"index_n_heads", 32},
          {"index_head_dim", 128},
          {"index_topk", 2048},
          {"eos_token_id", {154820, 154827, 154829}},
          {"tie_word_embeddings", false}};
}

json glm52_real() {
  json j = glm5_real();
  j["max_position_embeddings"] = 1048576;
  j["rope_parameters"]["rope_theta"] = 8e6;
  j["index_topk_freq"] = 4;
  j["index_skip_topk_offset"] = 3;
  j["index_share_for_mtp_iteration"] = true;
  return j;
}

json deepseek_v3_real() {
  return {{"architectures", {"DeepseekV3ForCausalLM"}},
          {"hidden_size", 7168},
          {"num_hidden_layers", 61},
          {"vocab_size", 129280},
          {"num_attention_heads", 128},
          {"q_lora_rank", 1536},
          {"kv_lora_rank", 512},
          {"qk_nope_head_dim", 128},
          {"qk_rope_head_dim", 64},
          {"v_head_dim", 128},
          {"intermediate_size", 18432},
          {"moe_intermediate_size", 2048},
          {"n_routed_experts", 256},
          {"n_shared_experts", 1},
          {"num_experts_per_tok", 8},
          {"first_k_dense_replace", 3},
          {"n_group", 8},
          {"topk_group", 4},
          {"routed_scaling_factor", 2.5},
          {"norm_topk_prob", true},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000},
          {"rope_scaling",
           {{"type", "yarn"},
            {"factor", 40},
            {"original_max_position_embeddings", 4096},
            {"beta_fast", 32},
            {"beta_slow", 1},
            {"mscale", 1.0},
            {"mscale_all_dim", 1.0}}},
          {"rope_interleave", true},
          {"max_position_embeddings", 163840},
          {"num_nextn_predict_layers", 1},
          {"bos_token_id", 0},
          {"eos_token_id", 1},
          {"tie_word_embeddings", false}};
}

json deepseek_v32_real() {
  json j = deepseek_v3_real();
  j["architectures"] = {"DeepseekV32ForCausalLM"};
  j["index_n_heads"] = 64;
  j["index_head_dim"] = 128;
  j["index_topk"] = 2048;
  j["indexer_rope_interleave"] = false;
  return j;
}

// Tiny shapes keep every mechanism live: index_topk below typical prompt lengths so the
// indexer really selects, several experts per token, grouped routing for DeepSeek.
json tiny(json j, int64_t vocab) {
  j["hidden_size"] = 64;
  j["num_hidden_layers"] = 6;
  j["vocab_size"] = vocab;
  j["num_attention_heads"] = 4;
  j["q_lora_rank"] = 32;
  j["kv_lora_rank"] = 32;
  j["qk_nope_head_dim"] = 16;
  j["qk_rope_head_dim"] = 8;
  j["v_head_dim"] = 16;
  j["intermediate_size"] = 128;
  j["moe_intermediate_size"] = 32;
  j["first_k_dense_replace"] = 1;
  j["max_position_embeddings"] = 4096;
  if (j.contains("index_topk")) {
    j["index_n_heads"] = 16;  // few heads make exact top-k ties at score 0 common
    j["index_head_dim"] = 16;
    j["index_topk"] = 8;
  }
  if (j["n_group"].get<int64_t>() > 1) {
    j["n_routed_experts"] = 16;
    j["n_group"] = 4;
    j["topk_group"] = 2;
    j["num_experts_per_tok"] = 4;
    j["rope_scaling"]["factor"] = 4;
    j["rope_scaling"]["original_max_position_embeddings"] = 1024;
  } else {
    j["n_routed_experts"] = 8;
    j["num_experts_per_tok"] = 2;
  }
  // Byte-level tokenizer ids: 256 bytes, then the special tokens (see make_checkpoint).
  j["eos_token_id"] = {256, 260, 262};  // <|endoftext|>, <|user|>, <|observation|>
  j["bos_token_id"] = 257;
  return j;
}

}  // namespace

std::vector<std::string> preset_names() {
  return {"glm5",      "glm5.2",      "deepseek-v3",      "deepseek-v3.2",
          "tiny-glm5", "tiny-glm5.2", "tiny-deepseek-v3", "tiny-deepseek-v3.2"};
}

ModelConfig preset_config(const std::string& name) {
  json j;
  constexpr int64_t kTinyVocab = 272;  // 256 bytes + 16 special tokens
  if (name == "glm5")
    j = glm5_real();
  else if (name == "glm5.2")
    j = glm52_real();
  else if (name == "deepseek-v3")
    j = deepseek_v3_real();
  else if (name == "deepseek-v3.2")
    j = deepseek_v32_real();
  else if (name == "tiny-glm5")
    j = tiny(glm5_real(), kTinyVocab);
  else if (name == "tiny-glm5.2")
    j = tiny(glm52_real(), kTinyVocab);
  else if (name == "tiny-deepseek-v3")
    j = tiny(deepseek_v3_real(), kTinyVocab);
  else if (name == "tiny-deepseek-v3.2")
    j = tiny(deepseek_v32_real(), kTinyVocab);
  else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    fail("unknown preset '{}' (known: {})", name, names);
  }
  return ModelConfig::from_json(j, "preset " + name);
}

}  // namespace tandem
