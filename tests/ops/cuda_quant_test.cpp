// The kernels for quantized weights (backends/cuda/quant_kernels.h, lt_fp8.h) against a host
// implementation of the numerics contract (docs/quantization.md), written here from the
// contract's text: activation quantization bit for bit, the products up to fp32 summation
// order, and batch invariance (a row alone equals the same row in a batch, bitwise).
// Fresh random inputs with realistic scales (weights around 1e-2 after scaling, activations
// around 1 with outliers), never zeros; edge sizes M = 1, 3, 4, 17, 64, 65, 300, N and K not
// multiples of 128, experts without tokens.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_fp8.h"
#include "backends/cuda/quant_kernels.h"
#include "backends/init.h"
#include "core/tensor.h"
#include "cuda_quant_util.h"
#include "ops/backend.h"
#include "ops/weight.h"

namespace tandem {
namespace {

using namespace quant_test;

TEST_F(CudaQuant, ActQuantFp8MatchesContractBitwise) {
  struct Case {
    int64_t M, K, bk;
    bool ue8m0, f32 = false;
  };
  // Groups of 128 take a warp each up to 256 rows and the block kernel above (M 300); K 1552
  // and 8 end in a partial group; f32 rows are the MoE intermediate's.
  for (const Case& c :
       {Case{3, 512, 128, false}, Case{17, 1552, 128, true}, Case{4, 336, 336, false},
        Case{65, 6144, 128, false}, Case{2, 16384, 16384, true}, Case{300, 2048, 128, false},
        Case{1, 8, 128, false}, Case{5, 2048, 128, false, true}, Case{300, 1552, 128, true, true},
        Case{1, 16384, 128, true}}) {
    // f32 rows carry values off the bf16 grid (the MoE intermediate's full precision).
    std::vector<float> x = activations(rng_, c.M, c.K);
    if (c.f32)
      for (float& v : x) v *= 1.0f + 1e-3f * rng_.uniform(-1.f, 1.f);
    const std::vector<uint16_t> xb = to_bf16(x);
    Dev<uint16_t> dx(xb);
    Dev<float> dx32(x);
    const void* xp = c.f32 ? static_cast<const void*>(dx32.p) : static_cast<const void*>(dx.p);
    const k::DT xdt = c.f32 ? k::DT::F32 : k::DT::BF16;
    const int64_t kb = (c.K + c.bk - 1) / c.bk;
    Dev<uint8_t> q1(static_cast<size_t>(c.M * c.K)), q8(static_cast<size_t>(c.M * c.K));
    Dev<float> s1(static_cast<size_t>(c.M * kb)), s2(static_cast<size_t>(c.M * kb));
    ASSERT_TRUE(k::act_quant_fp8_applies(c.K, c.bk));
    // The decode kernels' layout: scale (m, b) at m * kb + b.
    k::act_quant_fp8(xp, c.K, xdt, c.M, c.K, c.bk, c.ue8m0, q1.p, c.K, s1.p, kb, 1, nullptr);
    // cuBLASLt's layout: scale (m, b) at b * M + m.
    k::act_quant_fp8(xp, c.K, xdt, c.M, c.K, c.bk, c.ue8m0, q8.p, c.K, s2.p, 1, c.M, nullptr);
    const auto g1 = q1.get();
    const auto g8 = q8.get();
    const auto gs1 = s1.get(), gs2 = s2.get();
    std::vector<float> q(static_cast<size_t>(c.M * c.K)), s(static_cast<size_t>(c.M * kb));
    int64_t bad = 0;
    for (int64_t m = 0; m < c.M; ++m) {
      act_quant_fp8_ref(&x[m * c.K], c.K, c.bk, c.ue8m0, &q[m * c.K], &s[m * kb]);
      for (int64_t b = 0; b < kb; ++b)
        bad += gs1[m * kb + b] != s[m * kb + b] || gs2[b * c.M + m] != s[m * kb + b];
      for (int64_t i = 0; i < c.K; ++i)
        bad += e4m3_value(g1[m * c.K + i]) != q[m * c.K + i] ||
               e4m3_value(g8[m * c.K + i]) != q[m * c.K + i];
    }
    EXPECT_EQ(bad, 0) << "M " << c.M << " K " << c.K << " bk " << c.bk << " ue8m0 " << c.ue8m0
                      << " f32 " << c.f32;
  }
}

// The host path's grouped quantizer: every expert's rows into its padded block in one launch,
// bitwise what act_quant_fp8 writes expert by expert into the same layout (x in sorted order, and
// h already in the padded order), experts without rows included; then moe_pad_rows' remap.
TEST_F(CudaQuant, ActQuantFp8ExpertsMatchesPerExpertBitwise) {
  const int64_t E = 9, K = 400, kb = (K + 127) / 128;
  const std::vector<int> cnt = {5, 0, 1, 8, 3, 0, 0, 13, 2};
  std::vector<int32_t> off(E + 1, 0), pad(E, 0);
  int64_t Pp = 0;
  for (int64_t e = 0; e < E; ++e) {
    off[e + 1] = off[e] + cnt[e];
    pad[e] = static_cast<int32_t>(Pp);
    Pp += (cnt[e] + 3) / 4 * 4;
  }
  const int64_t rows = off[E];
  for (bool padded : {false, true}) {
    const std::vector<float> x = activations(rng_, padded ? Pp : rows, K);
    Dev<float> dx(x);  // f32 rows (h's dtype), off the bf16 grid
    Dev<int32_t> doff(off), dpad(pad);
    Dev<uint8_t> q1(static_cast<size_t>(Pp * K)), q2(static_cast<size_t>(Pp * K));
    Dev<float> s1(static_cast<size_t>(Pp * kb)), s2(static_cast<size_t>(Pp * kb));
    k::act_quant_fp8_experts(dx.p, K, k::DT::F32, padded, rows, K, true, doff.p, dpad.p, E, q1.p, K,
                             s1.p, nullptr);
    for (int64_t e = 0; e < E; ++e) {
      if (cnt[e] == 0) continue;
      const int64_t np = (cnt[e] + 3) / 4 * 4, src = padded ? pad[e] : off[e];
      k::act_quant_fp8(dx.p + src * K, K, k::DT::F32, cnt[e], K, 128, true, q2.p + pad[e] * K, K,
                       s2.p + pad[e] * kb, 1, np, nullptr);
    }
    const std::vector<uint8_t> a = q1.get(), b = q2.get();
    const std::vector<float> sa = s1.get(), sb = s2.get();
    int64_t bad = 0, bad_s = 0;
    for (int64_t e = 0; e < E; ++e)
      for (int r = 0; r < cnt[e]; ++r) {
        const int64_t row = pad[e] + r, np = (cnt[e] + 3) / 4 * 4;
        bad += std::memcmp(&a[row * K], &b[row * K], K) != 0;
        for (int64_t g = 0; g < kb; ++g) {
          const size_t i = static_cast<size_t>(pad[e] * kb + g * np + r);
          bad_s += std::memcmp(&sa[i], &sb[i], 4) != 0;
        }
      }
    EXPECT_EQ(bad, 0) << (padded ? "padded" : "sorted") << " rows";
    EXPECT_EQ(bad_s, 0) << (padded ? "padded" : "sorted") << " scales";
  }
  // moe_pad_rows: pair p of expert idx[p] at sorted row inv[p] -> pad[e] + inv[p] - off[e].
  std::vector<int32_t> idx, inv;
  for (int64_t e = 0; e < E; ++e)
    for (int r = 0; r < cnt[e]; ++r)
      idx.push_back(static_cast<int32_t>(e)), inv.push_back(off[e] + r);
  idx.push_back(-1), inv.push_back(-1);  // another rank's expert
  Dev<int32_t> di(idx), dv(inv), doff(off), dpad(pad), dout(idx.size());
  k::moe_pad_rows(di.p, dv.p, doff.p, dpad.p, static_cast<int64_t>(idx.size()), E, dout.p, nullptr);
  const std::vector<int32_t> got = dout.get();
  for (size_t p = 0; p < idx.size(); ++p) {
    const int32_t want = idx[p] < 0 ? -1 : pad[idx[p]] + inv[p] - off[idx[p]];
    EXPECT_EQ(got[p], want) << "pair " << p;
  }
}

TEST_F(CudaQuant, ActQdqMxfp4MatchesContractBitwise) {
  for (int64_t K : {32, 96, 2048, 6144}) {
    const int64_t M = 5;
    std::vector<float> x = activations(rng_, M, K);
    x[3] = 0.f;  // a group with a zero among others, and one all-zero group
    for (int i = 0; i < 32 && K >= 64; ++i) x[32 + i] = 0.f;
    Dev<uint16_t> dx(to_bf16(x)), dout(static_cast<size_t>(M * K)),
        dpair(static_cast<size_t>(M * K));
    k::act_qdq_mxfp4(dx.p, K, k::DT::BF16, M, K, dout.p, K, nullptr);
    k::act_qdq_mxfp4(dx.p, K, k::DT::BF16, M, K, dpair.p, K, nullptr, false, /*paired=*/true);
    const auto g = from_bf16(dout.get()), gp = from_bf16(dpair.get());
    std::vector<float> ref(static_cast<size_t>(M * K));
    for (int64_t m = 0; m < M; ++m) act_qdq_mxfp4_ref(&x[m * K], K, &ref[m * K]);
    // Pair order: position j of each aligned block of 8 holds element kPairOrder[j].
    const int kPairOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    int64_t bad = 0, bad_pair = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      bad += g[i] != ref[i];
      bad_pair += gp[i] != ref[i / 8 * 8 + static_cast<size_t>(kPairOrder[i % 8])];
    }
    EXPECT_EQ(bad, 0) << "K " << K;
    EXPECT_EQ(bad_pair, 0) << "K " << K << " (pair order)";
  }
}

// ---- dense decode kernels
// ------------------------------------------------------------------------

struct DenseShape {
  int64_t N, K, bn, bk;
  bool ue8m0;
};

TEST_F(CudaQuant, Fp8GemvMatchesContract) {
  const DenseShape shapes[] = {{300, 512, 128, 128, false},  {130, 1552, 128, 128, true},
                               {257, 336, 1, 336, false},    {96, 2048, 1, 2048, false},
                               {1000, 384, 128, 128, false}, {2752, 6144, 128, 128, false}};
  double worst = 0;
  for (const DenseShape& sh : shapes) {
    const Fp8Host w = make_fp8(rng_, 1, sh.N, sh.K, sh.bn, sh.bk);
    Dev<uint8_t> dw(w.w);
    Dev<float> ds(w.s);
    const k::Fp8W wv = fp8_view(w, dw, ds);
    ASSERT_TRUE(k::fp8_decode_applies(wv));
    for (int64_t M : rows_to_test()) {
      if (sh.K >= 6144 && (M > 17 || small_only())) continue;  // the host reference's time
      const std::vector<float> x = activations(rng_, M, sh.K);
      Dev<uint16_t> dx(to_bf16(x));
      Dev<uint8_t> xq(static_cast<size_t>(M * sh.K));  // e4m3
      Dev<float> xs(static_cast<size_t>(M * w.kb));
      k::act_quant_fp8(dx.p, sh.K, k::DT::BF16, M, sh.K, w.bk, sh.ue8m0, xq.p, sh.K, xs.p, w.kb, 1,
                       nullptr);
      k::QGemvParams p;
      p.x = xq.p, p.x_rs = sh.K, p.xscale = xs.p, p.xs_rs = w.kb, p.M = M;
      p.splits = k::quant_gemv_splits(sh.N, sh.K, sms_);
      Dev<float> part(static_cast<size_t>(p.splits * M * sh.N));
      p.partial = part.p;
      Dev<float> out32(static_cast<size_t>(M * sh.N));
      Dev<uint16_t> out16(static_cast<size_t>(M * sh.N));
      p.out = out32.p, p.o_rs = sh.N, p.out_dt = k::DT::F32;
      k::fp8_gemv(p, wv, nullptr);
      p.out = out16.p, p.out_dt = k::DT::BF16;
      k::fp8_gemv(p, wv, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> q(static_cast<size_t>(M * sh.K)), s(static_cast<size_t>(M * w.kb));
      for (int64_t m = 0; m < M; ++m)
        act_quant_fp8_ref(&x[m * sh.K], sh.K, w.bk, sh.ue8m0, &q[m * sh.K], &s[m * w.kb]);
      const std::vector<double> ref = fp8_ref(w, 0, q, s, M);
      const std::string what = "N " + std::to_string(sh.N) + " K " + std::to_string(sh.K) + " bn " +
                               std::to_string(sh.bn) + " M " + std::to_string(M);
      const double e32 = rel_err(out32.get(), ref);
      worst = std::max(worst, e32);
      EXPECT_LE(e32, 5e-5) << what << " (f32 out)";
      EXPECT_LE(rel_err(from_bf16(out16.get()), ref), 4e-3) << what << " (bf16 out)";
    }
  }
  std::printf("FP8 gemv: worst f32 rel err against the contract %.3e\n", worst);
}

// The dense FP8 linear on the grouped wgmma kernel (moe_wgmma_fp8.cu): 128-wide K blocks, block
// heights 128 and 64, N and K not multiples of 128, every M of rows_to_test (one to three
// 128-row token tiles), bf16 and f32 out with a row stride wider than N; against the contract,
// and a row alone against the same row in the batch, bitwise. The tensor core's own summation
// inside a K block is coarser than the gemv's fp32 (hence the looser f32 bound, and the worst
// error printed).
TEST_F(CudaQuant, Fp8LinearWgmmaMatchesContract) {
  const DenseShape shapes[] = {{384, 640, 128, 128, false},
                               {200, 592, 128, 128, true},
                               {264, 512, 64, 128, false},
                               {2752, 6144, 128, 128, false}};
  double worst = 0;
  for (const DenseShape& sh : shapes) {
    const Fp8Host w = make_fp8(rng_, 1, sh.N, sh.K, sh.bn, sh.bk);
    Dev<uint8_t> dw(w.w);
    Dev<float> ds(w.s);
    const k::Fp8W wv = fp8_view(w, dw, ds);
    ASSERT_TRUE(k::fp8_linear_wgmma_applies(wv));
    const int64_t ors = sh.N + 4;  // output rows wider than N
    for (int64_t M : rows_to_test()) {
      if (sh.K >= 6144 && (M > 17 || small_only())) continue;  // the host reference's time
      const int64_t Mp = (M + 3) / 4 * 4;
      const std::vector<float> x = activations(rng_, M, sh.K);
      Dev<uint16_t> dx(to_bf16(x));
      Dev<uint8_t> xq(static_cast<size_t>(M * sh.K));  // [M, K] e4m3
      Dev<float> xs(static_cast<size_t>(w.kb * Mp));   // [kb, Mp]
      k::act_quant_fp8(dx.p, sh.K, k::DT::BF16, M, sh.K, w.bk, sh.ue8m0, xq.p, sh.K, xs.p, 1, Mp,
                       nullptr);
      Dev<float> out32(static_cast<size_t>(M * ors));
      Dev<uint16_t> out16(static_cast<size_t>(M * ors));
      k::fp8_linear_wgmma(xq.p, xs.p, Mp, M, wv, out32.p, ors, k::DT::F32, nullptr);
      k::fp8_linear_wgmma(xq.p, xs.p, Mp, M, wv, out16.p, ors, k::DT::BF16, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> q(static_cast<size_t>(M * sh.K)), s(static_cast<size_t>(M * w.kb));
      for (int64_t m = 0; m < M; ++m)
        act_quant_fp8_ref(&x[m * sh.K], sh.K, w.bk, sh.ue8m0, &q[m * sh.K], &s[m * w.kb]);
      const std::vector<double> ref = fp8_ref(w, 0, q, s, M);
      // The first N of each output row.
      auto rows = [&](const std::vector<float>& o) {
        std::vector<float> r(static_cast<size_t>(M * sh.N));
        for (int64_t m = 0; m < M; ++m)
          std::copy(o.begin() + m * ors, o.begin() + m * ors + sh.N, r.begin() + m * sh.N);
        return r;
      };
      const std::vector<float> o32 = rows(out32.get()), o16 = rows(from_bf16(out16.get()));
      const std::string what = "N " + std::to_string(sh.N) + " K " + std::to_string(sh.K) + " bn " +
                               std::to_string(sh.bn) + " M " + std::to_string(M);
      const double e32 = rel_err(o32, ref);
      worst = std::max(worst, e32);
      EXPECT_LE(e32, 1e-3) << what << " (f32 out)";
      EXPECT_LE(rel_err(o16, ref), 5e-3) << what << " (bf16 out)";
      if (M > 1) {
        // The last row alone (its quantized row and scales copied to a batch of one).
        Dev<float> xs1(static_cast<size_t>(w.kb * 4));
        const std::vector<float> sall = xs.get();
        std::vector<float> s1(static_cast<size_t>(w.kb * 4), 0.f);
        for (int64_t b = 0; b < w.kb; ++b) s1[b * 4] = sall[b * Mp + M - 1];
        cudaMemcpy(xs1.p, s1.data(), s1.size() * 4, cudaMemcpyHostToDevice);
        Dev<float> one(static_cast<size_t>(ors));
        k::fp8_linear_wgmma(xq.p + (M - 1) * sh.K, xs1.p, 4, 1, wv, one.p, ors, k::DT::F32,
                            nullptr);
        const std::vector<float> o1 = one.get();
        EXPECT_EQ(std::memcmp(o1.data(), &o32[(M - 1) * sh.N], sh.N * sizeof(float)), 0)
            << what << ": the last row alone differs from its row in the batch";
      }
    }
  }
  std::printf("FP8 wgmma linear: worst f32 rel err against the contract %.3e\n", worst);
}

TEST_F(CudaQuant, Mxfp4GemvMatchesContract) {
  const int64_t shapes[][2] = {{300, 512}, {130, 1568}, {257, 96}, {2048, 6144}};
  for (const auto& sh : shapes) {
    const int64_t N = sh[0], K = sh[1];
    const Mx4Host w = make_mx4(rng_, 1, N, K);
    Dev<uint8_t> dw(w.w), ds(w.s);
    const k::Mx4W wv = mx4_view(w, dw, ds);
    ASSERT_TRUE(k::mxfp4_decode_applies(wv));
    for (int64_t M : rows_to_test()) {
      if (K >= 6144 && (M > 17 || small_only())) continue;
      for (bool w4a4 : {false, true}) {
        std::vector<float> x = activations(rng_, M, K);
        Dev<uint16_t> dx(to_bf16(x)), xq(static_cast<size_t>(M * K));
        if (w4a4) {
          k::act_qdq_mxfp4(dx.p, K, k::DT::BF16, M, K, xq.p, K, nullptr);
          std::vector<float> r(x.size());
          for (int64_t m = 0; m < M; ++m) act_qdq_mxfp4_ref(&x[m * K], K, &r[m * K]);
          x = r;
        }
        k::QGemvParams p;
        p.x = w4a4 ? xq.p : dx.p, p.x_rs = K, p.M = M;
        p.splits = k::quant_gemv_splits(N, K, sms_);
        Dev<float> part(static_cast<size_t>(p.splits * M * N)), out(static_cast<size_t>(M * N));
        p.partial = part.p, p.out = out.p, p.o_rs = N, p.out_dt = k::DT::F32;
        k::mxfp4_gemv(p, wv, nullptr);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_LE(rel_err(out.get(), mx4_ref(w, 0, x, M)), 5e-5)
            << "N " << N << " K " << K << " M " << M << (w4a4 ? " W4A4" : " W4A16");
      }
    }
  }
}

// MXFP4 scales far from the calibrated ~2^-8: the decode kernels multiply the e2m1 values by
// 2^(b - 1) after placing them as 2^-126 multiples (0.5 is a bf16 subnormal there), and above
// b = 128 in two products. Each output row is checked on its own against sum |w x|, so a wrong
// power of two in one row cannot hide behind the others' magnitudes.
TEST_F(CudaQuant, Mxfp4ExtremeScales) {
  const int64_t N = 70, K = 256;
  Mx4Host w = make_mx4(rng_, 1, N, K);
  const uint8_t extremes[] = {40, 100, 126, 127, 128, 129, 131, 140};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < K / 32; ++g)  // mixed within a row too: every group its own
      w.s[static_cast<size_t>(n * w.s_rs + g)] = extremes[(n + 3 * g) % 8];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t kk = 0; kk < K; ++kk) w.deq[static_cast<size_t>(n * K + kk)] = w.decode(0, n, kk);
  Dev<uint8_t> dw(w.w), ds(w.s);
  for (const int64_t M : {int64_t{1}, int64_t{12}}) {  // one and two activation tiles
    const std::vector<float> x = activations(rng_, M, K);
    const std::vector<float> xb = from_bf16(to_bf16(x));  // what the kernel multiplies
    Dev<uint16_t> dx(to_bf16(x));
    k::QGemvParams p;
    p.x = dx.p, p.x_rs = K, p.M = M, p.splits = 1;
    Dev<float> out(static_cast<size_t>(M * N));
    p.out = out.p, p.o_rs = N, p.out_dt = k::DT::F32;
    k::mxfp4_gemv(p, mx4_view(w, dw, ds), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got = out.get();
    const std::vector<double> ref = mx4_ref(w, 0, xb, M);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double mag = 0;
        for (int64_t kk = 0; kk < K; ++kk) mag += std::fabs(w.wv(0, n, kk) * xb[m * K + kk]);
        EXPECT_NEAR(got[m * N + n], ref[m * N + n], 2e-5 * mag) << "row " << n << " M " << M;
      }
  }
}

// One [N, K] weight in both formats and M activation rows (bf16, and FP8-quantized), run through
// the dense decode kernel on rows [m0, m0 + rows) with the K splits the shape gets.
struct GemvCase {
  int64_t N, K, M, splits;
  Fp8Host w8;
  Mx4Host w4;
  Dev<uint8_t> dw8, dw4, ds4;
  Dev<float> ds8;
  Dev<uint16_t> dx;
  Dev<uint8_t> xq;  // e4m3
  Dev<float> xs, part;
  GemvCase(Rng& r, int64_t n_out, int64_t k_in, int64_t rows_x, int sms)
      : N(n_out),
        K(k_in),
        M(rows_x),
        splits(k::quant_gemv_splits(n_out, k_in, sms)),
        w8(make_fp8(r, 1, n_out, k_in, 128, 128)),
        w4(make_mx4(r, 1, n_out, k_in)),
        dw8(w8.w),
        dw4(w4.w),
        ds4(w4.s),
        ds8(w8.s),
        dx(to_bf16(activations(r, rows_x, k_in))),
        xq(static_cast<size_t>(rows_x * k_in)),
        xs(static_cast<size_t>(rows_x * w8.kb)),
        part(static_cast<size_t>(splits * rows_x * n_out)) {
    k::act_quant_fp8(dx.p, K, k::DT::BF16, M, K, 128, false, xq.p, K, xs.p, w8.kb, 1, nullptr);
  }
  // fmt 0: FP8, 1: MXFP4. ring: QGemvParams::ring; counters: the last-block reduction's.
  std::vector<float> run(int fmt, int64_t m0, int64_t rows, int ring = 0, int* counters = nullptr) {
    Dev<float> out(static_cast<size_t>(rows * N));
    k::QGemvParams p;
    p.x = fmt == 0 ? static_cast<const void*>(xq.p + m0 * K) : dx.p + m0 * K;
    p.x_rs = K, p.xscale = fmt == 0 ? xs.p + m0 * w8.kb : nullptr, p.xs_rs = w8.kb;
    p.M = rows, p.splits = splits, p.partial = part.p, p.ring = ring, p.counters = counters;
    p.out = out.p, p.o_rs = N, p.out_dt = k::DT::F32;
    if (fmt == 0)
      k::fp8_gemv(p, fp8_view(w8, dw8, ds8), nullptr);
    else
      k::mxfp4_gemv(p, mx4_view(w4, dw4, ds4), nullptr);
    return out.get();
  }
};

// Row m of an M-row product is bitwise the row computed alone (both formats, with K splits).
TEST_F(CudaQuant, GemvBatchInvariant) {
  GemvCase gc(rng_, 384, 4096, 40, sms_);
  for (int fmt = 0; fmt < 2; ++fmt) {
    const std::vector<float> all = gc.run(fmt, 0, gc.M);
    for (int64_t m : {0, 7, 8, 17, 39}) {
      const std::vector<float> one = gc.run(fmt, m, 1);
      EXPECT_EQ(std::memcmp(one.data(), &all[m * gc.N], gc.N * sizeof(float)), 0)
          << (fmt == 0 ? "fp8" : "mxfp4") << " row " << m;
    }
  }
}

// ---- MoE experts
// ---------------------------------------------------------------------------------

// The stream shape (set_quant_ring: ring depth, register bound) changes when loads are issued
// and how many blocks share an SM, never the order in which a warp adds its chunks: every shape
// gives the bits of the unbounded ring of two, dense (one and two activation tiles, with and
// without K splits, K a multiple of the chunk or not) and grouped experts. The split partials
// summed by the tiles' last blocks give the bits of the second kernel.
TEST_F(CudaQuant, RingDepthGivesTheSameBits) {
  const int depths[] = {2, 23, 24};  // two chunks in any, 170 and 128 registers
  for (const int64_t K : {int64_t{4096}, int64_t{416}}) {
    GemvCase gc(rng_, 200, K, 20, sms_);
    Dev<int> counters(static_cast<size_t>(k::quant_gemv_tiles(gc.M, gc.N)));
    cudaMemset(counters.p, 0, counters.n * sizeof(int));
    for (int fmt = 0; fmt < 2; ++fmt)
      for (const int64_t rows : {int64_t{1}, int64_t{9}, gc.M}) {
        const char* what = fmt == 0 ? "fp8" : "mxfp4";
        const std::vector<float> base = gc.run(fmt, 0, rows, 2);
        for (int r : depths)
          EXPECT_EQ(std::memcmp(gc.run(fmt, 0, rows, r).data(), base.data(), base.size() * 4), 0)
              << what << " gemv K " << K << " M " << rows << " ring " << r;
        // The split partials summed by each tile's last block instead of a second kernel (twice:
        // the counters must be left zeroed).
        if (gc.splits > 1) {
          for (int again = 0; again < 2; ++again) {
            EXPECT_EQ(std::memcmp(gc.run(fmt, 0, rows, 0, counters.p).data(), base.data(),
                                  base.size() * 4),
                      0)
                << what << " gemv K " << K << " M " << rows << " last-block reduce";
          }
        }
      }
  }
  // Grouped experts: 40 tokens top-3 over 6 experts (several passes per block) and one token.
  const int64_t E = 6, D = 1536, I = 256, kk = 3;
  const Fp8Host gu8 = make_fp8(rng_, E, 2 * I, D, 128, 128),
                dn8 = make_fp8(rng_, E, D, I, 128, 128);
  const Mx4Host gu4 = make_mx4(rng_, E, 2 * I, D), dn4 = make_mx4(rng_, E, D, I);
  Dev<uint8_t> dgu8(gu8.w), ddn8(dn8.w), dgu4(gu4.w), sgu4(gu4.s), ddn4(dn4.w), sdn4(dn4.s);
  Dev<float> sgu8(gu8.s), sdn8(dn8.s);
  for (const int64_t T : {int64_t{1}, int64_t{40}}) {
    const int64_t P = T * kk;
    const std::vector<float> x = activations(rng_, T, D);
    const Routing ro = route(rng_, T, kk, E);
    Dev<uint16_t> dx(to_bf16(x));
    Dev<uint8_t> xq(static_cast<size_t>(T * D));  // e4m3
    Dev<float> xs(static_cast<size_t>(T * gu8.kb));
    Dev<int32_t> idx(ro.idx);
    Groups g(P, E);
    k::moe_prepare(idx.p, P, E, g.counts.p, g.offsets.p, g.perm.p, g.inv.p, g.active.p, g.num.p,
                   nullptr);
    const k::MoeGroups gv = g.view(P, E, kk);
    k::act_quant_fp8(dx.p, D, k::DT::BF16, T, D, 128, false, xq.p, D, xs.p, gu8.kb, 1, nullptr);
    // The down products take a fixed f16 / bf16 input (h of the gate_up above is checked itself).
    const std::vector<float> hx = activations(rng_, P, I);
    Dev<uint16_t> h16(to_bf16(hx));
    Dev<uint8_t> hq(static_cast<size_t>(P * I));  // e4m3
    Dev<float> hs(static_cast<size_t>(P * dn8.kb));
    k::act_quant_fp8(h16.p, I, k::DT::BF16, P, I, 128, false, hq.p, I, hs.p, dn8.kb, 1, nullptr);
    for (int fmt = 0; fmt < 2; ++fmt) {
      auto run = [&](int ring) {
        Dev<float> h(static_cast<size_t>(P * I)), y(static_cast<size_t>(P * D));
        if (fmt == 0) {
          k::fp8_moe_gate_up(xq.p, D, xs.p, gu8.kb, gv, fp8_view(gu8, dgu8, sgu8), I, h.p,
                             k::DT::F32, nullptr, ring);
          k::fp8_moe_down(hq.p, I, hs.p, dn8.kb, gv, fp8_view(dn8, ddn8, sdn8), y.p, nullptr, ring);
        } else {
          k::mxfp4_moe_gate_up(dx.p, D, gv, mx4_view(gu4, dgu4, sgu4), I, h.p, k::DT::F32, nullptr,
                               ring);
          k::mxfp4_moe_down(h16.p, I, gv, mx4_view(dn4, ddn4, sdn4), y.p, nullptr, ring);
        }
        std::vector<float> hy = h.get(), yy = y.get();
        hy.insert(hy.end(), yy.begin(), yy.end());
        return hy;
      };
      const std::vector<float> base = run(2);
      for (int r : depths)
        EXPECT_EQ(std::memcmp(run(r).data(), base.data(), base.size() * sizeof(float)), 0)
            << (fmt == 0 ? "fp8" : "mxfp4") << " experts T " << T << " ring " << r;
    }
  }
}

// W4A4's activations in the kernels' pair order (act_qdq_mxfp4 `paired`, the path the backend
// takes) give the bits of the natural order permuted inside the kernels: dense (one and two
// activation tiles, K splits, K a multiple of the chunk or not) and grouped experts. Some weight
// groups get scales above 2 (the second product), so that warps with and without them run.
TEST_F(CudaQuant, Mxfp4PairedActivationsGiveTheSameBits) {
  auto spike = [](Mx4Host& w) {  // every 7th group's scale 2^2 .. 2^8
    for (size_t i = 0; i < w.s.size(); i += 7) w.s[i] = static_cast<uint8_t>(129 + i % 7);
  };
  for (const int64_t K : {int64_t{4096}, int64_t{416}}) {
    const int64_t N = 200;
    for (const int64_t M : {int64_t{1}, int64_t{9}, int64_t{20}}) {
      Mx4Host w = make_mx4(rng_, 1, N, K);
      spike(w);
      Dev<uint8_t> dw(w.w), ds(w.s);
      Dev<uint16_t> dx(to_bf16(activations(rng_, M, K))), xn(static_cast<size_t>(M * K)),
          xp(static_cast<size_t>(M * K));
      k::act_qdq_mxfp4(dx.p, K, k::DT::BF16, M, K, xn.p, K, nullptr);
      k::act_qdq_mxfp4(dx.p, K, k::DT::BF16, M, K, xp.p, K, nullptr, false, /*paired=*/true);
      auto run = [&](bool paired) {
        k::QGemvParams p;
        p.x = paired ? xp.p : xn.p, p.x_rs = K, p.M = M, p.x_paired = paired;
        p.splits = k::quant_gemv_splits(N, K, sms_);
        Dev<float> part(static_cast<size_t>(p.splits * M * N)), out(static_cast<size_t>(M * N));
        p.partial = part.p, p.out = out.p, p.o_rs = N, p.out_dt = k::DT::F32;
        k::mxfp4_gemv(p, mx4_view(w, dw, ds), nullptr);
        return out.get();
      };
      const std::vector<float> a = run(false), b = run(true);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "gemv K " << K << " M " << M;
    }
  }
  const int64_t E = 6, D = 1536, I = 256, kk = 3;
  Mx4Host gu = make_mx4(rng_, E, 2 * I, D), dn = make_mx4(rng_, E, D, I);
  spike(gu);
  spike(dn);
  Dev<uint8_t> dgu(gu.w), sgu(gu.s), ddn(dn.w), sdn(dn.s);
  for (const int64_t T : {int64_t{1}, int64_t{40}}) {
    const int64_t P = T * kk;
    const Routing ro = route(rng_, T, kk, E);
    Dev<uint16_t> dx(to_bf16(activations(rng_, T, D))), xn(static_cast<size_t>(T * D)),
        xp(static_cast<size_t>(T * D)), hn(static_cast<size_t>(P * I)),
        hp(static_cast<size_t>(P * I));
    Dev<float> h(activations(rng_, P, I));  // f32 (the gate_up output's dtype)
    Dev<int32_t> idx(ro.idx);
    Groups g(P, E);
    k::moe_prepare(idx.p, P, E, g.counts.p, g.offsets.p, g.perm.p, g.inv.p, g.active.p, g.num.p,
                   nullptr);
    const k::MoeGroups gv = g.view(P, E, kk);
    k::act_qdq_mxfp4(dx.p, D, k::DT::BF16, T, D, xn.p, D, nullptr);
    k::act_qdq_mxfp4(dx.p, D, k::DT::BF16, T, D, xp.p, D, nullptr, false, /*paired=*/true);
    k::act_qdq_mxfp4(h.p, I, k::DT::F32, P, I, hn.p, I, nullptr);
    k::act_qdq_mxfp4(h.p, I, k::DT::F32, P, I, hp.p, I, nullptr, false, /*paired=*/true);
    auto run = [&](bool paired) {
      Dev<float> ho(static_cast<size_t>(P * I)), y(static_cast<size_t>(P * D));
      k::mxfp4_moe_gate_up(paired ? xp.p : xn.p, D, gv, mx4_view(gu, dgu, sgu), I, ho.p, k::DT::F32,
                           nullptr, 0, paired);
      k::mxfp4_moe_down(paired ? hp.p : hn.p, I, gv, mx4_view(dn, ddn, sdn), y.p, nullptr, 0,
                        paired);
      std::vector<float> r = ho.get(), yy = y.get();
      r.insert(r.end(), yy.begin(), yy.end());
      return r;
    };
    const std::vector<float> a = run(false), b = run(true);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "experts T " << T;
  }
}

TEST_F(CudaQuant, Fp8MoeMatchesContract) {
  const int64_t E = 10, D = 400, I = 144, kk = 3;  // D, I: not multiples of 128
  for (int64_t bn : {128, 1}) {
    const Fp8Host gu = make_fp8(rng_, E, 2 * I, D, bn, bn == 1 ? D : 128);
    const Fp8Host dn = make_fp8(rng_, E, D, I, bn, bn == 1 ? I : 128);
    Dev<uint8_t> dgu(gu.w), ddn(dn.w);
    Dev<float> sgu(gu.s), sdn(dn.s);
    for (int64_t T :
         small_only() ? std::vector<int64_t>{1, 17} : std::vector<int64_t>{1, 3, 17, 65}) {
      const int64_t P = T * kk;
      const std::vector<float> x = activations(rng_, T, D);
      const Routing ro = route(rng_, T, kk, E);
      Dev<uint16_t> dx(to_bf16(x)), out(static_cast<size_t>(T * D));
      Dev<uint8_t> xq(static_cast<size_t>(T * D)), hq(static_cast<size_t>(P * I));  // e4m3
      Dev<float> xs(static_cast<size_t>(T * gu.kb)), hs(static_cast<size_t>(P * dn.kb)),
          y(static_cast<size_t>(P * D)), rw(ro.w), h(static_cast<size_t>(P * I));  // h: [P, I] f32
      Dev<int32_t> idx(ro.idx);
      Groups g(P, E);
      k::moe_prepare(idx.p, P, E, g.counts.p, g.offsets.p, g.perm.p, g.inv.p, g.active.p, g.num.p,
                     nullptr);
      const k::MoeGroups gv = g.view(P, E, kk);
      k::act_quant_fp8(dx.p, D, k::DT::BF16, T, D, gu.bk, false, xq.p, D, xs.p, gu.kb, 1, nullptr);
      k::fp8_moe_gate_up(xq.p, D, xs.p, gu.kb, gv, fp8_view(gu, dgu, sgu), I, h.p, k::DT::F32,
                         nullptr);
      k::act_quant_fp8(h.p, I, k::DT::F32, P, I, dn.bk, false, hq.p, I, hs.p, dn.kb, 1, nullptr);
      k::fp8_moe_down(hq.p, I, hs.p, dn.kb, gv, fp8_view(dn, ddn, sdn), y.p, nullptr);
      k::moe_combine(y.p, k::DT::F32, g.inv.p, rw.p, T, kk, D, out.p, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      // Host: the contract per (token, slot), h in f32 as the GPU keeps it.
      std::vector<double> ref(static_cast<size_t>(T * D), 0.0);
      std::vector<float> q(static_cast<size_t>(D)), s(static_cast<size_t>(gu.kb));
      std::vector<float> hq_ref(static_cast<size_t>(I)), hs_ref(static_cast<size_t>(dn.kb));
      for (int64_t t = 0; t < T; ++t) {
        act_quant_fp8_ref(&x[t * D], D, gu.bk, false, q.data(), s.data());
        for (int64_t j = 0; j < kk; ++j) {
          const int64_t e = ro.idx[t * kk + j];
          const std::vector<double> gx = fp8_ref(gu, e, q, s, 1);
          std::vector<float> hv(static_cast<size_t>(I));
          for (int64_t i = 0; i < I; ++i)
            hv[i] = silu(static_cast<float>(gx[i])) * static_cast<float>(gx[I + i]);
          act_quant_fp8_ref(hv.data(), I, dn.bk, false, hq_ref.data(), hs_ref.data());
          const std::vector<double> yv = fp8_ref(dn, e, hq_ref, hs_ref, 1);
          for (int64_t d = 0; d < D; ++d) ref[t * D + d] += ro.w[t * kk + j] * yv[d];
        }
      }
      EXPECT_LE(rel_err(from_bf16(out.get()), ref), 1e-2) << "bn " << bn << " T " << T;
    }
  }
}

TEST_F(CudaQuant, Mxfp4MoeMatchesContract) {
  const int64_t E = 10, D = 416, I = 160, kk = 3;
  const Mx4Host gu = make_mx4(rng_, E, 2 * I, D), dn = make_mx4(rng_, E, D, I);
  Dev<uint8_t> dgu(gu.w), sgu(gu.s), ddn(dn.w), sdn(dn.s);
  for (bool w4a4 : {false, true})
    for (int64_t T :
         small_only() ? std::vector<int64_t>{1, 17} : std::vector<int64_t>{1, 3, 17, 65}) {
      const int64_t P = T * kk;
      std::vector<float> x = activations(rng_, T, D);
      const Routing ro = route(rng_, T, kk, E);
      Dev<uint16_t> dx(to_bf16(x)), xq(static_cast<size_t>(T * D)), hq(static_cast<size_t>(P * I)),
          out(static_cast<size_t>(T * D));
      // h: [P, I], f32 for W4A4 (quantized from f32), bf16 for W4A16 (the first half then).
      Dev<float> y(static_cast<size_t>(P * D)), rw(ro.w), h(static_cast<size_t>(P * I));
      Dev<int32_t> idx(ro.idx);
      Groups g(P, E);
      k::moe_prepare(idx.p, P, E, g.counts.p, g.offsets.p, g.perm.p, g.inv.p, g.active.p, g.num.p,
                     nullptr);
      const k::MoeGroups gv = g.view(P, E, kk);
      // W4A4 as the backend runs it: activations in the kernels' pair order.
      if (w4a4) k::act_qdq_mxfp4(dx.p, D, k::DT::BF16, T, D, xq.p, D, nullptr, false, true);
      k::mxfp4_moe_gate_up(w4a4 ? xq.p : dx.p, D, gv, mx4_view(gu, dgu, sgu), I, h.p,
                           w4a4 ? k::DT::F32 : k::DT::BF16, nullptr, 0, w4a4);
      if (w4a4) k::act_qdq_mxfp4(h.p, I, k::DT::F32, P, I, hq.p, I, nullptr, false, true);
      k::mxfp4_moe_down(w4a4 ? static_cast<const void*>(hq.p) : h.p, I, gv, mx4_view(dn, ddn, sdn),
                        y.p, nullptr, 0, w4a4);
      k::moe_combine(y.p, k::DT::F32, g.inv.p, rw.p, T, kk, D, out.p, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<double> ref(static_cast<size_t>(T * D), 0.0);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<float> xt(x.begin() + t * D, x.begin() + (t + 1) * D);
        if (w4a4) act_qdq_mxfp4_ref(&x[t * D], D, xt.data());
        for (int64_t j = 0; j < kk; ++j) {
          const int64_t e = ro.idx[t * kk + j];
          const std::vector<double> gx = mx4_ref(gu, e, xt, 1);
          std::vector<float> hv(static_cast<size_t>(I));
          for (int64_t i = 0; i < I; ++i)
            hv[i] = silu(static_cast<float>(gx[i])) * static_cast<float>(gx[I + i]);
          if (!w4a4)  // W4A16: h is the down product's bf16 input
            for (float& v : hv) v = bf16_round(v);
          if (w4a4) {
            std::vector<float> r(hv.size());
            act_qdq_mxfp4_ref(hv.data(), I, r.data());
            hv = r;
          }
          const std::vector<double> yv = mx4_ref(dn, e, hv, 1);
          for (int64_t d = 0; d < D; ++d) ref[t * D + d] += ro.w[t * kk + j] * yv[d];
        }
      }
      EXPECT_LE(rel_err(from_bf16(out.get()), ref), 1e-2)
          << (w4a4 ? "W4A4" : "W4A16") << " T " << T;
    }
}

// ---- prefill paths
// -------------------------------------------------------------------------------

// cuBLASLt block-scaled FP8 (M padded to a multiple of 4, scales kb * Mp + m) and per-channel
// FP8 (outer-vector scales, or per-tensor into f32 and the scale epilogue).
TEST_F(CudaQuant, Fp8CublasLtMatchesContract) {
  cuda::LtFp8 lt;
  for (int64_t K : {512, 640}) {
    const int64_t N = 384;
    const Fp8Host w = make_fp8(rng_, 1, N, K, 128, 128);
    const Fp8Host wc = make_fp8(rng_, 1, N, K, 1, K);
    // cuBLASLt reads contiguous per-channel scales: the first column of the padded tensor.
    std::vector<float> wc_col(static_cast<size_t>(N));
    for (int64_t n = 0; n < N; ++n) wc_col[n] = wc.sv(0, n, 0);
    Dev<uint8_t> dw(w.w), dwc(wc.w);
    Dev<float> ds(w.s), dsc(wc_col);
    for (int64_t M :
         small_only() ? std::vector<int64_t>{4, 65} : std::vector<int64_t>{4, 64, 65, 300}) {
      const int64_t Mp = (M + 3) / 4 * 4;
      const std::vector<float> x = activations(rng_, M, K);
      Dev<uint16_t> dx(to_bf16(x)), out(static_cast<size_t>(M * N));
      Dev<uint8_t> xq(static_cast<size_t>(Mp * K));
      Dev<float> xs(static_cast<size_t>(Mp * w.kb));
      cudaMemset(xq.p, 0, Mp * K);
      cudaMemset(xs.p, 0, Mp * w.kb * sizeof(float));
      k::act_quant_fp8(dx.p, K, k::DT::BF16, M, K, 128, false, xq.p, K, xs.p, 1, Mp, nullptr);
      Dev<uint16_t> outp(static_cast<size_t>(Mp * N));
      ASSERT_TRUE(lt.gemm(cuda::LtFp8::Scales::kBlock128, xq.p, xs.p, dw.p, ds.p, outp.p, N, false,
                          Mp, N, K, nullptr))
          << "no block-scaled algorithm, M " << Mp << " K " << K;
      std::vector<float> q(static_cast<size_t>(M * K)), s(static_cast<size_t>(M * w.kb));
      for (int64_t m = 0; m < M; ++m)
        act_quant_fp8_ref(&x[m * K], K, 128, false, &q[m * K], &s[m * w.kb]);
      std::vector<float> got = from_bf16(outp.get());
      got.resize(static_cast<size_t>(M * N));
      EXPECT_LE(rel_err(got, fp8_ref(w, 0, q, s, M)), 6e-3) << "block M " << M << " K " << K;

      // Per channel: one group per row.
      Dev<uint8_t> cq(static_cast<size_t>(M * K));
      Dev<float> cs(static_cast<size_t>(M));
      k::act_quant_fp8(dx.p, K, k::DT::BF16, M, K, K, false, cq.p, K, cs.p, 1, M, nullptr);
      const bool outer = lt.gemm(cuda::LtFp8::Scales::kOuterVec, cq.p, cs.p, dwc.p, dsc.p, out.p, N,
                                 false, M, N, K, nullptr);
      if (!outer) {
        Dev<float> one(std::vector<float>{1.f}), acc(static_cast<size_t>(M * N));
        ASSERT_TRUE(lt.gemm(cuda::LtFp8::Scales::kTensor, cq.p, one.p, dwc.p, one.p, acc.p, N, true,
                            M, N, K, nullptr));
        k::scale_rows_cols(acc.p, M, N, cs.p, dsc.p, 1, out.p, N, k::DT::BF16, nullptr);
      }
      for (int64_t m = 0; m < M; ++m) act_quant_fp8_ref(&x[m * K], K, K, false, &q[m * K], &s[m]);
      s.resize(static_cast<size_t>(M));
      EXPECT_LE(rel_err(from_bf16(out.get()), fp8_ref(wc, 0, q, s, M)), 6e-3)
          << "per-channel (" << (outer ? "outer-vector scales" : "per-tensor + epilogue") << ") M "
          << M << " K " << K;
      if (M == 4 && K == 512)
        std::printf("per-channel FP8 prefill runs %s\n",
                    outer ? "cuBLASLt OUTER_VEC_32F" : "per-tensor FP8 + scale epilogue");
    }
  }
}

TEST_F(CudaQuant, Mxfp4DequantMatchesContract) {
  const Mx4Host w = make_mx4(rng_, 2, 72, 224);
  Dev<uint8_t> dw(w.w), ds(w.s);
  Dev<uint16_t> out(static_cast<size_t>(w.N * w.K));
  k::mxfp4_dequant_bf16(mx4_view(w, dw, ds), 1, out.p, nullptr);
  const auto g = from_bf16(out.get());
  int64_t bad = 0;
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t kk = 0; kk < w.K; ++kk) bad += g[n * w.K + kk] != w.wv(1, n, kk);
  EXPECT_EQ(bad, 0);
}

// Every M through linear: the decode kernels up to 64 rows, cuBLASLt above (block-scaled FP8,
// per-tensor FP8 + epilogue for per-channel, bf16 on the dequantized weight for MXFP4); in
// deterministic mode the decode kernels at every M, each row bitwise equal to that row alone.
// Against the CPU backend and the host reference of this file.
TEST_F(CudaQuantBackend, LinearMatchesCpu) {
  // FP8 128 x 128 (K = 640; and N, K not multiples of 128, with ue8m0 activation scales),
  // per-channel FP8, MXFP4 (K = 512;
  // and K = 480) with unquantized and with MXFP4 activations.
  const Fp8Host blk = make_fp8(rng_, 1, 384, 640, 128, 128);
  const Fp8Host odd = make_fp8(rng_, 1, 200, 592, 128, 128);
  const Fp8Host chn = make_fp8(rng_, 1, 264, 512, 1, 512);
  const Mx4Host mx = make_mx4(rng_, 1, 300, 512);
  const Mx4Host mxo = make_mx4(rng_, 1, 100, 480);
  const Fp8Host* f8[7] = {&blk, &odd, &chn, nullptr, nullptr, nullptr, nullptr};
  const Mx4Host* f4[7] = {nullptr, nullptr, nullptr, &mx, &mx, &mxo, &mxo};
  const ActQuant a4[7] = {ActQuant::kFp8Group, ActQuant::kFp8Group, ActQuant::kFp8Group,
                          ActQuant::kNone,     ActQuant::kMxfp4,    ActQuant::kNone,
                          ActQuant::kMxfp4};
  std::vector<Weight> wg, wc;
  for (int i = 0; i < 7; ++i) {
    wg.push_back(f8[i] ? fp8_weight(*f8[i], false) : mx4_weight(*f4[i], false, a4[i]));
    wc.push_back(f8[i] ? fp8_weight(*f8[i], false, Device::cpu())
                       : mx4_weight(*f4[i], false, a4[i], Device::cpu()));
  }
  wg[1].ue8m0 = wc[1].ue8m0 = true;  // power-of-two activation scales (scale_fmt: ue8m0)
  for (bool det : {false, true}) {
    be_->set_deterministic(det);
    for (int64_t M : rows_to_test()) {
      const std::vector<float> x = activations(rng_, M, 640);
      const std::vector<uint16_t> xb = to_bf16(x);
      for (int which = 0; which < 7; ++which) {
        const Fp8Host* f = f8[which];
        const int64_t K = f ? f->K : f4[which]->K, N = f ? f->N : f4[which]->N;
        // x: [M, K] as a view with row stride 640 (the first K columns).
        Tensor xt = upload(xb.data(), xb.size() * 2, {M, 640}, DType::BF16).narrow(1, 0, K);
        Tensor out = Tensor::empty({M, N}, DType::BF16, Device::cuda());
        be_->linear(xt, wg[which], out);
        std::vector<float> xr(static_cast<size_t>(M * K));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t kk = 0; kk < K; ++kk) xr[m * K + kk] = x[m * 640 + kk];
        Tensor oc = Tensor::empty({M, N}, DType::F32);
        cpu().linear(Tensor::from_vector(xr, {M, K}), wc[which], oc);
        std::vector<double> ref;
        if (f) {
          std::vector<float> q(xr.size()), s(static_cast<size_t>(M * f->kb));
          for (int64_t m = 0; m < M; ++m)
            act_quant_fp8_ref(&xr[m * K], K, f->bk, wg[which].ue8m0, &q[m * K], &s[m * f->kb]);
          ref = fp8_ref(*f, 0, q, s, M);
        } else {
          if (a4[which] == ActQuant::kMxfp4)
            for (int64_t m = 0; m < M; ++m) {
              std::vector<float> r(static_cast<size_t>(K));
              act_qdq_mxfp4_ref(&xr[m * K], K, r.data());
              std::copy(r.begin(), r.end(), xr.begin() + m * K);
            }
          ref = mx4_ref(*f4[which], 0, xr, M);
        }
        const std::vector<float> got = bf16_rows(out);
        const std::string what = "format " + std::to_string(which) + " M " + std::to_string(M) +
                                 (det ? " deterministic" : "");
        EXPECT_LE(rel_err(got, f32_rows(oc)), 6e-3) << what << " (against the CPU backend)";
        EXPECT_LE(rel_err(got, ref), 6e-3) << what << " (against the host reference)";
        if (det && M > 1) {
          Tensor one = Tensor::empty({1, N}, DType::BF16, Device::cuda());
          be_->linear(xt.narrow(0, M - 1, 1), wg[which], one);
          const std::vector<float> o = bf16_rows(one);
          EXPECT_EQ(std::memcmp(o.data(), &got[(M - 1) * N], N * sizeof(float)), 0)
              << what << ": the last row is not batch-invariant";
        }
      }
    }
  }
}

