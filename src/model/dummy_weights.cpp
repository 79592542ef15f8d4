#include "model/dummy_weights.h"

#include <cmath>

#include "model/rope.h"
#include "ops/ops.h"

namespace tandem {

namespace {

class Filler {
 public:
  Filler(const LoadOptions& o, uint64_t seed) : o_(o), seed_(seed) {}
  // A [.., in] weight at unit activation scale: N(0, 1/in).
  Tensor weight(const Shape& s, DType dt) {
    Tensor t = Tensor::empty(s, dt, o_.device);
    ops::fill_random(t, seed_++,
                     static_cast<float>(1.0 / std::sqrt(static_cast<double>(s[s.ndim() - 1]))));
    return t;
  }
  Weight linear(int64_t out, int64_t in) {
    return Weight{weight({out, in}, o_.dtype), {}, WeightFormat::kDense};
  }
  Weight linear_f32(int64_t out, int64_t in) {
    return Weight{weight({out, in}, DType::F32), {}, WeightFormat::kDense};
  }
  Tensor vec(int64_t n, float scale) {
    Tensor t = Tensor::empty({n}, DType::F32, o_.device);
    ops::fill_random(t, seed_++, scale);
    return t;
  }

 private:
  const LoadOptions& o_;
  uint64_t seed_;
};

LayerWeights layer(const ModelConfig& c, Filler& f, bool moe, bool indexer) {
  const int64_t D = c.hidden_size, H = c.num_attention_heads, dn = c.qk_nope_head_dim,
                dr = c.qk_rope_head_dim;
  const int64_t dv = c.v_head_dim, rkv = c.kv_lora_rank, rq = c.q_lora_rank;
  LayerWeights w;
  w.input_norm = f.vec(D, 1.0f);
  w.post_attn_norm = f.vec(D, 1.0f);
  AttentionWeights& a = w.attn;
  if (rq > 0) {
    a.q_a_proj = f.linear(rq, D);
    a.q_a_layernorm = f.vec(rq, 1.0f);
    a.q_b_proj = f.linear(H * (dn + dr), rq);
  } else {
    a.q_proj = f.linear(H * (dn + dr), D);
  }
  a.kv_a_proj = f.linear(rkv + dr, D);
  a.kv_a_layernorm = f.vec(rkv, 1.0f);
  a.kv_b_proj = f.linear(H * (dn + dv), rkv);
  a.w_uk_t = f.weight({H, rkv, dn}, a.kv_b_proj.w.dtype());
  a.w_uv = f.weight({H, dv, rkv}, a.kv_b_proj.w.dtype());
  a.o_proj = f.linear(D, H * dv);
  if (indexer) {
    IndexerWeights& ix = a.indexer.emplace();
    ix.wq_b = f.linear(c.index_n_heads * c.index_head_dim, rq);
    ix.wk = f.linear(c.index_head_dim, D);
    ix.k_norm_w = f.vec(c.index_head_dim, 1.0f);
    ix.k_norm_b = f.vec(c.index_head_dim, 0.1f);
    ix.weights_proj = f.linear_f32(c.index_n_heads, D);
  }
  if (!moe) {
    MlpWeights& m = w.mlp.emplace();
    m.gate_up = f.linear(2 * c.intermediate_size, D);
    m.down = f.linear(D, c.intermediate_size);
    return w;
  }
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
  MoeWeights& m = w.moe.emplace();
  m.router = f.linear_f32(E, D);
  m.score_bias = f.vec(E, 0.01f);
  m.experts_gate_up = Weight::from_dense(f.weight({E, 2 * I, D}, a.kv_b_proj.w.dtype()));
  m.experts_down = Weight::from_dense(f.weight({E, D, I}, a.kv_b_proj.w.dtype()));
  if (c.n_shared_experts > 0) {
    MlpWeights& s = m.shared.emplace();
    s.gate_up = f.linear(2 * I * c.n_shared_experts, D);
    s.down = f.linear(D, I * c.n_shared_experts);
  }
  return w;
}

}  // namespace

ModelWeights dummy_weights(const ModelConfig& c, const LoadOptions& o, uint64_t seed) {
  Filler f(o, seed);
  ModelWeights mw;
  const int64_t D = c.hidden_size;
  mw.embed = Tensor::empty({c.vocab_size, D}, o.dtype, o.device);
  ops::fill_random(mw.embed, seed + 1000003, 1.0f);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    mw.layers.push_back(
        layer(c, f, c.is_moe_layer(l), !c.has_indexer || c.indexer_full[static_cast<size_t>(l)]));
  mw.final_norm = f.vec(D, 1.0f);
  mw.lm_head = f.linear(c.vocab_size, D);
  if (o.load_mtp && c.has_mtp()) {
    MtpWeights& m = mw.mtp.emplace();
    m.enorm = f.vec(D, 1.0f);
    m.hnorm = f.vec(D, 1.0f);
    m.eh_proj = f.linear(D, 2 * D);
    m.shared_head_norm = f.vec(D, 1.0f);
    m.layer = layer(c, f, c.n_routed_experts > 0, c.has_indexer);
  }
  const RopeTables rt = compute_rope_tables(c);
  Tensor inv = Tensor::from_vector(rt.inv_freq, {static_cast<int64_t>(rt.inv_freq.size())});
  mw.rope_inv_freq = o.device.is_cpu() ? inv : inv.to(o.device);
  mw.rope_attention_factor = rt.attention_factor;
  return mw;
}

}  // namespace tandem
