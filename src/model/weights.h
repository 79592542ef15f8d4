// The weights of one model, per module, in the form the backend computes with. Loaded by
// loader.cpp through the name table in weight_names.h.
#pragma once

#include <optional>
#include <vector>

#include "core/tensor.h"
#include "ops/weight.h"

namespace tandem {

struct IndexerWeights {
  Weight wq_b;          // [Hi * Di, rq]
  Weight wk;            // [Di, D]
  Tensor k_norm_w;      // [Di]
  Tensor k_norm_b;      // [Di]
  Weight weights_proj;  // [Hi, D]
};

struct AttentionWeights {
  Weight q_a_proj;       // [rq, D]; undefined when q_lora_rank == 0
  Tensor q_a_layernorm;  // [rq]
  Weight q_b_proj;       // [H * (dn + dr), rq]
  Weight q_proj;         // [H * (dn + dr), D] when q_lora_rank == 0
  Weight kv_a_proj;      // [rkv + dr, D]
  // [rq + rkv + dr (+ Di), D]: q_a | kv_a (| indexer wk), one GEMM over the normed hidden state;
  // set by fuse_attention_projections, which turns those parts into row views of it.
  Weight qkv_a_proj;
  Tensor kv_a_layernorm;                  // [rkv]
  Weight kv_b_proj;                       // [H * (dn + dv), rkv]
  Tensor w_uk_t;                          // [H, rkv, dn]: q_nope -> latent query (absorbed form)
  Tensor w_uv;                            // [H, dv, rkv]: attended latent -> per-head value
  Weight o_proj;                          // [D, H * dv]
  std::optional<IndexerWeights> indexer;  // full-indexer layers only
};

struct MlpWeights {
  Weight gate_up;  // [2I, D]: gate_proj rows then up_proj rows
  Weight down;     // [D, I]
};

struct MoeWeights {
  Weight router;                     // [E, D], computed in fp32
  Tensor score_bias;                 // [E] f32 e_score_correction_bias
  Weight experts_gate_up;            // [E, 2I, D]: each expert's gate rows then up rows
  Weight experts_down;               // [E, D, I]
  std::optional<MlpWeights> shared;  // intermediate I * n_shared_experts
};

struct LayerWeights {
  Tensor input_norm;      // [D]
  Tensor post_attn_norm;  // [D]
  AttentionWeights attn;
  std::optional<MlpWeights> mlp;  // dense layers
  std::optional<MoeWeights> moe;  // MoE layers
};

struct MtpWeights {
  Tensor enorm;             // [D]
  Tensor hnorm;             // [D]
  Weight eh_proj;           // [D, 2D]: columns [0, D) see the embedding, [D, 2D) the hidden state
  Tensor shared_head_norm;  // [D]
  LayerWeights layer;
};

struct ModelWeights {
  Tensor embed;  // [V, D]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [D]
  Weight lm_head;     // [V, D]
  std::optional<MtpWeights> mtp;
  Tensor rope_inv_freq;  // [dr / 2] f32
  float rope_attention_factor = 1.0f;
};

}  // namespace tandem
