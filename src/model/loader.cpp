#include "model/loader.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "model/absorbed_mla.h"
#include "model/online_quant.h"
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

// A dense host tensor's share (a view).
Tensor cut_dense(const Tensor& t, const ShardCut& cut) {
  switch (cut.kind) {
    case ShardCut::Kind::kRows:
      return t.narrow(0, cut.span.begin, cut.span.size);
    case ShardCut::Kind::kCols:
      return t.narrow(t.ndim() - 1, cut.span.begin, cut.span.size);
    default:
      return t;
  }
}

// Why a quantized weight cannot be cut along its scale blocks ("" if it can): a cut must start
// and end on a block boundary (the tensor's own end counts as one).
std::string quantized_cut_misfit(const Weight& w, const ShardCut& cut) {
  const bool rows = cut.kind == ShardCut::Kind::kRows;
  const int64_t block = rows ? (w.format == WeightFormat::kMxfp4 ? 1 : w.block_n) : w.block_k;
  const int64_t n = rows ? w.out_features() : w.in_features();
  const int64_t end = cut.span.begin + cut.span.size;
  if (cut.span.begin % block != 0 || (end % block != 0 && end != n))
    return fmt::format("does not fall on the {}-element scale blocks", block);
  return "";
}

// The share of a quantized weight whose cut fits its blocks: codes and scales narrowed together.
Weight cut_quantized(const Weight& w, const ShardCut& cut) {
  Weight o = w;
  const int64_t b = cut.span.begin, n = cut.span.size;
  if (cut.kind == ShardCut::Kind::kRows) {
    o.w = w.w.narrow(0, b, n);
    const int64_t r0 = w.scale_row(b), r1 = w.scale_row(b + n - 1) + 1;
    o.scale = w.scale.narrow(0, r0, r1 - r0);
  } else {
    const int64_t per_byte = w.format == WeightFormat::kMxfp4 ? 2 : 1;
    o.w = w.w.narrow(1, b / per_byte, n / per_byte);
    const int64_t k0 = b / w.block_k, k1 = (b + n + w.block_k - 1) / w.block_k;
    o.scale = w.scale.narrow(1, k0, k1 - k0);
  }
  o.w = o.w.contiguous();
  o.scale = o.scale.contiguous();
  return o;
}

class Loader {
 public:
  Loader(const Checkpoint& ck, const ModelConfig& c, const LoadOptions& o)
      : ck_(ck), c_(c), o_(o), progress_(ck.total_bytes(), o.show_progress) {}

