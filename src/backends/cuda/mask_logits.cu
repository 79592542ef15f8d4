// Constrained decoding's token mask: one thread per 32-bit word of the allowed bitmask, which
// covers 32 consecutive logits. A row's words are read once; an all-ones word (unconstrained
// rows, and most of a JSON string's vocabulary) costs no logit traffic at all.
#include <cmath>

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kMaskThreads = 256;

__global__ void mask_logits_kernel(float* logits, int64_t ls, int64_t V, int64_t W,
                                   const uint32_t* allowed) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  const int64_t w = blockIdx.x * static_cast<int64_t>(kMaskThreads) + threadIdx.x;
  if (w >= W) return;
  const uint32_t bits = allowed[t * W + w];
  if (bits == 0xffffffffu) return;
  float* row = logits + t * ls;
  const int64_t v0 = w * 32, n = V - v0 < 32 ? V - v0 : 32;
  for (int64_t i = 0; i < n; ++i)
    if (!((bits >> i) & 1u)) row[v0 + i] = -INFINITY;
}

}  // namespace

void mask_logits(float* logits, int64_t ls, int64_t T, int64_t V, const uint32_t* allowed,
                 cudaStream_t s) {
  if (T == 0 || V == 0) return;
  const int64_t W = (V + 31) / 32;
  const dim3 grid(static_cast<unsigned>((W + kMaskThreads - 1) / kMaskThreads),
                  static_cast<unsigned>(T));
  launch(mask_logits_kernel, grid, kMaskThreads, 0, s, logits, ls, V, W, allowed);
}

}  // namespace tandem::cuda::k
