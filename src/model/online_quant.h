// Online quantization: a high-precision weight quantized while loading, to the format its
// QuantScheme names (--quantization fp8: 128x128 block FP8; online_quant_config ptpc_fp8: FP8 with
// one scale per output channel, i.e. block_n = 1, block_k = K).
#pragma once

#include "core/tensor.h"
#include "model/quant_scheme.h"
#include "ops/weight.h"

namespace tandem {

// f32: [N, K] or stacked experts [E, N, K], fp32 on the host. Returns the weight in the scheme's
// format: kFp8Block w [.., N, K] e4m3 with scale [.., ceil(N/bn), ceil(K/bk)] f32; kMxfp4 w
// [.., N, K/2] fp4x2 with scale [.., N, K/32] e8m0; kDense: the input unchanged.
Weight quantize_weight(const Tensor& f32, const QuantScheme& q);

}  // namespace tandem
