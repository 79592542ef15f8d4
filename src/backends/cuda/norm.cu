// RMSNorm (scalar, register-held and vectorized bf16 rows), add + RMSNorm, LayerNorm: one block
// per row, fp32 block reductions on bf16 or f32 storage.
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

// One block per row: fp32 sum of squares, then out = w * (x * inv), as the CPU computes it.
template <typename T>
__global__ void rms_norm_kernel(const T* x, int64_t xs, const float* w, float eps, T* out,
                                int64_t os, int64_t D) {
  pdl_wait();
  __shared__ float red[32];
  const T* r = x + blockIdx.x * xs;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float v = to_f(r[i]);
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    out[blockIdx.x * os + i] = from_f<T>(w[i] * (to_f(r[i]) * inv));
}

// out[j] = bf16(w[j] * (f[j] * inv)) for 8 elements, one 16-byte store (w = w0 | w1): the last
// step of every vectorized RMSNorm kernel.
__device__ __forceinline__ void store_normed8(bf16* out, const float* f, const float4& w0,
                                              const float4& w1, float inv) {
  const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
  uint4 o;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
  for (int j = 0; j < 4; ++j)
    h[j] =
        __floats2bfloat162_rn(wv[2 * j] * (f[2 * j] * inv), wv[2 * j + 1] * (f[2 * j + 1] * inv));
  *reinterpret_cast<uint4*>(out) = o;
}

// The same for bf16 rows of a multiple of 8 elements on 16-byte boundaries: 16-byte loads and
// stores, eight elements per thread per step. A decode step's norms are single rows; the scalar
// kernel spent 6.5 us on one 6144-wide row, mostly issuing loads. Rows of at most
// NV * 8 * blockDim elements are held in registers: the row and the weights are loaded in one
// round trip before the reduction, not re-read after it (5 -> 3 us at 6144).
// ADD: first x = bf16(x + b), written back (add_rms_norm), then the norm of the rounded sums, so
// the result is bit for bit add then rms_norm, one launch and one pass over the row.
template <int NV, bool ADD>
__global__ void rms_norm_reg_kernel(bf16* x, int64_t xs, const bf16* b, int64_t bs, const float* w,
                                    float eps, bf16* out, int64_t os, int64_t D) {
  pdl_wait();
  __shared__ float red[32];
  bf16* r = x + blockIdx.x * xs;
  const int64_t i0 = threadIdx.x * 8, step = blockDim.x * 8;
  uint4 xv[NV], dv[NV];
  float4 w0[NV], w1[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const int64_t i = i0 + v * step;
    if (i < D) {
      xv[v] = *reinterpret_cast<const uint4*>(r + i);
      if constexpr (ADD) dv[v] = *reinterpret_cast<const uint4*>(b + blockIdx.x * bs + i);
      w0[v] = *reinterpret_cast<const float4*>(w + i);
      w1[v] = *reinterpret_cast<const float4*>(w + i + 4);
    }
  }
  float ss = 0.f;  // the same order as rms_norm_vec_kernel: ascending i, then j
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const int64_t i = i0 + v * step;
    if (i >= D) break;
    float f[8];
    bf16x8_to_f(xv[v], f);
    if constexpr (ADD) {
      float g[8];
      bf16x8_to_f(dv[v], g);
      __nv_bfloat162* s2 = reinterpret_cast<__nv_bfloat162*>(&xv[v]);
#pragma unroll
      for (int j = 0; j < 4; ++j)
        s2[j] = __floats2bfloat162_rn(f[2 * j] + g[2 * j], f[2 * j + 1] + g[2 * j + 1]);
      *reinterpret_cast<uint4*>(r + i) = xv[v];
      bf16x8_to_f(xv[v], f);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += f[j] * f[j];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
#pragma unroll
  for (int v = 0; v < NV; ++v) {
    const int64_t i = i0 + v * step;
    if (i >= D) break;
    float f[8];
    bf16x8_to_f(xv[v], f);
    store_normed8(out + blockIdx.x * os + i, f, w0[v], w1[v], inv);
  }
}

// rms_norm_reg_kernel<nv, ADD> for nv = 1, 2 or 3-4 vectors per thread.
template <bool ADD>
void launch_rms_norm_reg(int64_t nv, int64_t T, unsigned threads, cudaStream_t s, bf16* x,
                         int64_t xs, const bf16* b, int64_t bs, const float* w, float eps,
                         bf16* out, int64_t os, int64_t D) {
  if (nv == 1)
    launch(rms_norm_reg_kernel<1, ADD>, T, threads, 0, s, x, xs, b, bs, w, eps, out, os, D);
  else if (nv == 2)
    launch(rms_norm_reg_kernel<2, ADD>, T, threads, 0, s, x, xs, b, bs, w, eps, out, os, D);
  else
    launch(rms_norm_reg_kernel<4, ADD>, T, threads, 0, s, x, xs, b, bs, w, eps, out, os, D);
}

__global__ void rms_norm_vec_kernel(const bf16* x, int64_t xs, const float* w, float eps, bf16* out,
                                    int64_t os, int64_t D) {
  pdl_wait();
  __shared__ float red[32];
  const bf16* r = x + blockIdx.x * xs;
  float ss = 0.f;
  for (int64_t i = threadIdx.x * 8; i < D; i += blockDim.x * 8) {
    float f[8];
    bf16x8_to_f(*reinterpret_cast<const uint4*>(r + i), f);
#pragma unroll
    for (int j = 0; j < 8; ++j) ss += f[j] * f[j];
  }
  ss = block_sum(ss, red);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x * 8; i < D; i += blockDim.x * 8) {
    float f[8];
    bf16x8_to_f(*reinterpret_cast<const uint4*>(r + i), f);
    store_normed8(out + blockIdx.x * os + i, f, *reinterpret_cast<const float4*>(w + i),
                  *reinterpret_cast<const float4*>(w + i + 4), inv);
  }
}

