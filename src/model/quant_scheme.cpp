#include "model/quant_scheme.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tandem {

namespace {

QuantScheme dense(std::string rule) {
  QuantScheme q;
  q.rule = std::move(rule);
  return q;
}

bool is_pattern(const std::string& key) {
  return key.rfind("re:", 0) == 0 || key.find_first_of("*?[") != std::string::npos;
}

// The layer_quant_config entry for this tensor, or null. config.json arrives key-sorted, so file
// order cannot rank overlapping keys; specificity does: a plain key (an exact name or a segment
// prefix) beats a pattern, then the longer key wins. Two equally specific keys that disagree are
// an error rather than a silent pick.
const std::pair<std::string, QuarkLayerQuant>* match_layer_rule(
    const QuantConfig& qc, const std::vector<std::string>& names, const std::string& tensor) {
  const std::pair<std::string, QuarkLayerQuant>* best = nullptr;
  auto rank = [](const std::string& k) { return std::make_pair(is_pattern(k) ? 0 : 1, k.size()); };
  for (const auto& rule : qc.layer_rules) {
    bool hit = false;
    for (const auto& n : names) hit |= quant_rule_matches(rule.first, n);
    if (!hit) continue;
    if (!best || rank(rule.first) > rank(best->first)) {
      best = &rule;
    } else if (rank(rule.first) == rank(best->first) && !(rule.second == best->second)) {
      fail(
          "quantization_config.layer_quant_config: keys '{}' and '{}' both match '{}' with "
          "different configs",
          best->first, rule.first, tensor);
    }
  }
  return best;
}

QuantScheme from_quark(const QuarkLayerQuant& l, std::string rule) {
  if (!l.weight) return dense(rule + " leaves the weight unquantized");
  QuantScheme q;
  q.format = WeightFormat::kMxfp4;
  q.block_n = 1;
  q.block_k = l.weight->group_size;
  q.act = l.input ? QuantActivation::kMxfp4 : QuantActivation::kNone;
  q.rule = std::move(rule);
  return q;
}

std::string layer_prefix(const TensorSpec& s) {
  return s.layer < 0 ? std::string() : fmt::format("model.layers.{}.", s.layer);
}

}  // namespace

std::vector<std::string> quant_rule_names(const TensorSpec& s) {
  std::vector<std::string> n{s.module};
  const std::string p = layer_prefix(s);
  switch (s.slot) {
    case Slot::kExpertGate:
    case Slot::kExpertUp:
      n.push_back(fmt::format("{}mlp.experts.{}.gate_up_proj", p, s.expert));
      n.push_back(p + "mlp.experts.gate_up_proj");
      n.push_back(p + "mlp.experts");
      break;
    case Slot::kExpertDown:
      n.push_back(p + "mlp.experts.down_proj");
      n.push_back(p + "mlp.experts");
      break;
    case Slot::kMlpGate:
    case Slot::kMlpUp:
      n.push_back(p + "mlp.gate_up_proj");
      break;
    case Slot::kSharedGate:
    case Slot::kSharedUp:
      n.push_back(p + "mlp.shared_experts.gate_up_proj");
      break;
    case Slot::kQaProj:
    case Slot::kKvaProj:
      n.push_back(p + "self_attn.fused_qkv_a_proj_with_mqa");
      break;
    default:
      break;
  }
  return n;
}

QuantScheme quant_scheme(const ModelConfig& c, const TensorSpec& s) {
  const QuantConfig& qc = c.quant;
  if (!s.linear) return dense("not a linear weight");
  if (always_high_precision(s.slot))
    return dense(
        "always high precision (routers, indexer weights_proj, MTP eh_proj, embeddings, heads)");
  if (qc.method.empty()) return dense("no quantization_config");
  const std::vector<std::string> names = quant_rule_names(s);
  const char* exclude_key = qc.online            ? "online_quant_config.exclude_layer"
                            : qc.method == "fp8" ? "modules_to_not_convert"
                                                 : "exclude";
  for (const auto& rule : qc.exclude)
    for (const auto& n : names)
      if (quant_rule_matches(rule, n))
        return dense(n == s.module ? fmt::format("{} '{}'", exclude_key, rule)
                                   : fmt::format("{} '{}' (as '{}')", exclude_key, rule, n));
  if (qc.method == "fp8") {
    QuantScheme q;
    q.format = WeightFormat::kFp8Block;
    q.act = QuantActivation::kFp8Group;
    q.online = qc.online;
    if (qc.per_channel) {
      q.block_n = 1;
      q.block_k = s.shape.back();
      q.rule = "online_quant_config ptpc_fp8 (one scale per output channel)";
    } else {
      q.block_n = qc.block_n;
      q.block_k = qc.block_k;
      q.ue8m0 = qc.ue8m0;
      q.rule = qc.online ? fmt::format("--quantization fp8 ({}x{} blocks)", q.block_n, q.block_k)
                         : fmt::format("quantization_config fp8, weight_block_size [{}, {}]",
                                       q.block_n, q.block_k);
    }
    return q;
  }
  if (const auto* r = match_layer_rule(qc, names, s.name()))
    return from_quark(r->second, fmt::format("layer_quant_config '{}'", r->first));
  // Every weight in the name table is a Linear in the Hugging Face model (experts included).
  for (const auto& [type, l] : qc.layer_type_rules)
    if (type == "Linear") return from_quark(l, "layer_type_quant_config 'Linear'");
  return from_quark(qc.global, "global_quant_config");
}

