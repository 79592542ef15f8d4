// Sampling over the GLM-5 vocabulary: one row's logits are read once per call, so the rate is
// logit bytes over time against the copy bandwidth (a greedy row is a pure argmax read; top-k /
// top-p rows make extra passes over the surviving candidates).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"
#include "bench_util.h"
#include "core/tensor.h"

namespace tandem::bench {

void bench_sampling(double copy_gbps, bool quick) {
  constexpr int64_t V = 154880;
  std::printf("SAMPLING (V=%lld f32 logits; ceiling: copy %.0f GB/s)\n", static_cast<long long>(V),
              copy_gbps);
  std::printf("%-6s %-18s %10s %10s %8s\n", "rows", "parameters", "us", "GB/s", "%copy");
  struct Cfg {
    const char* name;
    float temp;
    int32_t top_k;
    float top_p;
  };
  const std::vector<Cfg> cfgs = {{"greedy", 0.0f, -1, 1.0f},
                                 {"t=1", 1.0f, -1, 1.0f},
                                 {"t=1 k=50", 1.0f, 50, 1.0f},
                                 {"t=1 p=0.9", 1.0f, -1, 0.9f},
                                 {"t=0.7 k=50 p=0.9", 0.7f, 50, 0.9f}};
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int64_t R : quick ? std::vector<int64_t>{1, 128} : std::vector<int64_t>{1, 16, 128}) {
    Tensor logits = Tensor::empty({R, V}, DType::F32, Device::cuda());  // [R, V]
    cuda::fill_random(logits, 7, 3.0f);
    for (const Cfg& cfg : cfgs) {
      auto rows = [&](auto v) {  // [R], one value per row
        return Tensor::from_vector(std::vector(static_cast<size_t>(R), v), {R}).to(Device::cuda());
      };
      Tensor temp = rows(cfg.temp), tp = rows(cfg.top_p), u = rows(0.37f), tk = rows(cfg.top_k);
      Tensor out = Tensor::empty({R}, DType::I32, Device::cuda());  // [R]
      auto* be = cuda::cuda_backend();
      be->sample(logits, temp, tk, tp, u, out);  // warm-up
      std::vector<float> ms;
      for (int i = 0; i < 20; ++i) {
        cudaEventRecord(e0, be->stream());
        be->sample(logits, temp, tk, tp, u, out);
        cudaEventRecord(e1, be->stream());
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double us = ms[ms.size() / 2] * 1e3, gbps = R * V * 4.0 / (us * 1e-6) / 1e9;
      std::printf("%-6lld %-18s %10.1f %10.0f %7.1f%%\n", static_cast<long long>(R), cfg.name, us,
                  gbps, 100.0 * gbps / copy_gbps);
    }
  }
  std::printf("\n");
}

}  // namespace tandem::bench
