// Writes a random-weight checkpoint of any supported configuration in the Hugging Face Hub
// layout (config.json, safetensors shards, index). Seeded and reproducible.
#pragma once

#include <cstdint>
#include <string>

#include <utility>

#include "core/tensor.h"
#include "model/config.h"

namespace tandem {

struct RandomCheckpointOptions {
  uint64_t seed = 0;
  std::string dtype = "bf16";  // storage of high-precision tensors: bf16 | f32
  std::string quant;           // "" | "fp8" (128x128 blocks) | "mxfp4" (groups of 32)
  uint64_t max_shard_bytes = 2ull << 30;
};

// The quantization_config make-checkpoint writes for --quant fp8 (GLM-5-FP8 / DeepSeek-V3.x keys)
// and --quant mxfp4 (AMD Quark layout, MoE experts only).
QuantConfig fp8_checkpoint_quant(const ModelConfig& c);
QuantConfig mxfp4_checkpoint_quant(const ModelConfig& c);

void write_random_checkpoint(const ModelConfig& c, const std::string& dir,
                             const RandomCheckpointOptions& o);
// Only the config.json write_random_checkpoint would write (its quantization_config included):
// a folder for --load-format dummy at sizes too large to write weights for. Returns it.
ModelConfig write_checkpoint_config(const ModelConfig& c, const std::string& dir,
                                    const RandomCheckpointOptions& o);

// Block-quantizes a dense f32 [N, K] matrix: FP8 e4m3 with fp32 weight_scale_inv per
// (block_n x block_k) tile, or MXFP4 with an e8m0 scale per 32 values. Returns {weight, scale}.
std::pair<Tensor, Tensor> quantize_fp8_block(const Tensor& w, int64_t block_n, int64_t block_k);
std::pair<Tensor, Tensor> quantize_mxfp4(const Tensor& w, int64_t group);

}  // namespace tandem
