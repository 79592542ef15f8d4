// The CPU reference of quantized products (docs/quantization.md) against a direct double-precision
// evaluation of the contract written here from scratch, over a sweep of shapes and formats: the
// activation rules (FP8 groups with and without ue8m0, MXFP4), the block-scaled linear, and the
// quantized experts against the linear they are made of.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "backends/init.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/random_checkpoint.h"
#include "ops/ops.h"

namespace tandem {
namespace {

// e2m1's grid, written out rather than taken from the code under test.
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

struct QuantOps : ::testing::Test {
  Workspace ws{Device::cpu()};
  Rng rng{7};
  void SetUp() override { init_backends(); }

  // Activations with a spread of magnitudes per group, as hidden states have (outlier channels).
  Tensor activations(int64_t T, int64_t K) {
    Tensor x = Tensor::empty({T, K}, DType::F32);
    for (int64_t i = 0; i < x.numel(); ++i)
      x.data<float>()[i] = static_cast<float>(rng.normal() * (i % 13 == 0 ? 8.0 : 1.0));
    return x;
  }
  Tensor matrix(int64_t N, int64_t K, double scale) {
    Tensor w = Tensor::empty({N, K}, DType::F32);
    for (int64_t i = 0; i < w.numel(); ++i)
      w.data<float>()[i] = static_cast<float>(rng.normal() * scale * (1 + i % 5));
    return w;
  }
  // An FP8 block or MXFP4 weight made by the checkpoint writer's quantizers.
  Weight quantized(const Tensor& w, WeightFormat f, int64_t bn, int64_t bk, ActQuant act,
                   bool ue8m0 = false) {
    Weight q;
    q.format = f;
    q.act = act;
    q.ue8m0 = ue8m0;
    if (f == WeightFormat::kFp8Block) {
      auto [codes, scale] = quantize_fp8_block(w, bn, bk);
      q.w = codes, q.scale = scale, q.block_n = bn, q.block_k = bk;
    } else {
      auto [codes, scale] = quantize_mxfp4(w, bk);
      q.w = Tensor::wrap(codes.raw(), codes.shape(), DType::FP4X2, Device::cpu());
      q.scale = scale, q.block_n = 1, q.block_k = bk;
      keep_.push_back(codes);
    }
    return q;
  }
  std::vector<Tensor> keep_;
};

// The contract's activation quantization of one group, in doubles: {values, scale}.
std::pair<std::vector<double>, double> ref_quantize_group(const float* x, int64_t n, ActQuant act,
                                                          bool ue8m0) {
  double amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(double{x[i]}));
  std::vector<double> v(static_cast<size_t>(n));
  if (act == ActQuant::kNone) {
    for (int64_t i = 0; i < n; ++i) v[i] = x[i];
    return {v, 1.0};
  }
  if (act == ActQuant::kFp8Group) {
    float s = static_cast<float>(std::max(amax, 1e-4) / 448.0);
    if (ue8m0) s = static_cast<float>(std::pow(2.0, std::ceil(std::log2(double{s}))));
    for (int64_t i = 0; i < n; ++i) v[i] = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x[i] / s));
    return {v, s};
  }
  const double s = amax > 0 ? std::pow(2.0, std::floor(std::log2(amax)) - 2) : 1.0;
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(x[i] / s);
    int best = 7;
    for (int c = 0; c < 7; ++c) {
      const double mid = 0.5 * (kE2m1[c] + kE2m1[c + 1]);
      if (a < mid || (a == mid && c % 2 == 0)) {
        best = c;
        break;
      }
    }
    v[i] = std::copysign(kE2m1[best], x[i]);
  }
  return {v, s};
}

// out[t, n] = sum_b ws[n, b] * s[t, b] * sum_{k in b} w[n, k] * x8[t, k], in doubles.
std::vector<double> ref_linear(const Tensor& x, const Weight& w) {
  const int64_t T = x.size(0), K = x.size(1), N = w.out_features(), g = w.block_k;
  const Tensor codes = w.w.to_f32();  // [N, K] element values, unscaled
  std::vector<double> out(static_cast<size_t>(T * N));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b * g < K; ++b) {
      const int64_t k0 = b * g, len = std::min(K, k0 + g) - k0;
      auto [v, s] = ref_quantize_group(x.data<float>() + t * K + k0, len, w.act, w.ue8m0);
      for (int64_t n = 0; n < N; ++n) {
        double dot = 0;
        for (int64_t k = 0; k < len; ++k) dot += codes.data<float>()[n * K + k0 + k] * v[k];
        const int64_t row = w.format == WeightFormat::kMxfp4 ? n : n / w.block_n;
        const double ws = w.format == WeightFormat::kMxfp4
                              ? e8m0_to_f32(static_cast<const uint8_t*>(
                                    w.scale.raw())[row * w.scale.stride(0) + b])
                              : w.scale.data<float>()[row * w.scale.stride(0) + b];
        out[t * N + n] += ws * s * dot;
      }
    }
  return out;
}

