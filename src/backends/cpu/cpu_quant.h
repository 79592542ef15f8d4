// The CPU reference of quantized linear products (docs/quantization.md): activation
// quantization per token and group, and the block-scaled row product over a quantized weight.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/weight.h"

namespace tandem::cpu {

// One token's input as a quantized weight consumes it: v [K] the values the product multiplies
// (e4m3 or e2m1 values as floats, or the input itself for ActQuant::kNone) and s [kb] one
// scale per group of block_k (1 for kNone).
struct QuantInput {
  std::vector<float> v;
  std::vector<float> s;
};

// Quantizes x [K] by w's activation rule (w.act, w.block_k, w.ue8m0).
void quantize_input(const float* x, int64_t K, const Weight& w, QuantInput& out);

// Decodes row n of a plain [N, K] quantized weight into unscaled element values: row [K].
void decode_weight_row(const Weight& w, int64_t n, float* row);

// The contract's product for one output element: sum over K blocks b of
// ws[n / bn, b] * in.s[b] * (row[b] . in.v[b]), row from decode_weight_row.
float quant_dot(const Weight& w, int64_t n, const float* row, const QuantInput& in);

}  // namespace tandem::cpu