  // Reads one tensor of the table as stored, checking presence, dtype and shape, then cuts this
  // rank's share out of it: a dense host fp32 weight, or the checkpoint's FP8 / MXFP4 codes with
  // their scales.
  Weight read_weight(const TensorSpec& s, const ShardCut& cut) {
    online_.reset();
    const std::string name = s.name();
    if (!ck_.has(name)) fail("{}: checkpoint is missing tensor '{}'", ck_.dir(), name);
    const std::string& file = ck_.file_of(name);
    Tensor t = ck_.tensor(name);
    progress_.add(static_cast<uint64_t>(t.nbytes()));
    const std::string scale_inv = s.module + ".weight_scale_inv";
    const std::string scale = s.module + ".weight_scale";
    Weight w;
    w.w = t;
    if (!s.linear) {
      if (!is_float_dtype(t.dtype()))
        fail("{}: tensor '{}' has dtype {}, which a norm or bias cannot use", file, name,
             dtype_name(t.dtype()));
    } else {
      // What the rules want (quant_scheme) reconciled with what is stored: contradictions load
      // as stored when unambiguous (warned), else throw naming the tensor and the rule.
      const QuantScheme q = quant_scheme(c_, s);
      StorageDecision d;
      try {
        d = resolve_storage(c_, s, q, StoredTensor{t.dtype(), ck_.has(scale_inv), ck_.has(scale)});
      } catch (const Error& e) {
        fail("{}: {}", file, e.what());
      }
      if (!d.warning.empty()) mismatches_.push_back(d.warning);
      if (d.format == WeightFormat::kFp8Block) {
        w.format = WeightFormat::kFp8Block;
        w.scale = ck_.tensor(scale_inv);
        if (w.scale.dtype() == DType::BF16 || w.scale.dtype() == DType::F16)
          w.scale = w.scale.to_f32();
        w.block_n = d.block_n;
        w.block_k = d.block_k;
        w.act = ActQuant::kFp8Group;  // FP8 checkpoints: dynamic per-token activation groups
        w.ue8m0 = c_.quant.ue8m0;
      } else if (d.format == WeightFormat::kMxfp4) {
        w.format = WeightFormat::kMxfp4;
        w.w = Tensor::wrap(t.raw(), t.shape(), DType::FP4X2, Device::cpu());
        w.scale = ck_.tensor(scale);
        w.block_n = 1;
        w.block_k = d.block_k;
        // Quark's input_tensors (W4A4) or weight-only, as the rules resolve for this tensor.
        w.act = q.format == WeightFormat::kMxfp4 ? q.act : ActQuant::kNone;
      } else if (!is_float_dtype(t.dtype())) {
        fail("{}: tensor '{}' has dtype {}, which a linear layer cannot use", file, name,
             dtype_name(t.dtype()));
      }
      online_ = d.quantize_at_load ? std::optional<QuantScheme>(q) : std::nullopt;
    }
    std::vector<int64_t> want = s.shape;
    if (w.format == WeightFormat::kMxfp4) want.back() /= 2;
    if (w.w.shape().vec() != want)
      fail("{}: tensor '{}' has shape {} but the config implies {}", file, name, w.w.shape().str(),
           Shape(want).str());
    if (!w.quantized()) {
      w.w = cut_dense(w.w, cut).to_f32();
      return w;
    }
    try {
      check_weight_scale(w);
    } catch (const Error& e) {
      fail("{}: tensor '{}': {}", file, name, e.what());
    }
    if (cut.kind == ShardCut::Kind::kWhole) return w;
    if (const std::string why = quantized_cut_misfit(w, cut); !why.empty()) {
      log_warn("{}: tensor '{}': this rank's {} {}; loading it dequantized", file, name, cut.str(),
               why);
      return Weight::from_dense(cut_dense(dequantize_to_f32(w), cut).contiguous());
    }
    return cut_quantized(w, cut);
  }

  // Reads one tensor as a host fp32 tensor, dequantizing FP8/MXFP4 storage.
  Tensor read_f32(const TensorSpec& s, const ShardCut& cut) {
    Weight w = read_weight(s, cut);
    if (!w.quantized()) return w.w;
    try {
      return dequantize_to_f32(w);  // already cut
    } catch (const Error& e) {
      fail("{}: tensor '{}': {}", ck_.file_of(s.name()), s.name(), e.what());
    }
  }

  // Reads a linear weight for a slot whose kernels take quantized weights: kept as stored
  // (LoadOptions::keep_quantized), else dequantized.
  Weight read_linear(const TensorSpec& s, const ShardCut& cut) {
    Weight w = read_weight(s, cut);
    if (online_ && o_.keep_quantized) {
      // --quantization fp8 / ptpc_fp8: high-precision storage quantized here, as the rules say.
      Weight q = quantize_weight(w.w, *online_);
      q.act = online_->act;
      q.ue8m0 = online_->ue8m0;
      return q;
    }
    if (w.quantized() && !o_.keep_quantized) return Weight::from_dense(dequantize_to_f32(w));
    return w;
  }

  // A tensor another rank holds: counted for the progress line only.
  void skip(const TensorSpec& s) {
    if (ck_.has(s.name())) progress_.add(static_cast<uint64_t>(ck_.tensor(s.name()).nbytes()));
  }

