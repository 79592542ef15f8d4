#include "model/mlp.h"

#include "ops/ops.h"

namespace tandem {

Tensor dense_mlp(Workspace& ws, const MlpWeights& w, const Tensor& f) {
  // down(silu(gate(f)) * up(f)), with gate and up fused into one [2I, D] weight.
  Tensor gu = ops::linear(ws, f, w.gate_up);              // [T, 2I]
  return ops::linear(ws, ops::silu_mul(ws, gu), w.down);  // [T, D]
}

Tensor moe_block(const LayerContext& ctx, const MoeWeights& w, const Tensor& f) {
  const ModelConfig& c = ctx.config;
  Workspace& ws = ctx.ws;
  // The router runs in fp32 (GLM-5.2's moe_router_dtype; the reference upcasts too).
  Tensor logits = ops::linear(ws, f, w.router, DType::F32);  // [T, E]
  const RouteParams rp{c.num_experts_per_tok, c.n_group, c.topk_group, c.norm_topk_prob,
                       static_cast<float>(c.routed_scaling_factor)};
  const ops::Routing r = ops::moe_route(ws, logits, w.score_bias, rp);       // [T, k] ids, weights
  Tensor y = ops::moe_experts(ws, f, w.experts_gate_up, w.experts_down, r);  // [T, D]
  // The shared expert sees every token and is not scaled by the routing weights.
  if (w.shared) ops::add_inplace(y, dense_mlp(ws, *w.shared, f));
  return y;
}

}  // namespace tandem