// linear on FP8 block weights through the grouped wgmma kernel at every M
// (set_fp8_linear_wgmma): against the CPU backend, bf16 and f32 out (the f32 one a view with a
// wider row stride), and each batch's last row alone, bitwise.
TEST_F(CudaQuantBackend, Fp8LinearWgmmaPathMatchesCpu) {
  be_->set_fp8_linear_wgmma(1);
  for (const auto& [N, K, bn] :
       {std::tuple<int64_t, int64_t, int64_t>{384, 640, 128}, {200, 592, 128}, {264, 512, 64}}) {
    const Fp8Host h = make_fp8(rng_, 1, N, K, bn, 128);
    const Weight wg = fp8_weight(h, false), wc = fp8_weight(h, false, Device::cpu());
    for (int64_t M : rows_to_test()) {
      const std::vector<float> x = activations(rng_, M, K);
      const std::vector<uint16_t> xb = to_bf16(x);
      Tensor xt = upload(xb.data(), xb.size() * 2, {M, K}, DType::BF16);
      Tensor o16 = Tensor::empty({M, N}, DType::BF16, Device::cuda());
      Tensor o32 = Tensor::empty({M, N + 4}, DType::F32, Device::cuda()).narrow(1, 0, N);
      be_->linear(xt, wg, o16);
      be_->linear(xt, wg, o32);
      Tensor oc = Tensor::empty({M, N}, DType::F32);
      cpu().linear(Tensor::from_vector(x, {M, K}), wc, oc);
      const std::vector<double> ref = f32_rows(oc);
      const std::vector<float> g16 = bf16_rows(o16);
      std::vector<float> g32(static_cast<size_t>(M * N));
      cudaDeviceSynchronize();
      cudaMemcpy2D(g32.data(), N * 4, o32.raw(), (N + 4) * 4, N * 4, M, cudaMemcpyDeviceToHost);
      const std::string what =
          "N " + std::to_string(N) + " K " + std::to_string(K) + " M " + std::to_string(M);
      EXPECT_LE(rel_err(g16, ref), 6e-3) << what << " (bf16 out)";
      EXPECT_LE(rel_err(g32, ref), 1e-3) << what << " (f32 out)";
      if (M > 1) {
        Tensor one = Tensor::empty({1, N}, DType::BF16, Device::cuda());
        be_->linear(xt.narrow(0, M - 1, 1), wg, one);
        const std::vector<float> o = bf16_rows(one);
        EXPECT_EQ(std::memcmp(o.data(), &g16[(M - 1) * N], N * sizeof(float)), 0)
            << what << ": the last row alone differs from its row in the batch";
      }
    }
  }
}