double rel_err(const Tensor& got, const std::vector<double>& want) {
  const auto g = to_float_vector(got);
  double num = 0, den = 0;
  for (size_t i = 0; i < g.size(); ++i)
    num += std::pow(g[i] - want[i], 2), den += want[i] * want[i];
  EXPECT_GT(den, 0.0);
  return std::sqrt(num / den);
}

TEST(QuantCodecs, E2m1RoundsToNearestEvenAndSaturates) {
  const std::vector<std::pair<float, float>> cases = {
      {0.25f, 0.0f}, {0.26f, 0.5f},   {0.75f, 1.0f},  {1.25f, 1.0f}, {1.75f, 2.0f},
      {2.5f, 2.0f},  {3.5f, 4.0f},    {5.0f, 4.0f},   {5.1f, 6.0f},  {7.0f, 6.0f},
      {1e9f, 6.0f},  {-0.75f, -1.0f}, {-3.5f, -4.0f}, {-0.1f, 0.0f}};
  for (auto [in, want] : cases) EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(in)), want) << in;
  for (uint8_t c = 0; c < 16; ++c) {
    const float v = fp4_e2m1_to_f32(c);
    EXPECT_EQ(fp4_e2m1_to_f32(f32_to_fp4_e2m1(v)), v) << int{c};
  }
}

// The block-scaled linear over formats, activation rules and shapes with partial blocks.
TEST_F(QuantOps, LinearMatchesTheContract) {
  struct Case {
    WeightFormat f;
    int64_t bn, bk;
    ActQuant act;
    bool ue8m0;
  };
  const std::vector<Case> cases = {
      {WeightFormat::kFp8Block, 128, 128, ActQuant::kFp8Group, false},
      {WeightFormat::kFp8Block, 128, 128, ActQuant::kFp8Group, true},
      {WeightFormat::kFp8Block, 128, 128, ActQuant::kNone, false},
      {WeightFormat::kFp8Block, 1, 0, ActQuant::kFp8Group, false},  // per channel: bk = K
      {WeightFormat::kMxfp4, 1, 32, ActQuant::kMxfp4, false},
      {WeightFormat::kMxfp4, 1, 32, ActQuant::kNone, false},
  };
  for (const Case& c : cases)
    for (auto [T, N, K] : std::vector<std::array<int64_t, 3>>{
             {1, 64, 128}, {3, 200, 320}, {17, 129, 256}, {5, 7, 96}}) {
      if (c.f == WeightFormat::kFp8Block && c.bn == 128 && K % 32 != 0) continue;
      const int64_t bk = c.bk == 0 ? K : c.bk;
      const Tensor x = activations(T, K);
      const Weight w = quantized(matrix(N, K, 0.05), c.f, c.bn, bk, c.act, c.ue8m0);
      const Tensor got = ops::linear(ws, x, w);
      const std::string what = std::to_string(static_cast<int>(c.f)) + "/" +
                               std::to_string(static_cast<int>(c.act)) + (c.ue8m0 ? "/ue8m0" : "") +
                               " " + std::to_string(T) + "x" + std::to_string(N) + "x" +
                               std::to_string(K);
      EXPECT_LT(rel_err(got, ref_linear(x, w)), 2e-6) << what;
    }
}

// Quantizing the activations changes the result (the rule is really applied), by about the
// element format's precision.
TEST_F(QuantOps, ActivationQuantizationIsApplied) {
  const Tensor x = activations(4, 256);
  const Tensor w = matrix(96, 256, 0.05);
  for (auto [f, act, lo, hi] : std::vector<std::tuple<WeightFormat, ActQuant, double, double>>{
           {WeightFormat::kFp8Block, ActQuant::kFp8Group, 1e-3, 0.06},
           {WeightFormat::kMxfp4, ActQuant::kMxfp4, 1e-2, 0.3}}) {
    const int64_t bn = f == WeightFormat::kMxfp4 ? 1 : 128,
                  bk = f == WeightFormat::kMxfp4 ? 32 : 128;
    const Weight wa = quantized(w, f, bn, bk, act);
    Weight wo = wa;
    wo.act = ActQuant::kNone;
    const Tensor with = ops::linear(ws, x, wa);
    const double diff = rel_err(with, [&] {
      const auto v = to_float_vector(ops::linear(ws, x, wo));
      return std::vector<double>(v.begin(), v.end());
    }());
    EXPECT_GT(diff, lo) << static_cast<int>(f);
    EXPECT_LT(diff, hi) << static_cast<int>(f);
  }
}