template <typename T>
__global__ void layer_norm_kernel(const T* x, int64_t xs, const float* w, const float* b, float eps,
                                  T* out, int64_t os, int64_t D) {
  pdl_wait();
  __shared__ float red[32];
  const T* r = x + blockIdx.x * xs;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) s += to_f(r[i]);
  const float mean = block_sum(s, red) / static_cast<float>(D);
  float v = 0.f;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    const float d = to_f(r[i]) - mean;
    v += d * d;
  }
  const float inv = 1.0f / sqrtf(block_sum(v, red) / static_cast<float>(D) + eps);
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    out[blockIdx.x * os + i] = from_f<T>((to_f(r[i]) - mean) * inv * w[i] + b[i]);
}

}  // namespace

void rms_norm(const void* x, int64_t xs, const float* w, float eps, void* out, int64_t os,
              int64_t T, int64_t D, DT dt, cudaStream_t s) {
  if (T == 0) return;
  auto al = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  if (dt == DT::BF16 && D % 8 == 0 && xs % 8 == 0 && os % 8 == 0 && al(x) && al(out) && al(w)) {
    const unsigned threads = D / 8 >= 512 ? 256 : D / 8 >= 128 ? 128 : 64;
    const int64_t nv = (D + threads * 8 - 1) / (threads * 8);  // 16-byte vectors per thread
    const auto* xb = static_cast<const bf16*>(x);
    auto* ob = static_cast<bf16*>(out);
    if (nv <= 4)  // x is only read (no ADD)
      launch_rms_norm_reg<false>(nv, T, threads, s, const_cast<bf16*>(xb), xs, nullptr, 0, w, eps,
                                 ob, os, D);
    else
      launch(rms_norm_vec_kernel, T, threads, 0, s, xb, xs, w, eps, ob, os, D);
  } else if (dt == DT::BF16)
    launch(rms_norm_kernel<bf16>, T, row_threads(D), 0, s, static_cast<const bf16*>(x), xs, w, eps,
           static_cast<bf16*>(out), os, D);
  else
    launch(rms_norm_kernel<float>, T, row_threads(D), 0, s, static_cast<const float*>(x), xs, w,
           eps, static_cast<float*>(out), os, D);
}

bool add_rms_norm(void* h, int64_t hs, const void* b, int64_t bs, const float* w, float eps,
                  void* out, int64_t os, int64_t T, int64_t D, DT dt, cudaStream_t s) {
  auto al = [](const void* q) { return (reinterpret_cast<uintptr_t>(q) & 15) == 0; };
  if (dt != DT::BF16 || D % 8 != 0 || hs % 8 != 0 || bs % 8 != 0 || os % 8 != 0 || !al(h) ||
      !al(b) || !al(out) || !al(w))
    return false;
  const unsigned threads = D / 8 >= 512 ? 256 : D / 8 >= 128 ? 128 : 64;
  const int64_t nv = (D + threads * 8 - 1) / (threads * 8);
  if (nv > 4) return false;
  if (T == 0) return true;
  launch_rms_norm_reg<true>(nv, T, threads, s, static_cast<bf16*>(h), hs,
                            static_cast<const bf16*>(b), bs, w, eps, static_cast<bf16*>(out), os,
                            D);
  return true;
}

void layer_norm(const void* x, int64_t xs, const float* w, const float* b, float eps, void* out,
                int64_t os, int64_t T, int64_t D, DT dt, cudaStream_t s) {
  if (T == 0) return;
  if (dt == DT::BF16)
    launch(layer_norm_kernel<bf16>, T, row_threads(D), 0, s, static_cast<const bf16*>(x), xs, w, b,
           eps, static_cast<bf16*>(out), os, D);
  else
    launch(layer_norm_kernel<float>, T, row_threads(D), 0, s, static_cast<const float*>(x), xs, w,
           b, eps, static_cast<float*>(out), os, D);
}

}  // namespace tandem::cuda::k