  Tensor place(const Tensor& host_f32, DType dt) const {
    Tensor t = dt == DType::F32 ? host_f32 : host_f32.to_dtype(dt);
    return o_.device.is_cpu() ? t : t.to(o_.device);
  }
  Weight dense(const Tensor& host_f32) const {
    return Weight{place(host_f32, o_.dtype), {}, WeightFormat::kDense};
  }
  // A host weight, dense f32 or quantized, in the backend's form on its device. FP8 scales get
  // rows padded to a multiple of 4 K blocks on CUDA (the layout cuBLASLt's block-scaled GEMM
  // reads); the weight's scale is a view of the logical columns.
  Weight place_weight(const Weight& host) const {
    if (!host.quantized()) return dense(host.w);
    Weight w = host;
    w.w = o_.device.is_cpu() ? host.w.contiguous() : host.w.contiguous().to(o_.device);
    w.scale = place_weight_scale(host.scale, host.format, o_.device);
    return w;
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
  const Checkpoint& ck_;
  const ModelConfig& c_;
  const LoadOptions& o_;
  Progress progress_;
  std::vector<std::string> mismatches_;
  // The online scheme of the tensor read last, when it is to be quantized while loading.
  std::optional<QuantScheme> online_;
};

// Concatenates host tensors along dim 0 (same dtype and trailing shape), optionally under a
// new leading dim (stack).
Tensor concat_host(const std::vector<Tensor>& parts, bool stack) {
  std::vector<int64_t> shape = parts.front().shape().vec();
  int64_t rows = 0;
  for (const Tensor& p : parts) rows += stack ? 1 : p.size(0);
  if (stack)
    shape.insert(shape.begin(), rows);
  else
    shape[0] = rows;
  Tensor out = Tensor::empty(Shape(shape), parts.front().dtype());
  auto* dst = static_cast<char*>(out.raw());
  for (const Tensor& p : parts) {
    const Tensor c = p.contiguous();
    std::memcpy(dst, c.raw(), static_cast<size_t>(c.nbytes()));
    dst += c.nbytes();
  }
  return out;
}

// Why host weights cannot be combined in their quantized form, or "" if they can: one format,
// block size and activation rule; FP8 row blocks must not straddle two parts.
std::string unstackable(const std::vector<Weight>& parts, bool stack) {
  const Weight& f = parts.front();
  for (size_t i = 0; i < parts.size(); ++i) {
    const Weight& p = parts[i];
    if (p.format != f.format || p.block_n != f.block_n || p.block_k != f.block_k ||
        p.act != f.act || p.in_features() != f.in_features() ||
        (stack && p.out_features() != f.out_features()))
      return "its parts are stored in different formats";
    if (p.format == WeightFormat::kFp8Block && p.block_n > 1 && p.out_features() % p.block_n != 0 &&
        (stack || i + 1 < parts.size()))
      return fmt::format("{} rows are not a whole number of {}-row scale blocks", p.out_features(),
                         p.block_n);
  }
  return "";
}

// FP8 parts whose row blocks would straddle two parts of the combination get finer row blocks
// with the same scales: gate and up of 192 rows each (the default model) in 128-row blocks
// become 64-row blocks, so [gate; up] concatenates without a block spanning both. Exact: every
// row keeps its scale, block_n just names smaller runs of rows sharing it.
std::vector<Weight> reblock_rows(const std::vector<Weight>& parts, bool stack) {
  const Weight& f = parts.front();
  if (f.format != WeightFormat::kFp8Block || f.block_n <= 1) return parts;
  int64_t bn = f.block_n;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].format != f.format || parts[i].block_n != f.block_n) return parts;
    if (stack || i + 1 < parts.size()) bn = std::gcd(bn, parts[i].out_features());
  }
  if (bn == f.block_n) return parts;
  std::vector<Weight> out = parts;
  for (Weight& p : out) {
    const Tensor old = p.scale.to_f32().contiguous();  // [nb, kb]
    const int64_t nb = (p.out_features() + bn - 1) / bn, kb = old.size(1);
    std::vector<float> v(static_cast<size_t>(nb * kb));
    const float* o = old.data<float>();
    for (int64_t r = 0; r < nb; ++r)
      std::copy_n(o + (r * bn / p.block_n) * kb, kb, v.begin() + r * kb);
    p.scale = Tensor::from_vector(v, {nb, kb});
    p.block_n = bn;
  }
  return out;
}