// Decode paths are graph-capturable (no sync, no allocation once the scratch is sized: replay
// equals the eager run bitwise) and the experts batch-invariant (a token alone equals the same
// token in a batch, bitwise).
TEST_F(CudaQuantBackend, DecodePathsCaptureAndAreBatchInvariant) {
  const int64_t E = 12, D = 512, I = 256, kk = 4, T = 24;
  const Fp8Host lin = make_fp8(rng_, 1, 320, 512, 128, 128);
  const Fp8Host gu8 = make_fp8(rng_, E, 2 * I, D, 128, 128),
                dn8 = make_fp8(rng_, E, D, I, 128, 128);
  const Mx4Host gu4 = make_mx4(rng_, E, 2 * I, D), dn4 = make_mx4(rng_, E, D, I);
  const Weight wl = fp8_weight(lin, false);
  const Weight g8 = fp8_weight(gu8, true), d8 = fp8_weight(dn8, true);
  const Weight g4 = mx4_weight(gu4, true, ActQuant::kMxfp4),
               d4 = mx4_weight(dn4, true, ActQuant::kMxfp4);
  const std::vector<uint16_t> xb = to_bf16(activations(rng_, T, D));
  const Routing ro = route(rng_, T, kk, E);
  Tensor xt = upload(xb.data(), xb.size() * 2, {T, D}, DType::BF16);
  Tensor it = upload(ro.idx.data(), ro.idx.size() * 4, {T, kk}, DType::I32);
  Tensor wt = upload(ro.w.data(), ro.w.size() * 4, {T, kk}, DType::F32);
  Tensor lo = Tensor::empty({T, 320}, DType::BF16, Device::cuda());
  Tensor m8 = Tensor::empty({T, D}, DType::BF16, Device::cuda());
  Tensor m4 = Tensor::empty({T, D}, DType::BF16, Device::cuda());
  auto step = [&] {
    be_->linear(xt, wl, lo);
    be_->moe_experts(xt, g8, d8, it, wt, m8);
    be_->moe_experts(xt, g4, d4, it, wt, m4);
  };
  step();  // eager: sizes the scratch
  const std::vector<float> e_lo = bf16_rows(lo), e_m8 = bf16_rows(m8), e_m4 = bf16_rows(m4);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  const cudaStream_t prev = be_->stream();
  be_->set_stream(st);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  step();
  ASSERT_EQ(cudaStreamEndCapture(st, &graph), cudaSuccess);
  be_->set_stream(prev);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // Poisoned on the replay's own stream (st does not wait for the legacy default stream).
  cudaMemsetAsync(lo.raw(), 0xff, lo.nbytes(), st);
  cudaMemsetAsync(m8.raw(), 0xff, m8.nbytes(), st);
  cudaMemsetAsync(m4.raw(), 0xff, m4.nbytes(), st);
  ASSERT_EQ(cudaGraphLaunch(exec, st), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  EXPECT_EQ(bf16_rows(lo), e_lo) << "linear replay";
  EXPECT_EQ(bf16_rows(m8), e_m8) << "FP8 experts replay";
  EXPECT_EQ(bf16_rows(m4), e_m4) << "MXFP4 experts replay";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  for (int64_t t : {0, 5, 23}) {
    Tensor o8 = Tensor::empty({1, D}, DType::BF16, Device::cuda());
    Tensor o4 = Tensor::empty({1, D}, DType::BF16, Device::cuda());
    be_->moe_experts(xt.narrow(0, t, 1), g8, d8, it.narrow(0, t, 1), wt.narrow(0, t, 1), o8);
    be_->moe_experts(xt.narrow(0, t, 1), g4, d4, it.narrow(0, t, 1), wt.narrow(0, t, 1), o4);
    const std::vector<float> a8 = bf16_rows(o8), a4 = bf16_rows(o4);
    EXPECT_EQ(std::memcmp(a8.data(), &e_m8[t * D], D * sizeof(float)), 0) << "FP8 token " << t;
    EXPECT_EQ(std::memcmp(a4.data(), &e_m4[t * D], D * sizeof(float)), 0) << "MXFP4 token " << t;
  }
}

}  // namespace
}  // namespace tandem
