// A linear layer's weight in whatever form the checkpoint (or the backend) keeps it.
#pragma once

#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace tandem {

enum class WeightFormat : uint8_t {
  kDense,     // w: [N, K] f32 / bf16 / f16
  kFp8Block,  // w: [N, K] f8_e4m3; scale: [ceil(N/block_n), ceil(K/block_k)] f32 (weight_scale_inv)
  kMxfp4,     // w: [N, K/2] fp4x2 (low nibble first); scale: [N, K/32] e8m0
};

// How a quantized weight's input is quantized on the way in (docs/quantization.md): per token,
// per group of block_k input features.
enum class ActQuant : uint8_t {
  kNone,      // used as it comes (weight-only: W8A16, W4A16)
  kFp8Group,  // e4m3 with one fp32 scale max(amax, 1e-4) / 448 per group (W8A8)
  kMxfp4,     // e2m1 with one e8m0 scale 2^(floor(log2(amax)) - 2) per group of 32 (W4A4)
};

// A linear layer's weight, or a stack of them with a leading expert dimension (routed experts:
// w [E, N, K], scale [E, nb, kb]). Scale tensors may have padded rows (stride(-2) >= kb).
struct Weight {
  Tensor w;
  Tensor scale;  // undefined for kDense
  WeightFormat format = WeightFormat::kDense;
  int64_t block_n = 128, block_k = 128;  // kFp8Block tile; kMxfp4 uses block_k as the group size
  ActQuant act = ActQuant::kNone;        // quantized formats only
  bool ue8m0 = false;                    // kFp8Group: activation scales rounded up to 2^n

  static Weight from_dense(Tensor t) {
    Weight r;
    r.w = std::move(t);
    return r;
  }
  bool defined() const { return w.defined(); }
  bool quantized() const { return format != WeightFormat::kDense; }
  // Leading expert count (1 for a plain [N, K] weight).
  int64_t experts() const { return w.ndim() == 3 ? w.size(0) : 1; }
  int64_t out_features() const { return w.size(w.ndim() - 2); }
  int64_t in_features() const {
    return format == WeightFormat::kMxfp4 ? w.size(w.ndim() - 1) * 2 : w.size(w.ndim() - 1);
  }
  // K blocks per row (the scale's logical column count).
  int64_t k_blocks() const { return (in_features() + block_k - 1) / block_k; }
  int64_t n_blocks() const {
    return format == WeightFormat::kMxfp4 ? out_features()
                                          : (out_features() + block_n - 1) / block_n;
  }
  // The scale row of output feature n (MXFP4 scales are per row whatever block_n says).
  int64_t scale_row(int64_t n) const { return format == WeightFormat::kMxfp4 ? n : n / block_n; }
  // Expert e of a stacked weight, as a plain [N, K] weight sharing storage.
  Weight expert(int64_t e) const;
};

// Throws naming the expected shape unless the scale fits the weight's format and blocks
// (FP8: f32 [.., ceil(N/bn), ceil(K/bk)]; MXFP4: e8m0 [.., N, K/g]).
void check_weight_scale(const Weight& w);

// Dequantizes any [N, K] weight to a dense fp32 [N, K] host tensor.
Tensor dequantize_to_f32(const Weight& w);

// A contiguous host copy of a scale [.., nb, kb] with each row padded (zeros) to a multiple of
// `align` K blocks: [.., nb, roundup(kb, align)], the layout cuBLASLt's block-scaled mode reads.
// Narrow the last dim back to kb (after moving it to its device) for the weight's scale view.
Tensor pad_scale_rows(const Tensor& scale, int64_t align);

}  // namespace tandem
