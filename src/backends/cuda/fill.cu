// Deterministic random fill (benchmarks' dummy weights, tests' inputs).
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

#include <cuda_fp8.h>

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

// Nearest e2m1 code (ties to the even code), saturating at +-6: the host's f32_to_fp4_e2m1.
__device__ __forceinline__ uint32_t e2m1_code(float f) {
  const float a = fabsf(f);
  constexpr float kMid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  uint32_t c = 7;
  for (uint32_t i = 0; i < 7; ++i)
    if (a < kMid[i] || (a == kMid[i] && i % 2 == 0)) {
      c = i;
      break;
    }
  return c | (f < 0.f && c != 0 ? 8u : 0u);
}

__device__ __forceinline__ float unit_normal(uint64_t z) {
  float s = 0.f;
  for (int k = 0; k < 4; ++k) s += static_cast<float>((z >> (16 * k)) & 0xffff) * (1.0f / 65536.0f);
  return (s - 2.0f) * 1.7320508f;
}

// Bytes of e4m3 codes (one value each) or e2m1 pairs (two values each), values N(0, scale^2).
__global__ void fill_codes_kernel(uint8_t* p, int64_t n, uint64_t seed, float scale, bool fp4) {
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t base = seed * 0x9e3779b97f4a7c15ull + 2 * static_cast<uint64_t>(i);
    const float a = unit_normal(mix64(base)) * scale;
    if (fp4) {
      const float b = unit_normal(mix64(base + 1)) * scale;
      p[i] = static_cast<uint8_t>(e2m1_code(a) | (e2m1_code(b) << 4));
    } else {
      p[i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(a, __NV_SATFINITE, __NV_E4M3));
    }
  }
}

}  // namespace

void fill_random_codes(uint8_t* p, int64_t bytes, uint64_t seed, float scale, bool fp4,
                       cudaStream_t s) {
  if (bytes == 0) return;
  const unsigned g = grid_for(bytes) > 8192 ? 8192 : grid_for(bytes);
  launch(fill_codes_kernel, g, kEwThreads, 0, s, p, bytes, seed, scale, fp4);
}

void fill_random(void* p, int64_t n, uint64_t seed, float scale, DT dt, cudaStream_t s) {
  if (n == 0) return;
  const unsigned g = grid_for(n) > 8192 ? 8192 : grid_for(n);
  if (dt == DT::BF16)
    launch(fill_random_kernel<bf16>, g, kEwThreads, 0, s, static_cast<bf16*>(p), n, seed, scale);
  else
    launch(fill_random_kernel<float>, g, kEwThreads, 0, s, static_cast<float*>(p), n, seed, scale);
}

}  // namespace tandem::cuda::k
