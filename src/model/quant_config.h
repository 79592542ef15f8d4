// Quantization configs as written: a checkpoint's config.json `quantization_config` (the FP8
// block layout of DeepSeek-V3.x / GLM-5.x-FP8, AMD Quark's MXFP4 layout) and SGLang's launch flags
// for online quantization (`--quantization fp8`, `--model-loader-extra-config
// '{"online_quant_config": ...}'`). Parsing is complete: every field Tandem reads is checked, and
// an unsupported value is refused naming the field. What each tensor becomes is decided by
// quant_scheme() (model/quant_scheme.h), through the checkpoint name table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>
#include "ops/weight.h"

namespace tandem {

// How a quantized weight's input activations are quantized on the way in (docs/quantization.md).
// Local name: ops/weight.h is gaining `enum class ActQuant` with exactly these values; when it
// lands this becomes `using QuantActivation = ActQuant;`.
using QuantActivation = ActQuant;

// One Quark QuantizationSpec (the quantization of one tensor role), reduced to the fields that
// change the numbers. Only OCP MXFP4 is runnable: dtype fp4, per_group, group_size 32, e8m0.
struct QuarkTensorQuant {
  std::string dtype = "fp4";
  std::string qscheme = "per_group";
  int64_t group_size = 32;
  std::string scale_format = "e8m0";
  bool is_dynamic = false;  // false: precomputed (weights); true: computed per token (inputs)
  bool operator==(const QuarkTensorQuant&) const = default;
};

// A Quark QuantizationConfig: per role, a spec or nothing (JSON null = that role stays high
// precision). weight null means the layer is not quantized at all; input null means weight-only.
struct QuarkLayerQuant {
  std::optional<QuarkTensorQuant> weight, input;
  bool operator==(const QuarkLayerQuant&) const = default;
};

struct QuantConfig {
  // "" (none), "fp8" (block FP8, from the checkpoint or online), "quark" (AMD MXFP4), "mxfp4"
  // (the other GLM MXFP4 spelling, read like a Quark config).
  std::string method;
  // fp8: weight_block_size [block_n, block_k]; per_channel (online ptpc_fp8) means block_n = 1 and
  // block_k = each tensor's K.
  int64_t block_n = 128, block_k = 128;
  bool per_channel = false;
  bool ue8m0 = false;  // scale_fmt "ue8m0": activation scales rounded up to powers of two
  // quark: global_quant_config, then per module-name pattern (layer_quant_config, in file order)
  // and per module type (layer_type_quant_config: "Linear" is every Tandem linear weight).
  // Defaults to MXFP4 weights with unquantized inputs until a config says otherwise.
  QuarkLayerQuant global{QuarkTensorQuant{}, std::nullopt};
  std::vector<std::pair<std::string, QuarkLayerQuant>> layer_rules;
  std::vector<std::pair<std::string, QuarkLayerQuant>> layer_type_rules;
  int64_t group_size = 32;  // the global weight group size (MXFP4: 32)
  // Modules kept in high precision, in the config's own order: Quark's `exclude`, fp8's
  // `modules_to_not_convert` and vLLM's `ignored_layers`, online `exclude_layer`. See
  // quant_rule_matches for the spellings.
  std::vector<std::string> exclude;
  // Weights stored in high precision and quantized while loading (--quantization fp8 on a bf16
  // checkpoint, or online_quant_config).
  bool online = false;
  std::string online_scheme;  // "fp8" (128x128 blocks) | "ptpc_fp8" (per output channel)

  // The first exclude rule matching any of `names` (a tensor's checkpoint and runtime module
  // names), or nullopt.
  std::optional<std::string> excluded_by(const std::vector<std::string>& names) const;
  bool is_excluded(const std::string& module) const { return excluded_by({module}).has_value(); }
  bool operator==(const QuantConfig&) const = default;
};

// Whether one rule names one module. Rules come in four spellings:
//   "re:<regex>"  Python re.match: anchored at the start of the name, not at its end (Quark, vLLM);
//   a glob with * ? or [...]: fnmatch over the whole name, '*' crossing dots (online
//   exclude_layer); a dotted or bare name: a run of whole dot-separated segments of the module
//   name, so
//     "lm_head" matches "lm_head", "model.layers.3.mlp.experts" matches every expert under it
//     (modules_to_not_convert prefixes) and "mlp.gate" matches "model.layers.5.mlp.gate" but
//     not "...mlp.gate_proj".
bool quant_rule_matches(const std::string& rule, const std::string& module);

// Parses a config.json `quantization_config` object. `src` names the file for errors.
QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& src);
// The quantization_config a checkpoint of this config carries, in the layout the real ones use.
nlohmann::json quant_config_to_json(const QuantConfig& q);

// What the launch flags ask for, parsed (and checked) before the checkpoint is opened.
struct OnlineQuantRequest {
  std::string quantization;          // --quantization as given: "" | "fp8" | "quark" | "mxfp4"
  std::string scheme;                // online_quant_config.global_quant_config: "" | "ptpc_fp8"
  std::vector<std::string> exclude;  // online_quant_config.exclude_layer (globs)
  // --weight-only-quant: a Quark / MXFP4 checkpoint's weights as stored, its activations left in
  // bf16 (W4A16) even where input_tensors quantizes them (W4A4, what AMD calibrates for).
  bool weight_only = false;
  bool empty() const { return quantization.empty() && scheme.empty() && !weight_only; }
};

// Parses --quantization and --model-loader-extra-config. Throws InvalidArgument naming the flag
// and the key for anything unknown.
OnlineQuantRequest parse_online_quant(const std::string& quantization_flag,
                                      const std::string& loader_extra_config);

// The checkpoint's quantization with the launch flags applied. A bf16 checkpoint becomes
// online FP8 (128x128 blocks for --quantization fp8, per-channel for ptpc_fp8). A checkpoint that
// is already quantized keeps its own config when --quantization names its method, and is refused
// for anything else (online quantization needs high-precision weights). Throws InvalidArgument.
QuantConfig apply_online_quant(const QuantConfig& checkpoint, const OnlineQuantRequest& r,
                               const std::string& src);

// A Quark / MXFP4 config with every input_tensors rule (global, per layer, per layer type)
// dropped: weight-only, as if the checkpoint had said input_tensors null everywhere. A copy: the
// parsed config is not touched. Throws InvalidArgument for any other method.
QuantConfig without_activation_quant(const QuantConfig& q, const std::string& src);

}  // namespace tandem