// Linear weights the kernels take FP8 / MXFP4: the projections and MLPs. kv_b_proj is split
// into the absorbed W_UK / W_UV and the indexer's wk joins the fused bf16 qkv_a GEMM, so both
// are dequantized, as the reference does; routers, heads and eh_proj are high precision.
bool keeps_quantized_format(Slot s) {
  switch (s) {
    case Slot::kQaProj:
    case Slot::kQbProj:
    case Slot::kQProj:
    case Slot::kKvaProj:
    case Slot::kOProj:
    case Slot::kIdxWqb:
    case Slot::kMlpGate:
    case Slot::kMlpUp:
    case Slot::kMlpDown:
    case Slot::kExpertGate:
    case Slot::kExpertUp:
    case Slot::kExpertDown:
    case Slot::kSharedGate:
    case Slot::kSharedUp:
    case Slot::kSharedDown:
      return true;
    default:
      return false;
  }
}

// Dequantizes a stack of experts [E, N, K] to dense fp32.
Weight dequantize_stack(const Weight& w) {
  std::vector<Tensor> parts;
  for (int64_t e = 0; e < w.experts(); ++e) parts.push_back(dequantize_to_f32(w.expert(e)));
  return Weight::from_dense(concat_host(parts, true));
}

// Combines host weights: rows concatenated ([a; b], stack = false) or stacked under a new
// expert dim (stack = true). Quantized parts stay quantized where unstackable() allows;
// otherwise every part is dequantized (and `why` says so).
Weight combine(const std::vector<Weight>& given, bool stack, std::string* why) {
  const std::vector<Weight> parts = reblock_rows(given, stack);
  const bool quantized = parts.front().quantized();
  if (quantized) *why = unstackable(parts, stack);
  std::vector<Tensor> ws, ss;
  if (quantized && why->empty()) {
    for (const Weight& p : parts) ws.push_back(p.w), ss.push_back(p.scale);
    Weight out = parts.front();
    out.w = concat_host(ws, stack);
    out.scale = concat_host(ss, stack);
    return out;
  }
  for (const Weight& p : parts) ws.push_back(p.quantized() ? dequantize_to_f32(p) : p.w);
  return Weight::from_dense(concat_host(ws, stack));
}

}  // namespace

Tensor place_weight_scale(const Tensor& host, WeightFormat f, Device d) {
  const bool pad = !d.is_cpu() && f == WeightFormat::kFp8Block;
  const Tensor scale = pad ? pad_scale_rows(host, 4) : host.contiguous();
  Tensor placed = d.is_cpu() ? scale : scale.to(d);
  return placed.narrow(placed.ndim() - 1, 0, host.size(-1));
}

