#include "model/dummy_weights.h"

#include <cmath>

#include "core/rng.h"
#include "model/absorbed_mla.h"
#include "model/loader.h"
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
  // A linear weight [.., out, in] in the checkpoint's quantized layout when `fmt` says so:
  // e4m3 codes spread like block-quantized values (std 112 of max 448) under 128x128 block
  // scales, or e2m1 codes (std 2) under e8m0 scales per 32; either way about N(0, 1/in), with
  // scales jittered per block as real ones are. Dense otherwise.
  Weight maybe_quantized(const std::vector<int64_t>& shape, WeightFormat fmt, ActQuant act,
                         bool ue8m0 = false) {
    if (fmt == WeightFormat::kDense) return Weight::from_dense(weight(Shape(shape), o_.dtype));
    const bool fp8 = fmt == WeightFormat::kFp8Block;
    const int64_t in = shape.back(), out = shape[shape.size() - 2];
    const int64_t lead = shape.size() == 3 ? shape[0] : 1;
    Weight w;
    w.format = fmt;
    w.act = act;
    w.ue8m0 = ue8m0;
    w.block_n = fp8 ? 128 : 1;
    w.block_k = fp8 ? 128 : 32;
    std::vector<int64_t> code_shape = shape;
    if (!fp8) code_shape.back() /= 2;
    w.w = Tensor::empty(Shape(code_shape), fp8 ? DType::F8_E4M3 : DType::FP4X2, o_.device);
    const float code_std = fp8 ? 112.0f : 2.0f;
    ops::fill_random(w.w, seed_++, code_std);
    const int64_t nb = fp8 ? (out + 127) / 128 : out, kb = (in + w.block_k - 1) / w.block_k;
    std::vector<int64_t> scale_shape = {nb, kb};
    if (shape.size() == 3) scale_shape.insert(scale_shape.begin(), lead);
    Tensor host = Tensor::empty(Shape(scale_shape), fp8 ? DType::F32 : DType::U8);
    Rng rng(seed_++);
    const double target = 1.0 / (code_std * std::sqrt(static_cast<double>(in)));
    for (int64_t i = 0; i < host.numel(); ++i) {
      const double jitter = std::exp2(0.25 * (2.0 * rng.uniform() - 1.0));
      if (fp8)
        host.data<float>()[i] = static_cast<float>(target * jitter);
      else
        static_cast<uint8_t*>(host.raw())[i] =
            static_cast<uint8_t>(127 + std::lround(std::log2(target * jitter)));
    }
    w.scale = place_weight_scale(host, fmt, o_.device);
    return w;
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

// Which dummy weights take a quantized layout, as the real checkpoints store them: FP8
// (GLM-5.x-FP8, DeepSeek) quantizes every projection and MLP but kv_b_proj, the indexer's wk,
// routers and heads; Quark's MXFP4 only the routed experts, and keeps the MTP layer bf16.
struct DummyFormats {
  WeightFormat proj = WeightFormat::kDense, experts = WeightFormat::kDense;
  ActQuant proj_act = ActQuant::kNone, experts_act = ActQuant::kNone;
  bool ue8m0 = false;

  static DummyFormats of(const ModelConfig& c, bool mtp_layer) {
    DummyFormats d;
    if (c.quant.method == "fp8") {
      d.proj = d.experts = WeightFormat::kFp8Block;
      d.proj_act = d.experts_act = ActQuant::kFp8Group;
      d.ue8m0 = c.quant.ue8m0;
    } else if ((c.quant.method == "quark" || c.quant.method == "mxfp4") && !mtp_layer) {
      d.experts = WeightFormat::kMxfp4;
      d.experts_act = c.quant.method == "quark" ? ActQuant::kMxfp4 : ActQuant::kNone;
    }
    return d;
  }
};

// Shapes are this rank's share under tensor / expert parallelism (model/shard.h): its heads,
// its slice of each intermediate dimension, its experts.
LayerWeights layer(const ModelConfig& c, const ShardSpec& sh, Filler& f, bool moe, bool indexer,
                   const DummyFormats& q) {
  const auto proj = [&](int64_t out, int64_t in) {
    return f.maybe_quantized({out, in}, q.proj, q.proj_act, q.ue8m0);
  };
  const int64_t D = c.hidden_size, H = head_span(c, sh).size, dn = c.qk_nope_head_dim,
                dr = c.qk_rope_head_dim;
  const int64_t dv = c.v_head_dim, rkv = c.kv_lora_rank, rq = c.q_lora_rank;
  LayerWeights w;
  w.input_norm = f.vec(D, 1.0f);
  w.post_attn_norm = f.vec(D, 1.0f);
  AttentionWeights& a = w.attn;
  if (rq > 0) {
    a.q_a_proj = proj(rq, D);
    a.q_a_layernorm = f.vec(rq, 1.0f);
    a.q_b_proj = proj(H * (dn + dr), rq);
  } else {
    a.q_proj = proj(H * (dn + dr), D);
  }
  a.kv_a_proj = proj(rkv + dr, D);
  a.kv_a_layernorm = f.vec(rkv, 1.0f);
  a.kv_b_proj = f.linear(H * (dn + dv), rkv);
  {
    // kv_b_proj's own blocks, as the loader splits them: both MLA forms compute one function.
    const Tensor kvb = a.kv_b_proj.w.to(Device::cpu()).to_f32();  // [H (dn + dv), rkv]
    const auto [uk_t, uv] = split_kv_b(kvb, H, dn, dv, rkv);
    const DType dt = a.kv_b_proj.w.dtype();
    a.w_uk_t = uk_t.to_dtype(dt).to(a.kv_b_proj.w.device());  // [H, rkv, dn]
    a.w_uv = uv.to_dtype(dt).to(a.kv_b_proj.w.device());      // [H, dv, rkv]
  }
  a.o_proj = proj(D, H * dv);
  if (indexer) {
    IndexerWeights& ix = a.indexer.emplace();
    ix.wq_b = proj(c.index_n_heads * c.index_head_dim, rq);
    ix.wk = f.linear(c.index_head_dim, D);
    ix.k_norm_w = f.vec(c.index_head_dim, 1.0f);
    ix.k_norm_b = f.vec(c.index_head_dim, 0.1f);
    ix.weights_proj = f.linear_f32(c.index_n_heads, D);
  }
  if (!moe) {
    MlpWeights& m = w.mlp.emplace();
    m.gate_up = proj(2 * c.intermediate_size / sh.tp_size, D);
    m.down = proj(D, c.intermediate_size / sh.tp_size);
    return w;
  }
  const int64_t E = expert_span(c, sh).size, I = c.moe_intermediate_size / sh.moe_tp();
  const int64_t Is = c.moe_intermediate_size * c.n_shared_experts / sh.tp_size;
  MoeWeights& m = w.moe.emplace();
  m.router = f.linear_f32(c.n_routed_experts, D);  // replicated: routes over every expert
  m.score_bias = f.vec(c.n_routed_experts, 0.01f);
  m.experts_gate_up = f.maybe_quantized({E, 2 * I, D}, q.experts, q.experts_act, q.ue8m0);
  m.experts_down = f.maybe_quantized({E, D, I}, q.experts, q.experts_act, q.ue8m0);
  if (c.n_shared_experts > 0) {
    MlpWeights& s = m.shared.emplace();
    s.gate_up = proj(2 * Is, D);
    s.down = proj(D, Is);
  }
  return w;
}

}  // namespace

