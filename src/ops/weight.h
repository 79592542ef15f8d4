// A linear layer's weight in whatever form the checkpoint (or the backend) keeps it.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tandem {

enum class WeightFormat : uint8_t {
  kDense,     // w: [N, K] f32 / bf16 / f16
  kFp8Block,  // w: [N, K] f8_e4m3; scale: [ceil(N/block_n), ceil(K/block_k)] f32 (weight_scale_inv)
  kMxfp4,     // w: [N, K/2] fp4x2 (low nibble first); scale: [N, K/32] e8m0
};

struct Weight {
  Tensor w;
  Tensor scale;  // undefined for kDense
  WeightFormat format = WeightFormat::kDense;
  int64_t block_n = 128, block_k = 128;  // kFp8Block tile; kMxfp4 uses block_k as the group size

  bool defined() const { return w.defined(); }
  int64_t out_features() const { return w.size(0); }
  int64_t in_features() const { return format == WeightFormat::kMxfp4 ? w.size(1) * 2 : w.size(1); }
};

// Dequantizes any weight to a dense fp32 [N, K] host tensor (the CPU backend's form).
Tensor dequantize_to_f32(const Weight& w);

}  // namespace tandem
