// Decode attention (mla_decode, GLM-5.2 shape: 64 heads, 576-dim latent rows) over a bf16 and
// an FP8 KV cache at 8k and 32k context: the same query tokens and keys, the kernel the
// heuristics pick, L2 flushed before every timed call. The rate is the latent bytes the call
// must read (656 a key FP8, 1152 bf16) over its time, against the copy bandwidth.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"
#include "bench_util.h"
#include "core/rng.h"
#include "ops/kv_fp8.h"
#include "runtime/batch_builder.h"

namespace tandem::bench {

namespace {

constexpr int64_t kH = 64, kL = 576, kLc = 512, kDr = 64, kPage = 64, kTopK = 2048;

// pool [S, 656] FP8 rows of random values, written by the backend's own store kernel.
Tensor fp8_pool_of_random_rows(int64_t S) {
  auto* be = cuda::cuda_backend();
  Tensor pool =
      Tensor::empty({S, kv_fp8::latent_row_bytes(kLc, kDr)}, DType::F8_E4M3, Device::cuda());
  const int64_t chunk = 65536;
  Tensor x = Tensor::empty({chunk, kL}, DType::BF16, Device::cuda());  // [chunk, 576]
  cuda::fill_random(x, 11, 1.0f);
  const Tensor w = Tensor::from_vector(std::vector<float>(kLc, 1.0f), {kLc}).to(Device::cuda());
  const Tensor inv =
      Tensor::from_vector(std::vector<float>(kDr / 2, 1e-3f), {kDr / 2}).to(Device::cuda());
  const Tensor pos =
      Tensor::from_vector(std::vector<int32_t>(chunk, 0), {chunk}).to(Device::cuda());
  for (int64_t s0 = 0; s0 < S; s0 += chunk) {
    const int64_t n = std::min(chunk, S - s0);
    std::vector<int32_t> slots(n);
    for (int64_t i = 0; i < n; ++i) slots[i] = static_cast<int32_t>(s0 + i);
    const Tensor sl = Tensor::from_vector(slots, {n}).to(Device::cuda());
    be->mla_kv_store(x.narrow(0, 0, n), w, 1e-6f, pos.narrow(0, 0, n), inv, RopeParams{}, sl, pool);
  }
  return pool;
}

}  // namespace

void bench_mla_decode_fp8(double copy_gbps, bool quick) {
  const std::vector<int64_t> batches =
      quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 32};
  const std::vector<int64_t> ctxs = {8192, 32768};
  const int64_t S = batches.back() * ctxs.back();
  auto* be = cuda::cuda_backend();
  Tensor bf16_pool = Tensor::empty({S, kL}, DType::BF16, Device::cuda());  // [S, 576]
  cuda::fill_random(bf16_pool, 7, 1.0f);
  const Tensor fp8_pool = fp8_pool_of_random_rows(S);  // [S, 656]
  Tensor flush = Tensor::empty({int64_t{256} << 20}, DType::U8, Device::cuda());
  std::printf(
      "DECODE ATTENTION, bf16 vs FP8 KV cache (mla_decode, 64 heads, 576-dim rows; ceiling: "
      "copy %.0f GB/s)\n",
      copy_gbps);
  std::printf("%-5s %6s %-7s %10s %8s %10s %8s %7s\n", "batch", "ctx", "keys", "bf16 us", "GB/s",
              "fp8 us", "GB/s", "fp8/bf16");
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  Rng rng(5);
  for (int64_t ctx : ctxs)
    for (int64_t b : batches)
      for (bool sparse : {false, true}) {
        const int64_t pp = ctx / kPage;
        std::vector<std::vector<int32_t>> pages(b);
        std::vector<SequenceChunk> chunks;
        for (int64_t s = 0; s < b; ++s) {
          for (int64_t i = 0; i < pp; ++i) pages[s].push_back(static_cast<int32_t>(s * pp + i));
          chunks.push_back(SequenceChunk{&pages[s], ctx - 1, {1}, false});
        }
        const ForwardBatch fb =
            build_forward_batch(ForwardMode::kDecode, chunks, kPage, Device::cuda());
        Tensor q = Tensor::empty({b, kH, kL}, DType::BF16, Device::cuda());  // [b, 64, 576]
        cuda::fill_random(q, 3, 0.1f);
        Tensor out = Tensor::empty({b, kH, kLc}, DType::BF16, Device::cuda());  // [b, 64, 512]
        Tensor topk;  // [b, 2048] ascending random positions (the indexer's layout)
        if (sparse) {
          std::vector<int32_t> rows;
          for (int64_t s = 0; s < b; ++s) {
            std::vector<int32_t> r(ctx);
            for (int64_t i = 0; i < ctx; ++i) r[i] = static_cast<int32_t>(i);
            for (int64_t i = 0; i < kTopK; ++i)
              std::swap(r[i], r[i + static_cast<int64_t>(rng.next_u64() % (ctx - i))]);
            std::sort(r.begin(), r.begin() + kTopK);
            rows.insert(rows.end(), r.begin(), r.begin() + kTopK);
          }
          topk = Tensor::from_vector(rows, {b, kTopK}).to(Device::cuda());
        }
        const int64_t keys = sparse ? kTopK : ctx;
        double us[2];
        for (int k = 0; k < 2; ++k) {
          const Tensor& pool = k ? fp8_pool : bf16_pool;
          auto call = [&] { be->mla_decode(q, pool, fb.attn, topk, 0.04f, out); };
          call();  // warm-up: split plan scratch
          std::vector<double> t;
          for (int i = 0; i < (quick ? 5 : 20); ++i) {
            CK(cudaMemsetAsync(flush.raw(), i & 0xff, flush.nbytes(), be->stream()));
            cudaEventRecord(e0, be->stream());
            call();
            cudaEventRecord(e1, be->stream());
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            cudaEventElapsedTime(&ms, e0, e1);
            t.push_back(ms * 1e3);
          }
          us[k] = median(t);
        }
        auto gbps = [&](int64_t row_bytes, double u) {
          return static_cast<double>(b * keys * row_bytes) / (u * 1e-6) / 1e9;
        };
        std::printf("%-5lld %6lld %-7s %10.1f %8.0f %10.1f %8.0f %7.2f\n",
                    static_cast<long long>(b), static_cast<long long>(ctx),
                    sparse ? "top2048" : "dense", us[0], gbps(kL * 2, us[0]), us[1],
                    gbps(fp8_pool.size(1), us[1]), us[1] / us[0]);
        std::fflush(stdout);
      }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::printf("\n");
}

}  // namespace tandem::bench