QuantScheme fused_quant_scheme(const std::vector<QuantScheme>& parts, const std::string& fused) {
  TD_CHECK(!parts.empty(), "fused_quant_scheme: {} has no parts", fused);
  size_t differ = 0;
  for (const auto& p : parts) differ += !p.same_as(parts[0]);
  if (differ == 0) return parts[0];
  // Name one part of each kind so the message says which rule split the tensor.
  const QuantScheme* other = nullptr;
  for (const auto& p : parts)
    if (!p.same_as(parts[0])) other = &p;
  return dense(fmt::format(
      "{} mixes formats ({} of {} parts differ: '{}' vs '{}'); one tensor has one format, so it "
      "loads dense",
      fused, differ, parts.size(), parts[0].rule, other->rule));
}

QuantScheme fused_quant_scheme(const ModelConfig& c, const std::vector<TensorSpec>& parts,
                               const std::string& fused) {
  std::vector<QuantScheme> q;
  q.reserve(parts.size());
  for (const auto& s : parts) q.push_back(quant_scheme(c, s));
  return fused_quant_scheme(q, fused);
}

StorageDecision resolve_storage(const ModelConfig& c, const TensorSpec& s, const QuantScheme& q,
                                const StoredTensor& st) {
  const std::string name = s.name();
  const bool floating = st.dtype == DType::F32 || st.dtype == DType::BF16 || st.dtype == DType::F16;
  StorageDecision d;
  if (!s.linear) {
    if (!floating)
      fail("tensor '{}' is stored as {}, but a norm, bias or embedding must be f32/bf16/f16 ({})",
           name, dtype_name(st.dtype), q.rule);
    return d;
  }
  if (floating) {
    if (st.has_scale_inv || st.has_scale)
      fail(
          "tensor '{}' is stored as {} next to a {} tensor; high-precision data with a scale is "
          "ambiguous (rule: {})",
          name, dtype_name(st.dtype), st.has_scale_inv ? "weight_scale_inv" : "weight_scale",
          q.rule);
    if (q.format != WeightFormat::kDense) {
      if (q.online) {
        d.quantize_at_load = true;
        d.format = q.format;
        d.block_n = q.block_n;
        d.block_k = q.block_k;
      } else {
        d.warning = fmt::format("{} (expected {} by {}, stored {}: loading it dense)", name,
                                q.format == WeightFormat::kFp8Block ? "FP8" : "MXFP4", q.rule,
                                dtype_name(st.dtype));
      }
    }
    return d;
  }
  if (st.dtype == DType::F8_E4M3) {
    if (!st.has_scale_inv)
      fail("tensor '{}' is F8_E4M3 but '{}.weight_scale_inv' is missing (rule: {})", name, s.module,
           q.rule);
    d.format = WeightFormat::kFp8Block;
    // Block FP8 checkpoints all use the config's tile (128x128 in every published one).
    const bool block = c.quant.method == "fp8" && !c.quant.online;
    d.block_n = block ? c.quant.block_n : 128;
    d.block_k = block ? c.quant.block_k : 128;
    if (q.format != WeightFormat::kFp8Block || q.online)
      d.warning = fmt::format(
          "{} (expected {} by {}, stored FP8 with weight_scale_inv: loading it "
          "as FP8)",
          name, q.format == WeightFormat::kDense ? "dense" : "MXFP4", q.rule);
    return d;
  }
  if (st.dtype == DType::U8 || st.dtype == DType::FP4X2) {
    if (!st.has_scale)
      fail("tensor '{}' is {} (packed FP4) but '{}.weight_scale' is missing (rule: {})", name,
           dtype_name(st.dtype), s.module, q.rule);
    d.format = WeightFormat::kMxfp4;
    d.block_n = 1;
    d.block_k = c.quant.method == "quark" || c.quant.method == "mxfp4" ? c.quant.group_size : 32;
    if (q.format != WeightFormat::kMxfp4)
      d.warning = fmt::format(
          "{} (expected {} by {}, stored MXFP4 with weight_scale: loading it "
          "as MXFP4)",
          name, q.format == WeightFormat::kDense ? "dense" : "FP8", q.rule);
    return d;
  }
  fail("tensor '{}' is stored as {}, which no weight format uses (rule: {})", name,
       dtype_name(st.dtype), q.rule);
}

}  // namespace tandem
