// Loads a checkpoint's weights for one backend: validates every tensor against the name table
// (present, right shape, a dtype we can use), resolves its storage format (dense, FP8 128x128
// block, MXFP4), converts it to the backend's compute form and builds the derived tensors
// (stacked experts, fused gate/up, absorbed W_UK/W_UV).
#pragma once

#include <functional>
#include <string>

#include "core/device.h"
#include "core/dtype.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/shard.h"
#include "model/weights.h"

namespace tandem {

struct LoadOptions {
  Device device = Device::cpu();
  DType dtype = DType::F32;  // compute dtype of dense weights (the CPU backend wants f32)
  bool load_mtp = true;
  bool show_progress = true;  // a progress line on stderr for checkpoints over 256 MB
  // FP8 / MXFP4 linear weights stay quantized (docs/quantization.md); false dequantizes them to
  // `dtype` at load.
  bool keep_quantized = true;
  // --quantization / --model-loader-extra-config, applied to the checkpoint's quantization_config
  // by Model::load (apply_online_quant).
  OnlineQuantRequest online_quant;
  // Tensor / expert parallelism: this rank's share only is read (model/shard.h).
  ShardSpec shard;
};

// A host weight scale [.., nb, kb] on device d in the form the backends read: FP8 scales get rows
// padded to a multiple of 4 K blocks on CUDA (cuBLASLt's block-scaled layout); the result is a
// view of the logical columns.
Tensor place_weight_scale(const Tensor& host, WeightFormat f, Device d);

ModelWeights load_weights(const Checkpoint& ckpt, const ModelConfig& c, const LoadOptions& o);

}  // namespace tandem
