// FP8 (128x128 block) and MXFP4 (e8m0 per 32) quantization round trips, and the element codecs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/rng.h"
#include "model/random_checkpoint.h"
#include "ops/weight.h"

namespace tandem {
namespace {

// ||a - b|| / ||b||; different or zero sizes, or an all-zero reference, fail and give +inf.
double rel(const Tensor& a, const Tensor& b) {
  if (a.numel() != b.numel() || a.numel() == 0) {
    ADD_FAILURE() << "rel: sizes differ or are zero (" << a.numel() << " vs " << b.numel() << ")";
    return std::numeric_limits<double>::infinity();
  }
  double n = 0, d = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    n += std::pow(a.data<float>()[i] - b.data<float>()[i], 2);
    d += std::pow(b.data<float>()[i], 2);
  }
  if (!(d > 0) || !std::isfinite(n)) {
    ADD_FAILURE() << "rel: all-zero reference or non-finite difference";
    return std::numeric_limits<double>::infinity();
  }
  return std::sqrt(n / d);
}

TEST(Quant, Fp8CodecIsExactOnItsGrid) {
  for (int c = 0; c < 256; ++c) {
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    const uint8_t back = f32_to_fp8_e4m3(v);
    EXPECT_EQ(fp8_e4m3_to_f32(back), v) << c;
  }
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1000.0f)), 448.0f);  // saturates
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1.0625f)), 1.0f);    // ties to even
  EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(1.1875f)), 1.25f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(0.1f)), 0.0999755859375f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.00390625f)), 1.0f);  // ties to even
}

// The fact the MXFP4-as-FP8 conversion of the GPU's grouped kernels rests on (mxfp4_fp8.cu,
// docs/quantization.md): every e2m1 magnitude times 2^-d is an e4m3 number for d = 0..8, and
// from d = 9 on some are not (so groups more than 8 binades below their block's largest round).
TEST(Quant, E2m1ScaledDownEightBinadesIsE4m3) {
  const float e2m1[] = {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int d = 0; d <= 8; ++d)
    for (float m : e2m1) {
      const float v = std::ldexp(m, -d);
      EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(v)), v) << m << " * 2^-" << d;
      EXPECT_EQ(fp8_e4m3_to_f32(f32_to_fp8_e4m3(-v)), -v) << "-" << m << " * 2^-" << d;
    }
  int inexact = 0;
  for (float m : e2m1) {
    const float v = std::ldexp(m, -9);
    inexact += fp8_e4m3_to_f32(f32_to_fp8_e4m3(v)) != v;
  }
  EXPECT_GT(inexact, 0) << "at d = 9 the grid should lose some e2m1 values";
}

TEST(Quant, BlockRoundTrips) {
  Rng rng(3);
  for (auto [n, k] : std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {200, 300}, {128, 256}}) {
    Tensor w = Tensor::empty({n, k}, DType::F32);
    for (int64_t i = 0; i < w.numel(); ++i)
      w.data<float>()[i] = static_cast<float>(rng.normal() * (1 + i % 7));
    auto [q, s] = quantize_fp8_block(w, 128, 128);
    const Tensor d = dequantize_to_f32(Weight{q, s, WeightFormat::kFp8Block, 128, 128});
    EXPECT_LT(rel(d, w), 0.04) << n << "x" << k;  // e4m3: 3 mantissa bits
    if (k % 32 == 0) {
      auto [q4, s4] = quantize_mxfp4(w, 32);
      const Tensor d4 =
          dequantize_to_f32(Weight{Tensor::wrap(q4.raw(), q4.shape(), DType::FP4X2, Device::cpu()),
                                   s4, WeightFormat::kMxfp4, 128, 32});
      EXPECT_LT(rel(d4, w), 0.25) << n << "x" << k;
      EXPECT_GT(rel(d4, w), 0.01);
    }
  }
}

}  // namespace
}  // namespace tandem
