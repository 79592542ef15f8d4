// The grouped FP8 wgmma kernels' stage shapes (set_fp8_wgmma_shape: K blocks per ring stage,
// 16-row token boxes) change how the operands travel, never the arithmetic: every shape must give
// the default shape's bits, for the dense linear (fp8_linear_wgmma) and the expert GEMMs, at row
// counts on both sides of 16 and K whose block count is not a multiple of the stage's.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/heuristics.h"
#include "backends/cuda/quant_kernels.h"
#include "cuda_quant_util.h"

namespace tandem {
namespace {

using namespace quant_test;

struct Shape {
  int k_stage;
  bool small_box;
};
constexpr Shape kShapes[] = {{2, false}, {4, false}, {1, true}, {2, true}, {4, true}};

std::string name(const Shape& s) {
  return "k_stage " + std::to_string(s.k_stage) + (s.small_box ? ", 16-row boxes" : "");
}

// Restores the default shape however the test ends.
struct DefaultShapeAfter {
  // Back to what the backend set at start-up (the switches), for the tests that follow.
  ~DefaultShapeAfter() {
    const cuda::heuristics::Switches sw = cuda::heuristics::read_switches();
    k::set_fp8_wgmma_shape(sw.fp8_wgmma_k_stage, sw.fp8_wgmma_small_box);
  }
};

TEST_F(CudaQuant, Fp8WgmmaStageShapesGiveTheSameBitsDense) {
  DefaultShapeAfter restore;
  struct Dense {
    int64_t N, K;
  };
  // K = 640: 5 K blocks (a partial last stage of 2 and of 4); 2,048: 16; 6,144 (q_a's).
  for (const Dense d : {Dense{264, 640}, Dense{384, 2048}, Dense{2752, 6144}}) {
    if (small_only() && d.K > 2048) continue;  // sanitizer runs
    const Fp8Host w = make_fp8(rng_, 1, d.N, d.K, 128, 128);
    Dev<uint8_t> dw(w.w);
    Dev<float> ds(w.s);
    const k::Fp8W wv = fp8_view(w, dw, ds);
    ASSERT_TRUE(k::fp8_linear_wgmma_applies(wv));
    for (int64_t M :
         small_only() ? std::vector<int64_t>{1, 17} : std::vector<int64_t>{1, 5, 16, 17, 40}) {
      const int64_t Mp = (M + 3) / 4 * 4;
      Dev<uint16_t> dx(to_bf16(activations(rng_, M, d.K)));
      Dev<uint8_t> xq(static_cast<size_t>(M * d.K));  // [M, K] e4m3
      Dev<float> xs(static_cast<size_t>(w.kb * Mp));  // [kb, Mp]
      k::act_quant_fp8(dx.p, d.K, k::DT::BF16, M, d.K, 128, false, xq.p, d.K, xs.p, 1, Mp, nullptr);
      auto run = [&](const Shape& s) {
        k::set_fp8_wgmma_shape(s.k_stage, s.small_box);
        Dev<float> out(static_cast<size_t>(M * d.N));  // [M, N]
        k::fp8_linear_wgmma(xq.p, xs.p, Mp, M, wv, out.p, d.N, k::DT::F32, nullptr);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        return out.get();
      };
      const std::vector<float> base = run({1, false});
      for (const Shape& s : kShapes) {
        const std::vector<float> got = run(s);
        EXPECT_EQ(std::memcmp(got.data(), base.data(), base.size() * sizeof(float)), 0)
            << "N " << d.N << " K " << d.K << " M " << M << ": " << name(s);
      }
    }
  }
}

TEST_F(CudaQuant, Fp8WgmmaStageShapesGiveTheSameBitsExperts) {
  DefaultShapeAfter restore;
  const int64_t ne = 6, D = 400, I = 208;  // K blocks: 4 (D) and 2 (I), both partial
  const Fp8Host gu = make_fp8(rng_, ne, 2 * I, D, 128, 128);
  const Fp8Host dn = make_fp8(rng_, ne, D, I, 128, 128);
  Dev<uint8_t> gw(gu.w), dw(dn.w);
  Dev<float> gs(gu.s), ds(dn.s);
  const k::Fp8W gv = fp8_view(gu, gw, gs), dv = fp8_view(dn, dw, ds);
  ASSERT_TRUE(k::fp8_moe_wgmma_applies(gv, dv, ne));
  // Row counts per expert: 9 pairs in all (16-row boxes apply), then 150 (they do not).
  for (const std::vector<int32_t>& counts :
       {std::vector<int32_t>{2, 0, 3, 1, 0, 3}, std::vector<int32_t>{40, 0, 17, 1, 90, 2}}) {
    std::vector<int32_t> offsets(ne + 1, 0);
    for (int64_t e = 0; e < ne; ++e) offsets[e + 1] = offsets[e] + counts[e];
    const int64_t pairs = offsets[ne], ld = (pairs + 3) / 4 * 4;
    const int64_t kbd = (D + 127) / 128, kbi = (I + 127) / 128;
    Dev<float> dx(activations(rng_, pairs, D)), dh(activations(rng_, pairs, I));
    Dev<uint8_t> xq(static_cast<size_t>(pairs * D)), hq(static_cast<size_t>(pairs * I));
    Dev<float> xs(static_cast<size_t>(kbd * ld)), hs(static_cast<size_t>(kbi * ld));
    k::act_quant_fp8(dx.p, D, k::DT::F32, pairs, D, 128, false, xq.p, D, xs.p, 1, ld, nullptr);
    k::act_quant_fp8(dh.p, I, k::DT::F32, pairs, I, 128, false, hq.p, I, hs.p, 1, ld, nullptr);
    Dev<int32_t> dcounts(counts), doffsets(offsets);
    const int64_t max_tiles = k::fp8_moe_wgmma_max_tiles(pairs, ne);
    Dev<int32_t> tiles(static_cast<size_t>(4 * max_tiles)), num_tiles(1);
    k::fp8_moe_wgmma_tiles(dcounts.p, 0, ne, tiles.p, num_tiles.p, nullptr);
    auto run = [&](const Shape& s) {
      k::set_fp8_wgmma_shape(s.k_stage, s.small_box);
      Dev<float> h(static_cast<size_t>(pairs * I)), y(static_cast<size_t>(pairs * D));
      k::fp8_moe_wgmma_gemm(true, xq.p, xs.p, ld, pairs, dcounts.p, doffsets.p, gv, 0, ne, tiles.p,
                            num_tiles.p, h.p, nullptr);
      k::fp8_moe_wgmma_gemm(false, hq.p, hs.p, ld, pairs, dcounts.p, doffsets.p, dv, 0, ne, tiles.p,
                            num_tiles.p, y.p, nullptr);
      EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> out = h.get();
      const std::vector<float> yv = y.get();
      out.insert(out.end(), yv.begin(), yv.end());
      return out;
    };
    const std::vector<float> base = run({1, false});
    for (const Shape& s : kShapes) {
      const std::vector<float> got = run(s);
      EXPECT_EQ(std::memcmp(got.data(), base.data(), base.size() * sizeof(float)), 0)
          << pairs << " pairs: " << name(s);
    }
  }
}

}  // namespace
}  // namespace tandem
