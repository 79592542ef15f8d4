#include "model/loader.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/log.h"
#include "model/quant_scheme.h"
#include "model/rope.h"
#include "model/weight_names.h"

namespace tandem {

namespace {

bool is_float_dtype(DType d) {
  return d == DType::F32 || d == DType::BF16 || d == DType::F16;
}

class Progress {
 public:
  Progress(uint64_t total, bool enabled)
      : total_(total), enabled_(enabled && total > (256ull << 20)) {}
  void add(uint64_t bytes) {
    done_ += bytes;
    if (!enabled_) return;
    const int pct =
        static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_));
    if (pct >= last_ + 5 || done_ == total_) {
      last_ = pct;
      std::fprintf(stderr, "\rloading weights: %3d%% (%.2f / %.2f GB)", pct, done_ / 1e9,
                   total_ / 1e9);
      if (done_ >= total_) std::fprintf(stderr, "\n");
      std::fflush(stderr);
    }
  }

 private:
  uint64_t total_, done_ = 0;
  bool enabled_;
  int last_ = -5;
};

class Loader {
 public:
  Loader(const Checkpoint& ck, const ModelConfig& c, const LoadOptions& o)
      : ck_(ck), c_(c), o_(o), progress_(ck.total_bytes(), o.show_progress) {}

  // Reads one tensor of the table as a host fp32 tensor, checking presence, dtype and shape,
  // and dequantizing FP8/MXFP4 storage.
  Tensor read_f32(const TensorSpec& s) {
    const std::string name = s.name();
    if (!ck_.has(name)) fail("{}: checkpoint is missing tensor '{}'", ck_.dir(), name);
    const std::string& file = ck_.file_of(name);
    Tensor t = ck_.tensor(name);
    progress_.add(static_cast<uint64_t>(t.nbytes()));
    const std::string scale_inv = s.module + ".weight_scale_inv";
    const std::string scale = s.module + ".weight_scale";
    Weight w;
    w.w = t;
    if (s.linear && t.dtype() == DType::F8_E4M3) {
      if (!ck_.has(scale_inv))
        fail("{}: tensor '{}' is F8_E4M3 but '{}' is missing", file, name, scale_inv);
      w.format = WeightFormat::kFp8Block;
      w.scale = ck_.tensor(scale_inv);
      w.block_n = c_.quant.block_n;
      w.block_k = c_.quant.block_k;
      count_format(s, true);
    } else if (s.linear && (t.dtype() == DType::U8 || t.dtype() == DType::FP4X2) &&
               ck_.has(scale)) {
      w.format = WeightFormat::kMxfp4;
      w.w = Tensor::wrap(t.raw(), t.shape(), DType::FP4X2, Device::cpu());
      w.scale = ck_.tensor(scale);
      w.block_k = c_.quant.group_size;
      count_format(s, true);
    } else if (is_float_dtype(t.dtype())) {
      count_format(s, false);
    } else {
      fail("{}: tensor '{}' has dtype {}, which a {} cannot use", file, name, dtype_name(t.dtype()),
           s.linear ? "linear layer" : "norm or bias");
    }
    std::vector<int64_t> want = s.shape;
    if (w.format == WeightFormat::kMxfp4) want.back() /= 2;
    if (w.w.shape().vec() != want)
      fail("{}: tensor '{}' has shape {} but the config implies {}", file, name, w.w.shape().str(),
           Shape(want).str());
    try {
      return dequantize_to_f32(w);
    } catch (const Error& e) {
      fail("{}: tensor '{}': {}", file, name, e.what());
    }
  }

  Tensor place(const Tensor& host_f32, DType dt) const {
    Tensor t = dt == DType::F32 ? host_f32 : host_f32.to_dtype(dt);
    return o_.device.is_cpu() ? t : t.to(o_.device);
  }
  Weight dense(const Tensor& host_f32) const {
    return Weight{place(host_f32, o_.dtype), {}, WeightFormat::kDense};
  }
  // Norms, biases and the router stay fp32 on every backend.
  Tensor small(const Tensor& host_f32) const { return place(host_f32, DType::F32); }

  void report_format_mismatches() const {
    if (mismatches_.empty()) return;
    std::string list;
    for (size_t i = 0; i < mismatches_.size() && i < 5; ++i) list += "\n  " + mismatches_[i];
    log_warn(
        "{}: {} tensors are stored differently from what quantization_config (with its exclude "
        "rules) predicts; loading them as stored:{}{}",
        ck_.dir(), mismatches_.size(), list, mismatches_.size() > 5 ? "\n  ..." : "");
  }

