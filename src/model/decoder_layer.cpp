#include "model/decoder_layer.h"

#include "model/mla_attention.h"
#include "model/mlp.h"
#include "ops/ops.h"

namespace tandem {

void decoder_layer(const LayerContext& ctx, const LayerWeights& w, int64_t cache_layer,
                   bool run_indexer, Tensor& h, Tensor& a, const Tensor& next_norm, Tensor& topk) {
  const float eps = static_cast<float>(ctx.config.rms_norm_eps);
  // The residual adds are fused with the norm that follows each of them: one pass over h instead
  // of an add and a norm (two short kernels fewer per layer).
  // Under tensor parallelism the attention and MLP outputs are this rank's partial sums (its
  // heads, its slice of the intermediate, its experts): all-reduced before the residual add.
  Tensor attn = mla_attention(ctx, w.attn, a, cache_layer, run_indexer, topk);  // [T, D]
  ctx.all_reduce(attn);
  const Tensor f = ops::add_rms_norm(ctx.ws, h, attn, w.post_attn_norm, eps);   // [T, D]
  Tensor m = w.moe ? moe_block(ctx, *w.moe, f) : dense_mlp(ctx.ws, *w.mlp, f);  // [T, D]
  ctx.all_reduce(m);
  if (next_norm.defined())
    ops::add_rms_norm(h, m, next_norm, eps, a);
  else
    ops::add_inplace(h, m);
}

void decoder_layer(const LayerContext& ctx, const LayerWeights& w, int64_t cache_layer,
                   bool run_indexer, Tensor& h, Tensor& topk) {
  Tensor a = ops::rms_norm(ctx.ws, h, w.input_norm, static_cast<float>(ctx.config.rms_norm_eps));
  decoder_layer(ctx, w, cache_layer, run_indexer, h, a, Tensor(), topk);
}

}  // namespace tandem
