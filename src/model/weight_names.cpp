#include "model/weight_names.h"

#include <fmt/format.h>

#include "model/quant_scheme.h"

namespace tandem {

namespace {

struct TableBuilder {
  const ModelConfig& c;
  std::vector<TensorSpec> out;

  void add(std::string module, std::string param, Slot slot, int64_t layer,
           std::vector<int64_t> shape, bool linear, int64_t expert = -1, bool optional = false) {
    out.push_back({std::move(module), std::move(param), slot, layer, expert, std::move(shape),
                   linear, optional});
  }

  void decoder_layer(int64_t l, bool moe, bool full_indexer) {
    const std::string p = fmt::format("model.layers.{}.", l);
    const int64_t D = c.hidden_size, H = c.num_attention_heads, dqk = c.qk_head_dim();
    add(p + "input_layernorm", "weight", Slot::kInputNorm, l, {D}, false);
    add(p + "post_attention_layernorm", "weight", Slot::kPostAttnNorm, l, {D}, false);
    const std::string a = p + "self_attn.";
    if (c.q_lora_rank > 0) {
      add(a + "q_a_proj", "weight", Slot::kQaProj, l, {c.q_lora_rank, D}, true);
      add(a + "q_a_layernorm", "weight", Slot::kQaNorm, l, {c.q_lora_rank}, false);
      add(a + "q_b_proj", "weight", Slot::kQbProj, l, {H * dqk, c.q_lora_rank}, true);
    } else {
      add(a + "q_proj", "weight", Slot::kQProj, l, {H * dqk, D}, true);
    }
    add(a + "kv_a_proj_with_mqa", "weight", Slot::kKvaProj, l,
        {c.kv_lora_rank + c.qk_rope_head_dim, D}, true);
    add(a + "kv_a_layernorm", "weight", Slot::kKvaNorm, l, {c.kv_lora_rank}, false);
    add(a + "kv_b_proj", "weight", Slot::kKvbProj, l,
        {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}, true);
    add(a + "o_proj", "weight", Slot::kOProj, l, {D, H * c.v_head_dim}, true);
    if (c.has_indexer && full_indexer) {
      const std::string ix = a + "indexer.";
      const int64_t rq = c.q_lora_rank > 0 ? c.q_lora_rank : D;
      add(ix + "wq_b", "weight", Slot::kIdxWqb, l, {c.index_n_heads * c.index_head_dim, rq}, true);
      add(ix + "wk", "weight", Slot::kIdxWk, l, {c.index_head_dim, D}, true);
      add(ix + "k_norm", "weight", Slot::kIdxKNormW, l, {c.index_head_dim}, false);
      add(ix + "k_norm", "bias", Slot::kIdxKNormB, l, {c.index_head_dim}, false);
      add(ix + "weights_proj", "weight", Slot::kIdxWeightsProj, l, {c.index_n_heads, D}, true);
    }
    const std::string m = p + "mlp.";
    if (!moe) {
      add(m + "gate_proj", "weight", Slot::kMlpGate, l, {c.intermediate_size, D}, true);
      add(m + "up_proj", "weight", Slot::kMlpUp, l, {c.intermediate_size, D}, true);
      add(m + "down_proj", "weight", Slot::kMlpDown, l, {D, c.intermediate_size}, true);
      return;
    }
    const int64_t I = c.moe_intermediate_size;
    add(m + "gate", "weight", Slot::kRouter, l, {c.n_routed_experts, D}, true);
    add(m + "gate", "e_score_correction_bias", Slot::kRouterBias, l, {c.n_routed_experts}, false);
    for (int64_t e = 0; e < c.n_routed_experts; ++e) {
      const std::string x = fmt::format("{}experts.{}.", m, e);
      add(x + "gate_proj", "weight", Slot::kExpertGate, l, {I, D}, true, e);
      add(x + "up_proj", "weight", Slot::kExpertUp, l, {I, D}, true, e);
      add(x + "down_proj", "weight", Slot::kExpertDown, l, {D, I}, true, e);
    }
    if (c.n_shared_experts > 0) {
      const int64_t Is = I * c.n_shared_experts;
      add(m + "shared_experts.gate_proj", "weight", Slot::kSharedGate, l, {Is, D}, true);
      add(m + "shared_experts.up_proj", "weight", Slot::kSharedUp, l, {Is, D}, true);
      add(m + "shared_experts.down_proj", "weight", Slot::kSharedDown, l, {D, Is}, true);
    }
  }
};

}  // namespace

std::vector<TensorSpec> weight_name_table(const ModelConfig& c, bool include_mtp) {
  TableBuilder b{c, {}};
  const int64_t D = c.hidden_size, V = c.vocab_size;
  b.add("model.embed_tokens", "weight", Slot::kEmbed, -1, {V, D}, false);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    b.decoder_layer(l, c.is_moe_layer(l), !c.has_indexer || c.indexer_full[static_cast<size_t>(l)]);
  b.add("model.norm", "weight", Slot::kFinalNorm, -1, {D}, false);
  if (!c.tie_word_embeddings) b.add("lm_head", "weight", Slot::kLmHead, -1, {V, D}, false);
  if (include_mtp && c.has_mtp()) {
    const int64_t l = c.mtp_layer_index();
    const std::string p = fmt::format("model.layers.{}.", l);
    b.add(p + "enorm", "weight", Slot::kMtpEnorm, l, {D}, false);
    b.add(p + "hnorm", "weight", Slot::kMtpHnorm, l, {D}, false);
    b.add(p + "eh_proj", "weight", Slot::kMtpEhProj, l, {D, 2 * D}, true);
    b.add(p + "shared_head.norm", "weight", Slot::kMtpHeadNorm, l, {D}, false);
    // DeepSeek ships copies of the embedding and head here; GLM shares the main model's.
    b.add(p + "embed_tokens", "weight", Slot::kMtpEmbed, l, {V, D}, false, -1, /*optional=*/true);
    b.add(p + "shared_head.head", "weight", Slot::kMtpHead, l, {V, D}, false, -1,
          /*optional=*/true);
    // The MTP block is a MoE decoder layer with its own (always full) indexer.
    b.decoder_layer(l, /*moe=*/c.n_routed_experts > 0, /*full_indexer=*/true);
  }
  return b.out;
}

bool always_high_precision(Slot s) {
  switch (s) {
    case Slot::kRouter:
    case Slot::kIdxWeightsProj:
    case Slot::kMtpEhProj:
    case Slot::kEmbed:
    case Slot::kLmHead:
    case Slot::kMtpEmbed:
    case Slot::kMtpHead:
      return true;
    default:
      return false;
  }
}

bool expects_quantized(const ModelConfig& c, const TensorSpec& s) {
  const QuantScheme q = quant_scheme(c, s);
  return q.format != WeightFormat::kDense && !q.online;
}

}  // namespace tandem
