// What each checkpoint tensor should be: the one place that applies a QuantConfig's rules
// (exclude lists, Quark layer_quant_config / layer_type_quant_config / global_quant_config,
// online FP8) to the name table's tensors. Rules are matched against every name a tensor is known
// by (its checkpoint name, and the runtime modules Tandem fuses it into), never by rewriting the
// rules, so a config shared by the target model and the MTP draft reads the same for both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/quant_config.h"
#include "model/weight_names.h"
#include "ops/weight.h"

namespace tandem {

struct QuantScheme {
  WeightFormat format = WeightFormat::kDense;
  // kFp8Block: the scale tile (per-channel FP8: block_n = 1, block_k = K). kMxfp4: block_n = 1,
  // block_k = the group (32). kDense: 0.
  int64_t block_n = 0, block_k = 0;
  QuantActivation act = QuantActivation::kNone;
  bool ue8m0 = false;   // FP8 activation scales rounded up to powers of two
  bool online = false;  // stored in high precision, quantized while loading
  std::string rule;     // the rule that decided, for messages ("exclude 're:.*self_attn.*'")

  // Same numerics (everything but `rule`).
  bool same_as(const QuantScheme& o) const {
    return format == o.format && block_n == o.block_n && block_k == o.block_k && act == o.act &&
           ue8m0 == o.ue8m0 && online == o.online;
  }
};

// The names rules may be written against for this tensor: its checkpoint module first, then the
// runtime modules it is fused into (routed experts: "...mlp.experts", "...mlp.experts.gate_up_proj"
// / ".down_proj", "...mlp.experts.E.gate_up_proj"; gate/up pairs: "...gate_up_proj"; q_a and
// kv_a: "...self_attn.fused_qkv_a_proj_with_mqa").
std::vector<std::string> quant_rule_names(const TensorSpec& s);

// What this tensor should be. Order: not a linear weight, or always high precision (routers,
// indexer weights_proj, eh_proj, embeddings, heads) -> dense; no quantization -> dense; an
// exclude rule naming it -> dense; fp8 -> block (or per-channel) FP8 with FP8 activations; quark
// -> layer_quant_config (an exact key beats a pattern, a longer pattern beats a shorter), then
// layer_type_quant_config["Linear"], then global_quant_config.
QuantScheme quant_scheme(const ModelConfig& c, const TensorSpec& s);

// The scheme of one tensor Tandem builds from several checkpoint tensors (routed experts stacked
// [E, N, K], gate|up stacked rows). A Weight has one format, so when the parts disagree (say
// experts.17 of a layer is excluded and the others are not) the fused tensor loads dense: the
// quantized parts are dequantized, which is exact, rather than quantizing the excluded part.
// `fused` names the fused tensor for the rule text.
QuantScheme fused_quant_scheme(const std::vector<QuantScheme>& parts, const std::string& fused);
QuantScheme fused_quant_scheme(const ModelConfig& c, const std::vector<TensorSpec>& parts,
                               const std::string& fused);

// What the checkpoint holds for one tensor.
struct StoredTensor {
  DType dtype = DType::BF16;
  bool has_scale_inv = false;  // a sibling "<module>.weight_scale_inv" (FP8 block scales)
  bool has_scale = false;      // a sibling "<module>.weight_scale" (Quark e8m0 scales)
};

struct StorageDecision {
  WeightFormat format = WeightFormat::kDense;  // how to read the stored bytes
  int64_t block_n = 0, block_k = 0;            // of the stored scales
  bool quantize_at_load = false;  // online: quantize the dense data to the scheme's format
  std::string warning;            // set when the storage contradicts the scheme (loaded as stored)
};

// Reconciles the scheme with the stored dtype. Unambiguous contradictions load as stored with a
// warning (bf16 where FP8 was expected -> dense; FP8 with its weight_scale_inv where dense was
// expected -> FP8). Ambiguous ones throw naming the tensor and the rule: quantized data with no
// scale, a scale next to high-precision data, a dtype no format stores.
StorageDecision resolve_storage(const ModelConfig& c, const TensorSpec& s, const QuantScheme& q,
                                const StoredTensor& st);

}  // namespace tandem
