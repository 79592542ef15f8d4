// RoPE in place: one thread per rotated pair, fp32 angle pos * inv_freq.
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

// One thread per rotated pair (t, h, j).
template <typename T>
__global__ void rope_kernel(T* x, int64_t s0, int64_t s1, int64_t T_, int64_t H, int64_t half,
                            const int32_t* pos, const float* f, bool interleaved, float af) {
  pdl_wait();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= T_ * H * half) return;
  const int64_t j = i % half, h = (i / half) % H, t = i / (half * H);
  const float ang = static_cast<float>(pos[t]) * f[j];  // fp32 angle, as transformers does
  const float c = cosf(ang) * af, sn = sinf(ang) * af;
  T* r = x + t * s0 + h * s1;
  const int64_t i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
  const float a = to_f(r[i0]), b = to_f(r[i1]);
  r[i0] = from_f<T>(a * c - b * sn);
  r[i1] = from_f<T>(b * c + a * sn);
}

}  // namespace

void rope(void* x, int64_t s0, int64_t s1, int64_t T, int64_t H, int64_t d, const int32_t* pos,
          const float* inv_freq, bool interleaved, float af, DT dt, cudaStream_t s) {
  const int64_t n = T * H * (d / 2);
  if (n == 0) return;
  const unsigned g = cdiv(n, kEwThreads);
  if (dt == DT::BF16)
    launch(rope_kernel<bf16>, g, kEwThreads, 0, s, static_cast<bf16*>(x), s0, s1, T, H, d / 2, pos,
           inv_freq, interleaved, af);
  else
    launch(rope_kernel<float>, g, kEwThreads, 0, s, static_cast<float*>(x), s0, s1, T, H, d / 2,
           pos, inv_freq, interleaved, af);
}

}  // namespace tandem::cuda::k
