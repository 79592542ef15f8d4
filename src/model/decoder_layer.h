// One pre-norm decoder layer: h += Attn(RMSNorm(h)); h += MLP(RMSNorm(h)).
#pragma once

#include "model/layer_context.h"

namespace tandem {

// h: [T, D] residual stream, updated in place. topk: IndexShare state (see mla_attention).
void decoder_layer(const LayerContext& ctx, const LayerWeights& w, int64_t cache_layer,
                   bool run_indexer, Tensor& h, Tensor& topk);

}  // namespace tandem