ModelWeights load_weights(const Checkpoint& ck, const ModelConfig& c, const LoadOptions& o) {
  if (c.has_indexer && c.q_lora_rank <= 0)
    fail("{}: the DSA indexer needs q_lora_rank > 0 (its queries come from the q latent)",
         ck.dir());
  validate_shard(c, o.shard);
  Loader ld(ck, c, o);
  const std::vector<TensorSpec> table = weight_name_table(c, o.load_mtp);
  // H: this rank's attention heads.
  const int64_t L = c.num_hidden_layers, H = head_span(c, o.shard).size;
  const int64_t dn = c.qk_nope_head_dim, dv = c.v_head_dim, rkv = c.kv_lora_rank;

  ModelWeights mw;
  mw.layers.resize(static_cast<size_t>(L));
  std::optional<MtpWeights> mtp;
  if (o.load_mtp && c.has_mtp()) mtp.emplace();
  // Per-layer scratch for tensors that are combined after all their parts are read.
  struct Pending {
    Weight gate, up, sgate, sup;
    Tensor kvb;
    std::vector<Weight> egate, eup, edown;
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
    // Linear weights whose kernels take FP8 / MXFP4 stay as stored; everything else (norms,
    // embeddings, heads, routers, kv_b_proj before its absorbed split, the indexer's wk) is
    // read as fp32.
    // This rank's share (everything when not sharded); other ranks' experts are not read.
    const ShardCut cut = shard_cut(c, o.shard, s);
    if (cut.kind == ShardCut::Kind::kSkip) {
      ld.skip(s);
      continue;
    }
    const bool keeps_format = keeps_quantized_format(s.slot);
    const Weight hw = keeps_format ? ld.read_linear(s, cut) : Weight{};
    Tensor t = keeps_format ? Tensor{} : ld.read_f32(s, cut);
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
        lw->attn.q_a_proj = ld.place_weight(hw);
        break;
      case Slot::kQaNorm:
        lw->attn.q_a_layernorm = ld.small(t);
        break;
      case Slot::kQbProj:
        lw->attn.q_b_proj = ld.place_weight(hw);
        break;
      case Slot::kQProj:
        lw->attn.q_proj = ld.place_weight(hw);
        break;
      case Slot::kKvaProj:
        lw->attn.kv_a_proj = ld.place_weight(hw);
        break;
      case Slot::kKvaNorm:
        lw->attn.kv_a_layernorm = ld.small(t);
        break;
      case Slot::kKvbProj:
        lw->attn.kv_b_proj = ld.dense(t);
        p.kvb = t;
        break;
      case Slot::kOProj:
        lw->attn.o_proj = ld.place_weight(hw);
        break;
      case Slot::kIdxWqb:
        indexer().wq_b = ld.place_weight(hw);
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
        p.gate = hw;
        break;
      case Slot::kMlpUp:
        p.up = hw;
        break;
      case Slot::kMlpDown:
        lw->mlp.emplace();
        lw->mlp->down = ld.place_weight(hw);
        break;
      case Slot::kRouter:
        moe().router = Weight{ld.small(t), {}, WeightFormat::kDense};
        break;
      case Slot::kRouterBias:
        moe().score_bias = ld.small(t);
        break;
      case Slot::kExpertGate:
        p.egate.push_back(hw);
        break;
      case Slot::kExpertUp:
        p.eup.push_back(hw);
        break;
      case Slot::kExpertDown:
        p.edown.push_back(hw);
        break;
      case Slot::kSharedGate:
        p.sgate = hw;
        break;
      case Slot::kSharedUp:
        p.sup = hw;
        break;
      case Slot::kSharedDown:
        moe().shared.emplace();
        moe().shared->down = ld.place_weight(hw);
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
    // gate_up rows: gate then up; routed experts stacked [E, 2I, D] and [E, D, I].
    // layer is captured by copy: clang before 16 cannot capture a structured binding by reference.
    const auto fused = [&, layer = layer](const std::vector<Weight>& parts, bool stack,
                                          const char* what) {
      std::string why;
      Weight w = combine(parts, stack, &why);
      if (!why.empty())
        log_warn("{}: layer {} {} load dequantized to {}: {}", ck.dir(), layer, what,
                 dtype_name(o.dtype), why);
      return ld.place_weight(w);
    };
    if (p.gate.defined()) lw.mlp->gate_up = fused({p.gate, p.up}, false, "gate/up_proj");
    if (p.sgate.defined())
      lw.moe->shared->gate_up = fused({p.sgate, p.sup}, false, "shared_experts gate/up_proj");
    if (!p.egate.empty()) {
      std::string why;
      std::vector<Weight> gu;  // per expert [2I, D]
      std::string why_gu, why_down;
      for (size_t e = 0; e < p.egate.size(); ++e) {
        std::string why;
        gu.push_back(combine({p.egate[e], p.eup[e]}, false, &why));
        if (!why.empty() && why_gu.empty()) why_gu = fmt::format("expert {} gate/up: {}", e, why);
      }
      Weight gate_up = combine(gu, true, &why), down = combine(p.edown, true, &why_down);
      if (why_gu.empty()) why_gu = why;
      // The expert kernels take both projections in one form.
      if (gate_up.quantized() != down.quantized()) {
        (gate_up.quantized() ? gate_up : down) =
            dequantize_stack(gate_up.quantized() ? gate_up : down);
        why_gu = "gate/up and down are stored in different formats";
      }
      if (!why_gu.empty() || !why_down.empty())
        log_warn("{}: layer {} routed experts load dequantized to {}: {}", ck.dir(), layer,
                 dtype_name(o.dtype), why_gu.empty() ? why_down : why_gu);
      lw.moe->experts_gate_up = ld.place_weight(gate_up);
      lw.moe->experts_down = ld.place_weight(down);
    }
    // Absorbed MLA: split kv_b_proj [H, dn + dv, rkv] into W_UK^T [H, rkv, dn] and W_UV [H, dv,
    // rkv].
    const auto [uk_t, uv] = split_kv_b(p.kvb, H, dn, dv, rkv);
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
