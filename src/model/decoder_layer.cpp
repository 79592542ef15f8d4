#include "model/decoder_layer.h"

#include "model/mla_attention.h"
#include "model/mlp.h"
#include "ops/ops.h"

namespace tandem {

void decoder_layer(const LayerContext& ctx, const LayerWeights& w, int64_t cache_layer,
                   bool run_indexer, Tensor& h, Tensor& topk) {
  const float eps = static_cast<float>(ctx.config.rms_norm_eps);
  Tensor a = ops::rms_norm(ctx.ws, h, w.input_norm, eps);  // [T, D]
  ops::add_inplace(h, mla_attention(ctx, w.attn, a, cache_layer, run_indexer, topk));
  Tensor f = ops::rms_norm(ctx.ws, h, w.post_attn_norm, eps);  // [T, D]
  ops::add_inplace(h, w.moe ? moe_block(ctx, *w.moe, f) : dense_mlp(ctx.ws, *w.mlp, f));
}

}  // namespace tandem
