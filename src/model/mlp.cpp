#include "model/mlp.h"

#include "ops/ops.h"

namespace tandem {

Tensor dense_mlp(Workspace& ws, const MlpWeights& w, const Tensor& f) {
  // down(silu(gate(f)) * up(f)), with gate and up fused into one [2I, D] weight.
  Tensor gu = ops::linear(ws, f, w.gate_up);              // [T, 2I]
  return ops::linear(ws, ops::silu_mul(ws, gu), w.down);  // [T, D]
}

// Tokens from which the shared expert's side branch joins the main stream before the routed
// experts rather than after them (see moe_block).
constexpr int64_t kJoinBeforeExpertsTokens = 8;

Tensor moe_block(const LayerContext& ctx, const MoeWeights& w, const Tensor& f) {
  const ModelConfig& c = ctx.config;
  Workspace& ws = ctx.ws;
  // The shared expert sees every token and is not scaled by the routing weights. It runs as a
  // side branch: its weight stream overlaps the router GEMV, routing and expert grouping, small
  // kernels that wait on each other and read almost nothing (and, for one token, the routed
  // experts too).
  Tensor shared;  // [T, D]
  if (w.shared) {
    ops::SideBranch side(f.device());
    shared = dense_mlp(ws, *w.shared, f);
  }
  // The router runs in fp32 (GLM-5.2's moe_router_dtype; the reference upcasts too).
  Tensor logits = ops::linear(ws, f, w.router, DType::F32);  // [T, E]
  RouteParams rp{c.num_experts_per_tok, c.n_group, c.topk_group, c.norm_topk_prob,
                 static_cast<float>(c.routed_scaling_factor)};
  if (ctx.shard && ctx.shard->ep_size > 1) {
    // Expert parallelism: the router sees every expert; this rank runs only the pairs routed to
    // its own, the other ranks' outputs arrive through the layer's all-reduce.
    const Span e = expert_span(c, *ctx.shard);
    rp.local_first = e.begin;
    rp.local_count = e.size;
  }
  const ops::Routing r = ops::moe_route(ws, logits, w.score_bias, rp);  // [T, k] ids, weights
  // From kJoinBeforeExpertsTokens tokens the branch joins before the routed experts start.
  // Measured on the H200 (docs/benchmarks.md): when the expert kernel's first blocks started
  // beside the branch's last GEMM, the whole 2 ms kernel ran 10-20% slower (a batch-32 GLM-5.2
  // MoE step 3.26-3.64 ms against 3.19), and forcing the expert kernel to the large
  // shared-memory carveout made it 30% slower everywhere. Our reading: SMs keep the GEMM's
  // shared-memory/L1 split while expert blocks keep arriving, and those kernels lean on L1 for
  // their activation rows. With one token the experts are short and the overlap is worth more
  // (~12 us a layer).
  const bool join_first = w.shared && f.size(0) >= kJoinBeforeExpertsTokens;
  if (join_first) ops::join_side(f.device());
  Tensor y = ops::moe_experts(ws, f, w.experts_gate_up, w.experts_down, r);  // [T, D]
  if (w.shared) {
    if (!join_first) ops::join_side(f.device());
    ops::add_inplace(y, shared);
  }
  return y;
}

}  // namespace tandem
