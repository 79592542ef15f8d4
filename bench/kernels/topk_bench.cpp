// The indexer's top-2048 selection alone (k::indexer_select), over score rows already in device
// memory, at the context lengths of long-context decode (one row per token of a decode batch).
// A row is read once after the samples (the rounds look at a few thousand keys in shared memory
// unless they tie), so the rate is printed as row bytes over time beside the HBM copy
// bandwidth; the rows sit in L2 when they fit, as the scoring kernel leaves them. The baseline,
// in the same run: CUB's radix sort of the rows (topk_baseline.cu).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels.h"
#include "bench_util.h"
#include "core/tensor.h"

namespace tandem::bench {

void bench_topk_select(double copy_gbps, bool quick) {
  constexpr int64_t K = 2048;
  std::printf(
      "INDEXER TOP-%lld SELECTION (f32 score rows; ceiling: copy %.0f GB/s; goal: under "
      "20 us for one row at 32k)\n",
      static_cast<long long>(K), copy_gbps);
  std::printf("%-6s %-8s %-22s %10s %10s %8s %14s %8s\n", "rows", "context", "scores", "us", "GB/s",
              "%copy", "cub sort us", "speedup");
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  cudaStream_t stream = cuda::cuda_backend()->stream();
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // random: distinct scores; relu: half of them exactly 0 (few indexer heads); coarse: 13
  // values, so thousands tie at the threshold and the middle rounds read the row again.
  const char* kinds[] = {"random", "relu", "coarse (13 values)"};
  for (int64_t R : quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 64}) {
    for (int64_t L : {int64_t{8192}, int64_t{32768}, int64_t{131072}}) {
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<float> host(static_cast<size_t>(R * L));
        for (float& v : host) {
          const float x = normal(rng);
          v = kind == 0 ? x : kind == 1 ? std::max(x, 0.0f) : std::round(x * 2.0f) / 2.0f;
        }
        Tensor scores = Tensor::from_vector(host, {R, L}).to(Device::cuda());  // [R, L]
        Tensor pos =
            Tensor::from_vector(
                std::vector<int32_t>(static_cast<size_t>(R), static_cast<int32_t>(L - 1)), {R})
                .to(Device::cuda());                                     // [R]
        Tensor out = Tensor::empty({R, K}, DType::I32, Device::cuda());  // [R, K]
        cuda::k::IndexerParams p;
        p.scores = scores.data<float>();
        p.meta.token_pos = pos.data<int32_t>();
        p.out = out.data<int32_t>();
        p.K = K;
        p.max_len = L;
        p.T = R;
        cuda::k::indexer_select(p, 0, R, stream);  // warm-up
        // Back-to-back launches between the events: one launch alone would also time the host's
        // launch latency (the GPU idles until the kernel arrives); in a decode step the kernel
        // runs inside a CUDA graph.
        constexpr int kLaunches = 20;
        std::vector<double> us;
        for (int i = 0; i < 7; ++i) {
          CK(cudaEventRecord(e0, stream));
          for (int l = 0; l < kLaunches; ++l) cuda::k::indexer_select(p, 0, R, stream);
          CK(cudaEventRecord(e1, stream));
          CK(cudaEventSynchronize(e1));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          us.push_back(ms * 1e3 / kLaunches);
        }
        const double t = median(us), gbps = R * L * 4.0 / (t * 1e-6) / 1e9;
        const double sort_us = cub_sort_rows_us(p.scores, R, L, kLaunches, stream);
        std::printf("%-6lld %-8lld %-22s %10.1f %10.0f %7.1f%% %14.1f %7.1fx\n",
                    static_cast<long long>(R), static_cast<long long>(L), kinds[kind], t, gbps,
                    100.0 * gbps / copy_gbps, sort_us, sort_us / t);
      }
    }
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::printf("\n");
}

}  // namespace tandem::bench
