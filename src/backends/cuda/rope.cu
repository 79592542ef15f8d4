// RoPE in place: one thread per rotated pair and group of heads, fp32 angle pos * inv_freq.
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

// One thread per rotated pair (t, j) of G consecutive heads: the angle's cosine and sine (the
// costly part: precise cosf / sinf) and the index arithmetic once for G heads instead of once per
// head (GLM-5.2's 64 query heads: the prefill's ropes took 111 us at 4,096 tokens, ~7x their
// bytes at the copy rate). Lanes run over j, so a head's pairs are read contiguously; the G
// heads' loads are independent (unrolled), so few threads still keep memory busy at decode.
template <typename T, int G>
__global__ void rope_kernel(T* x, int64_t s0, int64_t s1, int64_t T_, int64_t H, int64_t half,
                            const int32_t* pos, const float* f, bool interleaved, float af) {
  pdl_wait();
  const int64_t groups = (H + G - 1) / G;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= T_ * groups * half) return;
  const int64_t j = i % half, hg = (i / half) % groups, t = i / (half * groups);
  const float ang = static_cast<float>(pos[t]) * f[j];  // fp32 angle, as transformers does
  const float c = cosf(ang) * af, sn = sinf(ang) * af;
  const int64_t i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
  T* r = x + t * s0 + hg * G * s1;
  const int nh = static_cast<int>(H - hg * G < G ? H - hg * G : G);
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (h < nh) {
      T* rh = r + h * s1;
      const float a = to_f(rh[i0]), b = to_f(rh[i1]);
      rh[i0] = from_f<T>(a * c - b * sn);
      rh[i1] = from_f<T>(b * c + a * sn);
    }
  }
}

template <typename T>
void launch_rope(T* x, int64_t s0, int64_t s1, int64_t T_, int64_t H, int64_t half,
                 const int32_t* pos, const float* f, bool interleaved, float af, cudaStream_t s) {
  if (H >= 8) {
    launch(rope_kernel<T, 8>, cdiv(T_ * ((H + 7) / 8) * half, kEwThreads), kEwThreads, 0, s, x, s0,
           s1, T_, H, half, pos, f, interleaved, af);
  } else {
    launch(rope_kernel<T, 1>, cdiv(T_ * H * half, kEwThreads), kEwThreads, 0, s, x, s0, s1, T_, H,
           half, pos, f, interleaved, af);
  }
}

}  // namespace

void rope(void* x, int64_t s0, int64_t s1, int64_t T, int64_t H, int64_t d, const int32_t* pos,
          const float* inv_freq, bool interleaved, float af, DT dt, cudaStream_t s) {
  if (T * H * (d / 2) == 0) return;
  if (dt == DT::BF16)
    launch_rope(static_cast<bf16*>(x), s0, s1, T, H, d / 2, pos, inv_freq, interleaved, af, s);
  else
    launch_rope(static_cast<float*>(x), s0, s1, T, H, d / 2, pos, inv_freq, interleaved, af, s);
}

}  // namespace tandem::cuda::k
