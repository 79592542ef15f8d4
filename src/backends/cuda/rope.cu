// RoPE in place: one thread per rotated pair and group of heads, fp32 angle pos * inv_freq.
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

// One thread per rotated pair (t, j) of G consecutive heads: the angle's cosine and sine (the
// costly part: precise cosf / sinf) and the index arithmetic once for G heads instead of once per
// head (GLM-5.2's 64 query heads: the prefill's ropes took 111 us at 4,096 tokens, ~7x their
// bytes at the copy rate). Lanes run over j, so a head's pairs are read contiguously. G = 1 at
// decode sizes (launch_rope): more threads, each one memory round trip.
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
  // Every head's pair is loaded before any is stored: written as one loop, the stores (which may
  // alias the next head's loads, as far as the compiler knows) kept each head's load behind the
  // previous head's store, G memory round trips where one does (decode: +2-8 us a call).
  float a[G], b[G];
#pragma unroll
  for (int h = 0; h < G; ++h)
    if (h < nh) a[h] = to_f(r[h * s1 + i0]), b[h] = to_f(r[h * s1 + i1]);
#pragma unroll
  for (int h = 0; h < G; ++h)
    if (h < nh) {
      r[h * s1 + i0] = from_f<T>(a[h] * c - b[h] * sn);
      r[h * s1 + i1] = from_f<T>(b[h] * c + a[h] * sn);
    }
}

template <typename T>
void launch_rope(T* x, int64_t s0, int64_t s1, int64_t T_, int64_t H, int64_t half,
                 const int32_t* pos, const float* f, bool interleaved, float af, cudaStream_t s) {
  // Groups of 8 heads once there are pairs enough to fill the GPU with a thread per 8 (prefill);
  // a thread per pair below that (decode: more threads, each one round trip).
  if (H >= 8 && T_ * H * half >= (int64_t{1} << 17)) {
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