ModelWeights dummy_weights(const ModelConfig& c, const LoadOptions& o, uint64_t seed) {
  validate_shard(c, o.shard);
  Filler f(o, seed);
  ModelWeights mw;
  const int64_t D = c.hidden_size, V = vocab_span(c, o.shard).size;
  mw.embed = Tensor::empty({V, D}, o.dtype, o.device);
  ops::fill_random(mw.embed, seed + 1000003, 1.0f);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    mw.layers.push_back(layer(c, o.shard, f, c.is_moe_layer(l),
                              !c.has_indexer || c.indexer_full[static_cast<size_t>(l)],
                              DummyFormats::of(c, false)));
  mw.final_norm = f.vec(D, 1.0f);
  mw.lm_head = f.linear(V, D);
  if (o.load_mtp && c.has_mtp()) {
    MtpWeights& m = mw.mtp.emplace();
    m.enorm = f.vec(D, 1.0f);
    m.hnorm = f.vec(D, 1.0f);
    m.eh_proj = f.linear(D, 2 * D);
    m.shared_head_norm = f.vec(D, 1.0f);
    m.layer =
        layer(c, o.shard, f, c.n_routed_experts > 0, c.has_indexer, DummyFormats::of(c, true));
  }
  const RopeTables rt = compute_rope_tables(c);
  Tensor inv = Tensor::from_vector(rt.inv_freq, {static_cast<int64_t>(rt.inv_freq.size())});
  mw.rope_inv_freq = o.device.is_cpu() ? inv : inv.to(o.device);
  mw.rope_attention_factor = rt.attention_factor;
  return mw;
}

}  // namespace tandem
