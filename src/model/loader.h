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
#include "model/weights.h"

namespace tandem {

struct LoadOptions {
  Device device = Device::cpu();
  DType dtype = DType::F32;  // compute dtype of dense weights (the CPU backend wants f32)
  bool load_mtp = true;
  bool show_progress = true;  // a progress line on stderr for checkpoints over 256 MB
  // --quantization / --model-loader-extra-config, applied to the checkpoint's quantization_config
  // by Model::load (apply_online_quant).
  OnlineQuantRequest online_quant;
};

ModelWeights load_weights(const Checkpoint& ckpt, const ModelConfig& c, const LoadOptions& o);

}  // namespace tandem
