// One pre-norm decoder layer: h += Attn(RMSNorm(h)); h += MLP(RMSNorm(h)).
#pragma once

#include "model/layer_context.h"

namespace tandem {

// h: [T, D] residual stream, updated in place. a: [T, D], on entry the layer's input norm of h.
// With next_norm ([D], the next layer's input norm or the final norm), the MLP's output is added
// and that norm taken in one pass (ops::add_rms_norm), leaving a = RMSNorm_next(h) for the next
// layer; without it a is left as it is. topk: IndexShare state (see mla_attention).
void decoder_layer(const LayerContext& ctx, const LayerWeights& w, int64_t cache_layer,
                   bool run_indexer, Tensor& h, Tensor& a, const Tensor& next_norm, Tensor& topk);

// The same layer on h alone (its input norm computed here, nothing left for a next one).
void decoder_layer(const LayerContext& ctx, const LayerWeights& w, int64_t cache_layer,
                   bool run_indexer, Tensor& h, Tensor& topk);

}  // namespace tandem
