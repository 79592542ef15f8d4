// The grouped FP8 expert GEMMs (moe_wgmma_fp8.cu) by themselves, against the numerics contract:
// rows already in expert order, each GEMM's f32 output against a host product in double. Unlike
// the routed-experts tests (cuda_quant_moe_test.cpp), which compare moe_experts' output after h
// is quantized, this measures each GEMM alone, so a bound near the tensor core's own FP8
// summation error (about 1e-4 of the output's norm) holds: a wrong scale, row or tile shows.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cuda/quant_kernels.h"
#include "cuda_quant_util.h"

namespace tandem {
namespace {

using namespace quant_test;

double silu_d(double g) {
  return g / (1.0 + std::exp(-g));
}

// Rows [row0, row1) of a [rows, cols] host matrix.
std::vector<float> row_range(const std::vector<float>& m, int64_t cols, int64_t row0,
                             int64_t row1) {
  return {m.begin() + row0 * cols, m.begin() + row1 * cols};
}

// The transposed scales [kb, ld] of rows [row0, row1) as [rows, kb].
std::vector<float> scales_of(const std::vector<float>& st, int64_t kb, int64_t ld, int64_t row0,
                             int64_t row1) {
  std::vector<float> s(static_cast<size_t>((row1 - row0) * kb));
  for (int64_t r = row0; r < row1; ++r)
    for (int64_t b = 0; b < kb; ++b) s[(r - row0) * kb + b] = st[b * ld + r];
  return s;
}

// Experts e_base .. e_base + ne - 1 of E_total (their weights stacked from e_base on) with row
// counts from none to three 128-row tiles; the rows of the other experts lie before and after
// theirs and must not be written. Block heights 128 and 64; D and I not multiples of 128 (a
// partial last K block, a 64-row half of the up weights straddling two scale blocks).
TEST_F(CudaQuant, Fp8MoeWgmmaGemmsMatchContract) {
  struct Shape {
    int64_t ne, D, I, bn;
  };
  const int64_t pattern[] = {3, 0, 130, 1, 300, 17, 64, 0, 129};
  double worst_h = 0, worst_y = 0;
  for (const Shape sh :
       {Shape{8, 512, 256, 128}, Shape{7, 400, 144, 128}, Shape{6, 256, 208, 64}}) {
    const int64_t E_total = sh.ne + 2, e_base = 1;
    std::vector<int32_t> counts(static_cast<size_t>(E_total)), offsets(E_total + 1, 0);
    for (int64_t e = 0; e < E_total; ++e) {
      counts[e] = static_cast<int32_t>(pattern[(e + sh.ne) % 9]);
      if (small_only()) counts[e] = std::min(counts[e], 130);
      offsets[e + 1] = offsets[e] + counts[e];
    }
    const int64_t pairs = offsets[E_total], ld = (pairs + 3) / 4 * 4;
    const int64_t row0 = offsets[e_base], row1 = offsets[e_base + sh.ne];
    const Fp8Host gu = make_fp8(rng_, sh.ne, 2 * sh.I, sh.D, sh.bn, 128);
    const Fp8Host dn = make_fp8(rng_, sh.ne, sh.D, sh.I, sh.bn, 128);
    Dev<uint8_t> gw(gu.w), dw(dn.w);
    Dev<float> gs(gu.s), ds(dn.s);
    const k::Fp8W gv = fp8_view(gu, gw, gs), dv = fp8_view(dn, dw, ds);
    ASSERT_TRUE(k::fp8_moe_wgmma_applies(gv, dv, sh.ne));
    const std::string what = "ne " + std::to_string(sh.ne) + " D " + std::to_string(sh.D) + " I " +
                             std::to_string(sh.I) + " bn " + std::to_string(sh.bn);

    // gate_up: x [pairs, D] quantized on the device (scales transposed [kb, ld]).
    const int64_t kbd = (sh.D + 127) / 128, kbi = (sh.I + 127) / 128;
    const std::vector<float> x = activations(rng_, pairs, sh.D);
    Dev<float> dx(x);
    Dev<uint8_t> xq(static_cast<size_t>(pairs * sh.D));
    Dev<float> xs(static_cast<size_t>(kbd * ld));
    k::act_quant_fp8(dx.p, sh.D, k::DT::F32, pairs, sh.D, 128, false, xq.p, sh.D, xs.p, 1, ld,
                     nullptr);
    Dev<int32_t> dcounts(counts), doffsets(offsets);
    const int64_t max_tiles = k::fp8_moe_wgmma_max_tiles(pairs, sh.ne);
    Dev<int32_t> tiles(static_cast<size_t>(4 * max_tiles)), num_tiles(1);
    k::fp8_moe_wgmma_tiles(dcounts.p, e_base, sh.ne, tiles.p, num_tiles.p, nullptr);
    Dev<float> h(static_cast<size_t>(pairs * sh.I));  // NaN where not written
    k::fp8_moe_wgmma_gemm(true, xq.p, xs.p, ld, pairs, dcounts.p, doffsets.p, gv, e_base, sh.ne,
                          tiles.p, num_tiles.p, h.p, nullptr);
    const std::vector<float> hg = h.get();

    // down: the GPU's own h quantized on the device, so both sides multiply the same codes.
    Dev<uint8_t> hq(static_cast<size_t>(pairs * sh.I));
    Dev<float> hs(static_cast<size_t>(kbi * ld));
    k::act_quant_fp8(h.p, sh.I, k::DT::F32, pairs, sh.I, 128, false, hq.p, sh.I, hs.p, 1, ld,
                     nullptr);
    Dev<float> y(static_cast<size_t>(pairs * sh.D));
    k::fp8_moe_wgmma_gemm(false, hq.p, hs.p, ld, pairs, dcounts.p, doffsets.p, dv, e_base, sh.ne,
                          tiles.p, num_tiles.p, y.p, nullptr);
    const std::vector<float> yg = y.get();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    // The host side: the same quantized rows (codes and scales read back), products in double.
    std::vector<float> xqv(static_cast<size_t>(pairs * sh.D)),
        hqv(static_cast<size_t>(pairs * sh.I));
    {
      const std::vector<uint8_t> a = xq.get(), b = hq.get();
      for (size_t i = 0; i < a.size(); ++i) xqv[i] = e4m3_value(a[i]);
      for (size_t i = 0; i < b.size(); ++i) hqv[i] = e4m3_value(b[i]);
    }
    const std::vector<float> xst = xs.get(), hst = hs.get();
    std::vector<float> h_got, y_got;
    std::vector<double> h_ref, y_ref;
    for (int64_t e = e_base; e < e_base + sh.ne; ++e) {
      const int64_t r0 = offsets[e], r1 = offsets[e + 1], n = r1 - r0;
      if (n == 0) continue;
      const std::vector<double> gx =
          fp8_ref(gu, e - e_base, row_range(xqv, sh.D, r0, r1), scales_of(xst, kbd, ld, r0, r1), n);
      const std::vector<double> yv =
          fp8_ref(dn, e - e_base, row_range(hqv, sh.I, r0, r1), scales_of(hst, kbi, ld, r0, r1), n);
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t i = 0; i < sh.I; ++i) {
          h_ref.push_back(silu_d(gx[r * 2 * sh.I + i]) * gx[r * 2 * sh.I + sh.I + i]);
          h_got.push_back(hg[(r0 + r) * sh.I + i]);
        }
        for (int64_t d = 0; d < sh.D; ++d) {
          y_ref.push_back(yv[r * sh.D + d]);
          y_got.push_back(yg[(r0 + r) * sh.D + d]);
        }
      }
    }
    const double eh = rel_err(h_got, h_ref), ey = rel_err(y_got, y_ref);
    worst_h = std::max(worst_h, eh), worst_y = std::max(worst_y, ey);
    EXPECT_LE(eh, 1e-3) << what << ": gate_up's h";
    EXPECT_LE(ey, 1e-3) << what << ": down's y";
    // The rows of the experts outside the range stay unwritten (the buffers' NaN poison).
    int64_t written = 0;
    for (int64_t r = 0; r < pairs; ++r) {
      if (r >= row0 && r < row1) continue;
      written += !std::isnan(hg[r * sh.I]) + !std::isnan(yg[r * sh.D]);
    }
    EXPECT_EQ(written, 0) << what << ": rows of experts outside the range were written";
  }
  std::printf("grouped FP8 GEMMs: worst rel err against the contract %.3e (h), %.3e (y)\n", worst_h,
              worst_y);
}

}  // namespace
}  // namespace tandem
