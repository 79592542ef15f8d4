// The feed-forward half of a decoder layer: a dense SwiGLU MLP or the routed MoE with its
// shared expert.
#pragma once

#include "model/layer_context.h"

namespace tandem {

// f: [T, D] post-attention-normalized hidden states -> [T, D]
Tensor dense_mlp(Workspace& ws, const MlpWeights& w, const Tensor& f);
Tensor moe_block(const LayerContext& ctx, const MoeWeights& w, const Tensor& f);

}  // namespace tandem
