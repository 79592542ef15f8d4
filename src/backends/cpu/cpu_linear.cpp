// Linear layers (x . W^T) and per-head matmuls. One fixed-order dot product per output element,
// so a token's result never depends on which other tokens share the batch.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/cpu_quant.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

namespace {
// Tokens per block: the block's activations stay in cache while a weight row streams past.
constexpr int64_t kTokenBlock = 32;
}  // namespace

void CpuBackend::linear(const Tensor& x, const Weight& w, Tensor& out) {
  if (w.quantized()) return linear_quantized(x, w, out);
  TD_CHECK(w.w.dtype() == DType::F32, "cpu linear: dense weights must be f32, got {}", w.w.str());
  TD_CHECK(w.w.is_contiguous(), "cpu linear: weight must be contiguous");
  const int64_t T = x.size(0), K = x.size(1), N = w.out_features(), xs = x.stride(0);
  const float* xp = f32_ptr(x, "linear");
  const float* wp = w.w.data<float>();
  float* o = f32_mut(out, "linear");
  const int64_t os = out.stride(0);
  parallel_for(
      N,
      [&](int64_t nb, int64_t ne) {
        for (int64_t t0 = 0; t0 < T; t0 += kTokenBlock) {
          const int64_t t1 = std::min(T, t0 + kTokenBlock);
          for (int64_t n = nb; n < ne; ++n) {
            const float* wr = wp + n * K;
            for (int64_t t = t0; t < t1; ++t) o[t * os + n] = dot(xp + t * xs, wr, K);
          }
        }
      },
      /*min_chunk=*/std::max<int64_t>(1, 4096 / std::max<int64_t>(1, K * T)));
}

// The quantized product of docs/quantization.md: each token's input quantized once, each weight
// row decoded once per block of tokens.
void CpuBackend::linear_quantized(const Tensor& x, const Weight& w, Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.out_features(), xs = x.stride(0);
  TD_CHECK(w.w.ndim() == 2 && w.in_features() == K, "cpu linear: weight {} for input width {}",
           w.w.str(), K);
  const float* xp = f32_ptr(x, "linear");
  float* o = f32_mut(out, "linear");
  const int64_t os = out.stride(0);
  std::vector<QuantInput> in(static_cast<size_t>(T));
  parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) quantize_input(xp + t * xs, K, w, in[t]);
  });
  parallel_for(N, [&](int64_t nb, int64_t ne) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = nb; n < ne; ++n) {
      decode_weight_row(w, n, row.data());
      for (int64_t t = 0; t < T; ++t) o[t * os + n] = quant_dot(w, n, row.data(), in[t]);
    }
  });
}

void CpuBackend::head_matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  TD_CHECK(w.is_contiguous(), "cpu head_matmul: weight must be contiguous");
  const int64_t T = x.size(0), H = x.size(1), K = x.size(2), N = w.size(1);
  const float* xp = f32_ptr(x, "head_matmul");
  const float* wp = f32_ptr(w, "head_matmul");
  float* o = f32_mut(out, "head_matmul");
  parallel_for(H * N, [&](int64_t b, int64_t e) {
    for (int64_t hn = b; hn < e; ++hn) {
      const int64_t h = hn / N, n = hn % N;
      const float* wr = wp + (h * N + n) * K;
      for (int64_t t = 0; t < T; ++t)
        o[t * out.stride(0) + h * out.stride(1) + n] =
            dot(xp + t * x.stride(0) + h * x.stride(1), wr, K);
    }
  });
}

}  // namespace tandem::cpu
