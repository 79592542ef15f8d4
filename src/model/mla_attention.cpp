#include "model/mla_attention.h"

#include <cmath>

#include "core/error.h"
#include "ops/ops.h"

namespace tandem {

namespace {

// DSA lightning indexer: picks, per query token, the top-k cached positions to attend to.
// k_raw: [T, Di] the wk projection of a when the fused projection computed it, else undefined.
Tensor run_indexer(const LayerContext& ctx, const IndexerWeights& w, const Tensor& a,
                   const Tensor& cq, const Tensor& k_raw, int64_t cache_layer) {
  const ModelConfig& c = ctx.config;
  Workspace& ws = ctx.ws;
  const int64_t T = a.size(0), Hi = c.index_n_heads, Di = c.index_head_dim, dr = c.qk_rope_head_dim;
  const RopeParams rope{c.indexer_rope_interleave, ctx.weights.rope_attention_factor};
  const Tensor& pos = ctx.batch.attn.token_pos;
  Tensor q = ops::linear(ws, cq, w.wq_b).view({T, Hi, Di});  // [T, Hi, Di], per head [rope | nope]
  Tensor q_pe = q.narrow(2, 0, dr);                          // [T, Hi, dr]
  ops::rope(q_pe, pos, ctx.weights.rope_inv_freq, rope);
  Tensor k = ops::layer_norm(ws, k_raw.defined() ? k_raw : ops::linear(ws, a, w.wk), w.k_norm_w,
                             w.k_norm_b, 1e-6f);  // [T, Di]
  Tensor k_pe = k.narrow(1, 0, dr).unsqueeze(1);  // [T, 1, dr]
  ops::rope(k_pe, pos, ctx.weights.rope_inv_freq, rope);
  ops::kv_store(k, ctx.batch.attn, ctx.cache.index_keys(cache_layer));
  Tensor head_w =
      ops::linear(ws, a, w.weights_proj, DType::F32);  // [T, Hi], scales folded in at load
  return ops::indexer_topk(ws, q, head_w, ctx.cache.index_keys(cache_layer), ctx.batch.attn,
                           c.index_topk);  // [T, K]
}

}  // namespace

Tensor mla_attention(const LayerContext& ctx, const AttentionWeights& w, const Tensor& a,
                     int64_t cache_layer, bool run_idx, Tensor& topk) {
  const ModelConfig& c = ctx.config;
  Workspace& ws = ctx.ws;
  // H: this rank's heads (all of them unless sharded).
  const int64_t T = a.size(0),
                H = ctx.shard ? head_span(c, *ctx.shard).size : c.num_attention_heads;
  const int64_t dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
  const int64_t rkv = c.kv_lora_rank, dqk = dn + dr;
  const float scale = static_cast<float>(c.softmax_scale());
  const RopeParams rope{c.rope_interleave, ctx.weights.rope_attention_factor};
  const Tensor& pos = ctx.batch.attn.token_pos;
  Tensor& pool = ctx.cache.latent(cache_layer);  // [S, rkv + dr] (FP8: [S, 656] bytes)

  // The projections of a: the query latent, the cached latent row, the indexer key. One GEMM
  // when the loader fused them (column ranges of its output), else one each.
  Tensor cq_raw;  // [T, rq]
  Tensor ckv;     // [T, rkv + dr]
  Tensor k_raw;   // [T, Di] indexer key, fused path only
  if (w.qkv_a_proj.defined()) {
    const int64_t rq = w.q_a_proj.out_features();
    Tensor qkv = ops::linear(ws, a, w.qkv_a_proj);  // [T, rq + rkv + dr (+ Di)]
    cq_raw = qkv.narrow(1, 0, rq);
    ckv = qkv.narrow(1, rq, rkv + dr);
    if (w.indexer) k_raw = qkv.narrow(1, rq + rkv + dr, w.indexer->wk.out_features());
  } else {
    if (w.q_a_proj.defined()) cq_raw = ops::linear(ws, a, w.q_a_proj);
    ckv = ops::linear(ws, a, w.kv_a_proj);
  }

  Tensor cq;  // [T, rq]: the normed query latent, also the indexer's query input
  if (w.q_a_proj.defined())
    cq = ops::rms_norm(ws, cq_raw, w.q_a_layernorm, static_cast<float>(c.rms_norm_eps));

  {
    // Beside the query path (a GEMM that streams the q_b weights), a side branch writes the
    // cached latent row and runs the indexer: short latency-bound kernels that would otherwise
    // leave the memory system idle between them.
    ops::SideBranch side(a.device());
    // The cached latent row [c_kv | k_pe]: c_kv normalized, k_pe rotated (one shared rope head),
    // written straight into the pool.
    ops::mla_kv_store(ckv, w.kv_a_layernorm, static_cast<float>(c.rms_norm_eps),
                      ctx.weights.rope_inv_freq, rope, ctx.batch.attn, pool);

    if (c.has_indexer && run_idx) {
      TD_CHECK(w.indexer.has_value(), "layer {} runs an indexer but has no indexer weights",
               cache_layer);
      topk = run_indexer(ctx, *w.indexer, a, cq, k_raw, cache_layer);
    }
  }

  // Queries: q = q_b(RMSNorm(q_a(a))), per head [nope | rope].
  Tensor q = w.q_a_proj.defined() ? ops::linear(ws, cq, w.q_b_proj).view({T, H, dqk})
                                  : ops::linear(ws, a, w.q_proj).view({T, H, dqk});  // [T, H, dqk]
  Tensor q_pe = q.narrow(2, dn, dr);                                                 // [T, H, dr]
  ops::rope(q_pe, pos, ctx.weights.rope_inv_freq, rope);

  // Decode and verify batches always take the absorbed form. Extend batches of sparse (DSA)
  // layers take it too: every query token attends to at most index_topk latent rows, the same
  // rows for all its heads, so the absorbed form reads each selected 576-value row once per
  // token (MQA, as DeepSeek-V3.2's sparse kernels run prefill) where the naive form expands every
  // cached latent to per-head keys and values (28,672 values per row at GLM-5.2 sizes) and
  // reads those per head: 64x the bytes for 2.1x the multiply-adds, and no [sumL, H, dn + dv]
  // buffer, whose size grows with the context. Dense causal attention keeps the naive form:
  // there a token attends to every earlier position and the naive form does half the
  // multiply-adds.
  const bool naive = ctx.batch.mode == ForwardMode::kExtend &&
                     (ctx.extend_attention == ExtendAttention::kNaive ||
                      (ctx.extend_attention == ExtendAttention::kAuto && !c.has_indexer));
  Tensor o;  // [T, H, dv]
  if (naive) {
    ops::join_side(a.device());  // the gather reads the rows the branch stored
    // Naive form: expand every cached latent of each sequence to per-head keys and values.
    // [sumL, rkv + dr] in the compute dtype (an FP8 cache's rows come out dequantized)
    Tensor lat = ctx.cache.fp8() ? ops::kv_gather_fp8(ws, pool, ctx.batch.attn, ctx.batch.total_kv,
                                                      rkv, dr, ckv.dtype())
                                 : ops::kv_gather(ws, pool, ctx.batch.attn, ctx.batch.total_kv);
    Tensor kv = ops::linear(ws, lat.narrow(1, 0, rkv), w.kv_b_proj).view({lat.size(0), H, dn + dv});
    o = ops::mla_prefill(ws, q, kv, lat.narrow(1, rkv, dr), ctx.batch.attn,
                         c.has_indexer ? topk : Tensor(), scale, dv);
  } else {
    // Absorbed form: q_nope . W_UK turns each head's query into the latent space, attention
    // runs over the 576-dim rows directly, and W_UV maps the attended latent to values.
    // The two parts are written straight into their columns of q_abs (a concatenation pass
    // over the [T, H, 576] rows took 0.3-0.4 ms of a 4,096-token prefill).
    Tensor q_abs = ws.alloc({T, H, rkv + dr}, q.dtype());  // [T, H, rkv + dr]
    Tensor q_lat = q_abs.narrow(2, 0, rkv);                // [T, H, rkv], rows of rkv + dr
    ops::head_matmul_into(q.narrow(2, 0, dn), w.w_uk_t, q_lat);
    Tensor q_abs_pe = q_abs.narrow(2, rkv, dr).merge_dims(0);  // [T * H, dr], rows of rkv + dr
    ops::copy(q_pe.merge_dims(0), q_abs_pe);
    ops::join_side(a.device());  // attention reads the stored row and the indexer's top-k
    Tensor z = ops::mla_decode(ws, q_abs, pool, ctx.batch.attn, c.has_indexer ? topk : Tensor(),
                               scale, rkv);  // [T, H, rkv]
    o = ops::head_matmul(ws, z, w.w_uv);     // [T, H, dv]
  }
  return ops::linear(ws, o.view({T, H * dv}), w.o_proj);  // [T, D]
}

}  // namespace tandem