 private:
  void count_format(const TensorSpec& s, bool quantized) {
    if (!s.linear || c_.quant.method.empty()) return;
    const QuantScheme q = quant_scheme(c_, s);  // online schemes expect high-precision storage
    const bool expected = q.format != WeightFormat::kDense && !q.online;
    if (expected != quantized)
      mismatches_.push_back(fmt::format("{} ({} by {}, but stored {})", s.name(),
                                        expected ? "expected quantized" : "expected unquantized",
                                        q.rule, quantized ? "quantized" : "unquantized"));
  }

  const Checkpoint& ck_;
  const ModelConfig& c_;
  const LoadOptions& o_;
  Progress progress_;
  std::vector<std::string> mismatches_;
};

// Stacks rows [a; b] of two [n, k] matrices into [2n, k].
Tensor stack_rows(const Tensor& a, const Tensor& b) {
  Tensor out = Tensor::empty({a.size(0) + b.size(0), a.size(1)}, DType::F32);
  std::memcpy(out.data<float>(), a.data<float>(), a.nbytes());
  std::memcpy(out.data<float>() + a.numel(), b.data<float>(), b.nbytes());
  return out;
}

}  // namespace

ModelWeights load_weights(const Checkpoint& ck, const ModelConfig& c, const LoadOptions& o) {
  if (c.has_indexer && c.q_lora_rank <= 0)
    fail("{}: the DSA indexer needs q_lora_rank > 0 (its queries come from the q latent)",
         ck.dir());
  Loader ld(ck, c, o);
  const std::vector<TensorSpec> table = weight_name_table(c, o.load_mtp);
  const int64_t L = c.num_hidden_layers, H = c.num_attention_heads;
  const int64_t dn = c.qk_nope_head_dim, dv = c.v_head_dim, rkv = c.kv_lora_rank;

  ModelWeights mw;
  mw.layers.resize(static_cast<size_t>(L));
  std::optional<MtpWeights> mtp;
  if (o.load_mtp && c.has_mtp()) mtp.emplace();
  // Per-layer scratch for tensors that are combined after all their parts are read.
  struct Pending {
    Tensor gate, up, sgate, sup, kvb;
    std::vector<Tensor> egate, eup, edown;
  };
  std::map<int64_t, Pending> pending;
  const float index_w_scale =
      c.has_indexer ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.index_n_heads) *
                                                         static_cast<double>(c.index_head_dim)))
                    : 1.0f;

  for (const TensorSpec& s : table) {
    if (s.optional) {
      // Duplicates of shared tensors (DeepSeek's MTP embed/head): validated if present, not kept.
      if (ck.has(s.name()) && ck.entry(s.name()).shape != s.shape)
        fail("{}: tensor '{}' has the wrong shape", ck.file_of(s.name()), s.name());
      continue;
    }
    Tensor t = ld.read_f32(s);
    const bool is_mtp = s.layer == L;
    LayerWeights* lw = s.layer < 0 ? nullptr
                       : is_mtp    ? &mtp->layer
                                   : &mw.layers[static_cast<size_t>(s.layer)];
    Pending& p = pending[s.layer];
    auto indexer = [&]() -> IndexerWeights& {
      if (!lw->attn.indexer) lw->attn.indexer.emplace();
      return *lw->attn.indexer;
    };
    auto moe = [&]() -> MoeWeights& {
      if (!lw->moe) lw->moe.emplace();
      return *lw->moe;
    };
    switch (s.slot) {
      case Slot::kEmbed:
        mw.embed = ld.place(t, o.dtype);
        break;
      case Slot::kFinalNorm:
        mw.final_norm = ld.small(t);
        break;
      case Slot::kLmHead:
        mw.lm_head = ld.dense(t);
        break;
      case Slot::kInputNorm:
        lw->input_norm = ld.small(t);
        break;
      case Slot::kPostAttnNorm:
        lw->post_attn_norm = ld.small(t);
        break;
      case Slot::kQaProj:
        lw->attn.q_a_proj = ld.dense(t);
        break;
      case Slot::kQaNorm:
        lw->attn.q_a_layernorm = ld.small(t);
        break;
      case Slot::kQbProj:
        lw->attn.q_b_proj = ld.dense(t);
        break;
      case Slot::kQProj:
        lw->attn.q_proj = ld.dense(t);
        break;
      case Slot::kKvaProj:
        lw->attn.kv_a_proj = ld.dense(t);
        break;
      case Slot::kKvaNorm:
        lw->attn.kv_a_layernorm = ld.small(t);
        break;
      case Slot::kKvbProj:
        lw->attn.kv_b_proj = ld.dense(t);
        p.kvb = t;
        break;
      case Slot::kOProj:
        lw->attn.o_proj = ld.dense(t);
        break;
      case Slot::kIdxWqb:
        indexer().wq_b = ld.dense(t);
        break;
      case Slot::kIdxWk:
        indexer().wk = ld.dense(t);
        break;
      case Slot::kIdxKNormW:
        indexer().k_norm_w = ld.small(t);
        break;
      case Slot::kIdxKNormB:
        indexer().k_norm_b = ld.small(t);
        break;
      case Slot::kIdxWeightsProj: {
        // Folds the head-count and dot-product scales of the index score into the weights:
        // w = weights_proj(a) * Hi^-0.5 * Di^-0.5. Kept fp32, as the reference computes it.
        float* d = t.data<float>();
        for (int64_t i = 0; i < t.numel(); ++i) d[i] *= index_w_scale;
        indexer().weights_proj = Weight{ld.small(t), {}, WeightFormat::kDense};
        break;
      }
      case Slot::kMlpGate:
        p.gate = t;
        break;
      case Slot::kMlpUp:
        p.up = t;
        break;
      case Slot::kMlpDown:
        lw->mlp.emplace();
        lw->mlp->down = ld.dense(t);
        break;
      case Slot::kRouter:
        moe().router = Weight{ld.small(t), {}, WeightFormat::kDense};
        break;
      case Slot::kRouterBias:
        moe().score_bias = ld.small(t);
        break;
      case Slot::kExpertGate:
        p.egate.push_back(t);
        break;
      case Slot::kExpertUp:
        p.eup.push_back(t);
        break;
      case Slot::kExpertDown:
        p.edown.push_back(t);
        break;
      case Slot::kSharedGate:
        p.sgate = t;
        break;
      case Slot::kSharedUp:
        p.sup = t;
        break;
      case Slot::kSharedDown:
        moe().shared.emplace();
        moe().shared->down = ld.dense(t);
        break;
      case Slot::kMtpEnorm:
        mtp->enorm = ld.small(t);
        break;
      case Slot::kMtpHnorm:
        mtp->hnorm = ld.small(t);
        break;
      case Slot::kMtpEhProj:
        mtp->eh_proj = ld.dense(t);
        break;
      case Slot::kMtpHeadNorm:
        mtp->shared_head_norm = ld.small(t);
        break;
      case Slot::kMtpEmbed:
      case Slot::kMtpHead:
        break;
    }
  }
  ld.report_format_mismatches();

  // Combine the parts of each layer.
  for (auto& [layer, p] : pending) {
    if (layer < 0) continue;
    LayerWeights& lw = layer == L ? mtp->layer : mw.layers[static_cast<size_t>(layer)];
    if (p.gate.defined()) lw.mlp->gate_up = ld.dense(stack_rows(p.gate, p.up));
    if (p.sgate.defined()) lw.moe->shared->gate_up = ld.dense(stack_rows(p.sgate, p.sup));
    if (!p.egate.empty()) {
      const int64_t E = static_cast<int64_t>(p.egate.size()), I = p.egate[0].size(0),
                    D = p.egate[0].size(1);
      Tensor gu = Tensor::empty({E, 2 * I, D}, DType::F32),
             down = Tensor::empty({E, D, I}, DType::F32);
      for (int64_t e = 0; e < E; ++e) {
        std::memcpy(gu.data<float>() + e * 2 * I * D, p.egate[e].data<float>(), I * D * 4);
        std::memcpy(gu.data<float>() + e * 2 * I * D + I * D, p.eup[e].data<float>(), I * D * 4);
        std::memcpy(down.data<float>() + e * D * I, p.edown[e].data<float>(), D * I * 4);
      }
      lw.moe->experts_gate_up = ld.place(gu, o.dtype);
      lw.moe->experts_down = ld.place(down, o.dtype);
    }
    // Absorbed MLA: split kv_b_proj [H, dn + dv, rkv] into W_UK^T [H, rkv, dn] and W_UV [H, dv,
    // rkv].
    Tensor uk_t = Tensor::empty({H, rkv, dn}, DType::F32),
           uv = Tensor::empty({H, dv, rkv}, DType::F32);
    const float* kvb = p.kvb.data<float>();
    for (int64_t h = 0; h < H; ++h) {
      const float* blk = kvb + h * (dn + dv) * rkv;
      for (int64_t d = 0; d < dn; ++d)
        for (int64_t r = 0; r < rkv; ++r)
          uk_t.data<float>()[(h * rkv + r) * dn + d] = blk[d * rkv + r];
      std::memcpy(uv.data<float>() + h * dv * rkv, blk + dn * rkv, dv * rkv * 4);
    }
    lw.attn.w_uk_t = ld.place(uk_t, o.dtype);
    lw.attn.w_uv = ld.place(uv, o.dtype);
  }
  if (c.tie_word_embeddings) mw.lm_head = Weight{mw.embed, {}, WeightFormat::kDense};
  mw.mtp = std::move(mtp);
  const RopeTables rt = compute_rope_tables(c);
  mw.rope_inv_freq =
      ld.small(Tensor::from_vector(rt.inv_freq, {static_cast<int64_t>(rt.inv_freq.size())}));
  mw.rope_attention_factor = rt.attention_factor;
  return mw;
}

}  // namespace tandem
