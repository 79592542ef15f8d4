// Multi-head latent attention with the DSA indexer (GLM-5 / DeepSeek-V3.2) or dense causal
// attention (DeepSeek-V3).
#pragma once

#include "model/layer_context.h"

namespace tandem {

// a: [T, D] normalized hidden states. Writes this layer's latent rows (and index keys) into
// the cache, then attends. topk: [T, K] in/out: a full-indexer layer replaces it with its own
// selection; a shared (IndexShare) layer reads the previous one. Returns [T, D].
Tensor mla_attention(const LayerContext& ctx, const AttentionWeights& w, const Tensor& a,
                     int64_t cache_layer, bool run_indexer, Tensor& topk);

}  // namespace tandem
