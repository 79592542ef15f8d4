// Tandem's quantization conventions against tensors made by outside tooling
// (scripts/quant_oracle/make_goldens.py on the GPU machine: torch's float8_e4m3fn conversion,
// transformers' fine-grained FP8 block algorithm written out in torch (transformers 5.17 exposes
// it only as a conversion-op class, Fp8Quantize), the DeepSeek reference's act_quant rule, and an
// independent OCP MXFP4 implementation in Quark's layout), committed in
// tests/data/quant/oracle.safetensors. A convention error shared by Tandem's quantizers and
// dequantizers (nibble order, scale direction, rounding) cannot cancel out here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/cpu_quant.h"
#include "core/dtype.h"
#include "model/random_checkpoint.h"
#include "model/safetensors.h"
#include "ops/weight.h"

namespace tandem {
namespace {

std::shared_ptr<SafetensorsFile> oracle() {
  return SafetensorsFile::open(std::string(TANDEM_SOURCE_DIR) +
                               "/tests/data/quant/oracle.safetensors");
}

const uint8_t* bytes(const Tensor& t) {
  return static_cast<const uint8_t*>(t.raw());
}

// Bitwise equality of two f32 tensors; reports the first difference.
void expect_same_bits(const Tensor& got, const Tensor& want, const char* what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const Tensor g = got.to_f32(), w = want.to_f32();
  for (int64_t i = 0; i < g.numel(); ++i)
    if (std::memcmp(g.data<float>() + i, w.data<float>() + i, 4) != 0) {
      ADD_FAILURE() << what << ": element " << i << " is " << g.data<float>()[i] << ", oracle "
                    << w.data<float>()[i];
      return;
    }
}

TEST(QuantOracle, E4m3ConversionEqualsTorch) {
  auto f = oracle();
  const Tensor in = f->tensor("e4m3_in"), codes = f->tensor("e4m3_codes");
  ASSERT_EQ(codes.dtype(), DType::F8_E4M3);
  int64_t differ = 0;
  for (int64_t i = 0; i < in.numel(); ++i)
    differ += f32_to_fp8_e4m3(in.data<float>()[i]) != bytes(codes)[i];
  EXPECT_EQ(differ, 0) << "of " << in.numel();
}

TEST(QuantOracle, Fp8BlockDequantizationEqualsTransformersAlgorithm) {
  auto f = oracle();
  const Tensor codes = f->tensor("fp8blk_codes"), scale = f->tensor("fp8blk_scale_inv");
  const Weight w{codes, scale, WeightFormat::kFp8Block, 128, 128};
  expect_same_bits(dequantize_to_f32(w), f->tensor("fp8blk_deq"), "dequantized weight");
  // Tandem's block quantizer (make-checkpoint) on the same weight: scale amax / 448 where
  // transformers takes 1 / (448 / amax), so a code may land one step apart at a rounding edge.
  auto [q, s] = quantize_fp8_block(f->tensor("fp8blk_in"), 128, 128);
  int64_t differ = 0, far = 0;
  for (int64_t i = 0; i < q.numel(); ++i) {
    const float a = fp8_e4m3_to_f32(bytes(q)[i]), b = fp8_e4m3_to_f32(bytes(codes)[i]);
    differ += a != b;
    far += std::fabs(a - b) > std::fabs(b) * 0.13f + 1e-6f;  // more than one e4m3 step
  }
  std::printf(
      "  FP8 block codes differing from transformers': %lld of %lld (none by more than one "
      "step: %s)\n",
      static_cast<long long>(differ), static_cast<long long>(q.numel()), far == 0 ? "yes" : "no");
  EXPECT_EQ(far, 0);
  EXPECT_LE(differ, q.numel() / 1000);
  for (int64_t i = 0; i < s.numel(); ++i)
    EXPECT_NEAR(s.data<float>()[i], scale.data<float>()[i], 1e-6 * scale.data<float>()[i]);
}

TEST(QuantOracle, Fp8ActivationsEqualTheReferenceActQuant) {
  auto f = oracle();
  const Tensor x = f->tensor("fp8act_in");  // [5, 512]
  for (bool ue8m0 : {false, true}) {
    const std::string tag = ue8m0 ? "ue8m0" : "plain";
    const Tensor codes = f->tensor("fp8act_" + tag + "_codes"),
                 sc = f->tensor("fp8act_" + tag + "_scale");
    Weight w;
    w.format = WeightFormat::kFp8Block;
    w.block_k = 128;
    w.act = ActQuant::kFp8Group;
    w.ue8m0 = ue8m0;
    for (int64_t t = 0; t < x.size(0); ++t) {
      cpu::QuantInput in;
      cpu::quantize_input(x.data<float>() + t * 512, 512, w, in);
      for (int64_t k = 0; k < 512; ++k)
        ASSERT_EQ(in.v[k], fp8_e4m3_to_f32(bytes(codes)[t * 512 + k]))
            << tag << " " << t << "," << k;
      for (int64_t b = 0; b < 4; ++b)
        ASSERT_EQ(in.s[b], sc.data<float>()[t * 4 + b]) << tag << " scale " << t << "," << b;
    }
  }
}

TEST(QuantOracle, Mxfp4MatchesAnIndependentQuarkLayoutImplementation) {
  auto f = oracle();
  const Tensor codes = f->tensor("mx_codes"), scale = f->tensor("mx_scale");
  const Weight w{Tensor::wrap(codes.raw(), codes.shape(), DType::FP4X2, Device::cpu()), scale,
                 WeightFormat::kMxfp4, 1, 32};
  expect_same_bits(dequantize_to_f32(w), f->tensor("mx_deq"), "dequantized MXFP4 weight");
  // Activations: Tandem's W4A4 input rule against the oracle's quantize-dequantize.
  const Tensor x = f->tensor("mxact_in"), qdq = f->tensor("mxact_qdq");  // [8, 256]
  Weight a;
  a.format = WeightFormat::kMxfp4;
  a.block_n = 1;
  a.block_k = 32;
  a.act = ActQuant::kMxfp4;
  for (int64_t t = 0; t < x.size(0); ++t) {
    cpu::QuantInput in;
    cpu::quantize_input(x.data<float>() + t * 256, 256, a, in);
    for (int64_t k = 0; k < 256; ++k)
      ASSERT_EQ(in.v[k] * in.s[k / 32], qdq.data<float>()[t * 256 + k]) << t << "," << k;
  }
}

}  // namespace
}  // namespace tandem
