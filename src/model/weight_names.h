// The one table mapping checkpoint tensor names to runtime modules. Everything that reads or
// writes a checkpoint (the loader, make-checkpoint, quantization exclude rules) goes through it.
// The MTP layer keeps its checkpoint prefix model.layers.{num_hidden_layers}, so exclude rules
// written against the checkpoint ("re:model.layers.78.*") apply to it unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace tandem {

enum class Slot {
  kEmbed,
  kFinalNorm,
  kLmHead,
  kInputNorm,
  kPostAttnNorm,
  kQaProj,
  kQaNorm,
  kQbProj,
  kQProj,
  kKvaProj,
  kKvaNorm,
  kKvbProj,
  kOProj,
  kIdxWqb,
  kIdxWk,
  kIdxKNormW,
  kIdxKNormB,
  kIdxWeightsProj,
  kMlpGate,
  kMlpUp,
  kMlpDown,
  kRouter,
  kRouterBias,
  kExpertGate,
  kExpertUp,
  kExpertDown,
  kSharedGate,
  kSharedUp,
  kSharedDown,
  kMtpEnorm,
  kMtpHnorm,
  kMtpEhProj,
  kMtpHeadNorm,
  kMtpEmbed,
  kMtpHead,
};

struct TensorSpec {
  std::string module;  // e.g. "model.layers.3.mlp.experts.7.gate_proj"
  std::string param;   // "weight", "bias", "e_score_correction_bias"
  Slot slot;
  int64_t layer = -1;   // -1: top level; num_hidden_layers: the MTP layer
  int64_t expert = -1;  // routed expert index
  std::vector<int64_t> shape;
  bool linear = false;    // a Linear weight that a quantized checkpoint may store as FP8/MXFP4
  bool optional = false;  // may be absent (DeepSeek's duplicated MTP embed/head)

  std::string name() const { return module + "." + param; }
};

// Every tensor the config needs, main model first, then the MTP layer if include_mtp.
std::vector<TensorSpec> weight_name_table(const ModelConfig& c, bool include_mtp);

// Whether a Linear weight must stay in high precision whatever the quantization config says
// (routers, the indexer's weights_proj, MTP's eh_proj, embeddings and heads).
bool always_high_precision(Slot s);

// Whether the checkpoint should store this tensor quantized: quant_scheme() (model/quant_scheme.h)
// says FP8 or MXFP4 and the weights are not quantized online.
bool expects_quantized(const ModelConfig& c, const TensorSpec& s);

}  // namespace tandem