// ue8m0 activation scales are powers of two: every product stays on the e4m3 grid times 2^n, so
// the result differs from plain scales, and both stay within e4m3's precision of W8A16.
TEST_F(QuantOps, Ue8m0ScalesDifferFromPlainScales) {
  const Tensor x = activations(2, 256);
  const Weight plain = quantized(matrix(64, 256, 0.05), WeightFormat::kFp8Block, 128, 128,
                                 ActQuant::kFp8Group, false);
  Weight pow2 = plain;
  pow2.ue8m0 = true;
  const auto a = to_float_vector(ops::linear(ws, x, plain));
  const auto b = to_float_vector(ops::linear(ws, x, pow2));
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_GT(differ, static_cast<int>(a.size() / 2));
}

// Quantized experts equal the quantized linear they are made of: each chosen expert's gate|up
// on the token, silu(gate) * up requantized by the down weight's rule, the down projection, and
// the routing-weighted sum in slot order. Bit-exact, over experts with no tokens too.
TEST_F(QuantOps, ExpertsEqualTheirLinears) {
  for (WeightFormat f : {WeightFormat::kFp8Block, WeightFormat::kMxfp4}) {
    const int64_t E = 5, I = 128, D = 256, k = 2, T = 6;
    const bool fp8 = f == WeightFormat::kFp8Block;
    const ActQuant act = fp8 ? ActQuant::kFp8Group : ActQuant::kMxfp4;
    const int64_t bn = fp8 ? 128 : 1, bk = fp8 ? 128 : 32;
    std::vector<Weight> gu, dn;
    for (int64_t e = 0; e < E; ++e) {
      gu.push_back(quantized(matrix(2 * I, D, 0.05), f, bn, bk, act));
      dn.push_back(quantized(matrix(D, I, 0.05), f, bn, bk, act));
    }
    // Stack [E, N, K] codes and [E, nb, kb] scales.
    auto stack = [](const std::vector<Weight>& parts) {
      Weight s = parts.front();
      std::vector<int64_t> ws = parts[0].w.shape().vec(), ss = parts[0].scale.shape().vec();
      ws.insert(ws.begin(), static_cast<int64_t>(parts.size()));
      ss.insert(ss.begin(), static_cast<int64_t>(parts.size()));
      s.w = Tensor::empty(Shape(ws), parts[0].w.dtype());
      s.scale = Tensor::empty(Shape(ss), parts[0].scale.dtype());
      for (size_t e = 0; e < parts.size(); ++e) {
        s.w.select(0, static_cast<int64_t>(e)).copy_from(parts[e].w);
        s.scale.select(0, static_cast<int64_t>(e)).copy_from(parts[e].scale);
      }
      return s;
    };
    const Weight gate_up = stack(gu), down = stack(dn);
    const Tensor x = activations(T, D);
    // Expert 3 gets no token; token order of slots is not sorted by expert.
    const std::vector<int32_t> idx = {4, 0, 0, 2, 1, 4, 2, 0, 4, 1, 0, 2};
    std::vector<float> wts;
    for (int64_t i = 0; i < T * k; ++i) wts.push_back(0.25f + 0.1f * static_cast<float>(i % 4));
    const ops::Routing r{Tensor::from_vector(idx, {T, k}), Tensor::from_vector(wts, {T, k})};
    const auto got = to_float_vector(ops::moe_experts(ws, x, gate_up, down, r));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<float> acc(static_cast<size_t>(D), 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const int64_t e = idx[t * k + j];
        const Tensor g = ops::linear(ws, x.narrow(0, t, 1), gate_up.expert(e));  // [1, 2I]
        Tensor h = Tensor::empty({1, I}, DType::F32);
        for (int64_t i = 0; i < I; ++i) {
          const float a = g.data<float>()[i], u = g.data<float>()[I + i];
          h.data<float>()[i] = a / (1.0f + std::exp(-a)) * u;
        }
        const Tensor y = ops::linear(ws, h, down.expert(e));  // [1, D]
        for (int64_t d = 0; d < D; ++d) acc[d] += wts[t * k + j] * y.data<float>()[d];
      }
      for (int64_t d = 0; d < D; ++d)
        ASSERT_EQ(got[t * D + d], acc[d]) << (fp8 ? "fp8" : "mxfp4") << " t" << t << " d" << d;
    }
  }
}

}  // namespace
}  // namespace tandem
