// Model hyper-parameters from a Hugging Face config.json, for GlmMoeDsaForCausalLM (GLM-5, 5.1,
// 5.2), DeepseekV32ForCausalLM and DeepseekV3ForCausalLM. Parsing resolves every per-layer choice
// (dense or MoE MLP, full or shared indexer) into explicit lists, and validation names the field
// that makes a config unrunnable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/quant_config.h"

namespace tandem {

enum class Arch { kGlmMoeDsa, kDeepseekV32, kDeepseekV3 };

struct RopeConfig {
  std::string type = "default";  // "default" or "yarn"
  double theta = 10000.0;
  // YaRN (DeepSeek): frequencies are blended between interpolated and extrapolated.
  double factor = 1.0;
  int64_t original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 0.0;          // 0 = absent
  double mscale_all_dim = 0.0;  // 0 = absent
  bool truncate = true;
};

// Upper bounds checked at load, well above every real model (GLM-5.x, DeepSeek-V3.x: 78 layers,
// hidden 7168, vocab 154880, 256 experts, 1M positions). They exist so that a corrupt or hostile
// config.json is refused naming the field, before anything is sized from it.
struct ConfigLimits {
  static constexpr int64_t kMaxLayers = 1024;                  // num_hidden_layers
  static constexpr int64_t kMaxHiddenSize = int64_t{1} << 17;  // hidden_size
  static constexpr int64_t kMaxVocabSize = int64_t{1} << 24;   // vocab_size
  static constexpr int64_t kMaxHeads = int64_t{1} << 12;       // num_attention_heads, index_n_heads
  static constexpr int64_t kMaxHeadDim = int64_t{1} << 16;     // *_head_dim, *_lora_rank
  static constexpr int64_t kMaxIntermediate = int64_t{1} << 20;  // intermediate_size, moe_...
  static constexpr int64_t kMaxExperts = int64_t{1} << 16;       // n_routed_experts, n_shared_...
  static constexpr int64_t kMaxPositions = int64_t{1} << 24;     // max_position_embeddings
  static constexpr int64_t kMaxIndexTopk = int64_t{1} << 20;     // index_topk
};

struct ModelConfig {
  Arch arch = Arch::kGlmMoeDsa;
  std::string architecture;  // as spelled in config.json
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;  // 0: no q compression (q_proj)
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // MLP
  int64_t intermediate_size = 0;      // dense layers
  int64_t moe_intermediate_size = 0;  // each routed expert and, times n_shared, the shared one
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1.0;
  bool norm_topk_prob = true;
  std::vector<bool> layer_is_moe;  // [num_hidden_layers]
  // Norms and positions
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  bool rope_interleave = true;          // MLA q_pe/k_pe pairing
  bool indexer_rope_interleave = true;  // DSA indexer pairing (GLM: true, DeepSeek-V3.2: false)
  int64_t max_position_embeddings = 0;
  // DSA indexer
  bool has_indexer = false;
  int64_t index_n_heads = 0;
  int64_t index_head_dim = 0;
  int64_t index_topk = 0;
  std::vector<bool> indexer_full;  // [num_hidden_layers]; false = reuse the last full layer's top-k
  bool index_share_for_mtp_iteration = false;
  // MTP
  int64_t num_nextn_predict_layers = 0;
  // Tokens
  bool tie_word_embeddings = false;
  std::vector<int64_t> eos_token_ids;
  int64_t bos_token_id = -1;
  std::string torch_dtype = "bfloat16";
  QuantConfig quant;

  static ModelConfig from_json(const nlohmann::json& j, const std::string& source);
  static ModelConfig from_file(const std::string& path);
  // Throws tandem::Error naming the first inconsistent field.
  void validate(const std::string& source) const;
  // Full config.json in the Hugging Face spelling (what make-checkpoint writes).
  nlohmann::json to_json() const;

  int64_t qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }  // 576 on real models
  // Attention scale, (dn+dr)^-0.5, times mscale^2 under YaRN with mscale_all_dim.
  double softmax_scale() const;
  bool is_moe_layer(int64_t l) const { return layer_is_moe.at(static_cast<size_t>(l)); }
  // Index of the MTP layer in checkpoint names: model.layers.{num_hidden_layers}.
  int64_t mtp_layer_index() const { return num_hidden_layers; }
  bool has_mtp() const { return num_nextn_predict_layers > 0; }
  std::string arch_name() const;
};

// The IndexShare rule: layer i runs its own indexer iff max(i - offset + 1, 0) % freq == 0.
bool indexshare_layer_is_full(int64_t layer, int64_t freq, int64_t offset);

}  // namespace tandem
