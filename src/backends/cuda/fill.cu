// Deterministic random fill (benchmarks' dummy weights, tests' inputs).
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename T>
__global__ void fill_random_kernel(T* p, int64_t n, uint64_t seed, float scale) {
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t z = mix64(seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(i));
    // Sum of four uniforms in [0, 1): mean 2, variance 1/3; centred and scaled to unit variance.
    float s = 0.f;
    for (int k = 0; k < 4; ++k)
      s += static_cast<float>((z >> (16 * k)) & 0xffff) * (1.0f / 65536.0f);
    p[i] = from_f<T>((s - 2.0f) * 1.7320508f * scale);
  }
}

}  // namespace

void fill_random(void* p, int64_t n, uint64_t seed, float scale, DT dt, cudaStream_t s) {
  if (n == 0) return;
  const unsigned g = grid_for(n) > 8192 ? 8192 : grid_for(n);
  if (dt == DT::BF16)
    launch(fill_random_kernel<bf16>, g, kEwThreads, 0, s, static_cast<bf16*>(p), n, seed, scale);
  else
    launch(fill_random_kernel<float>, g, kEwThreads, 0, s, static_cast<float*>(p), n, seed, scale);
}

}  // namespace tandem::cuda::k
