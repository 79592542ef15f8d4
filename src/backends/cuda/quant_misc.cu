// The small kernels around the quantized prefill GEMMs: the per-token x per-channel scale
// epilogue of per-channel FP8, and the dequantization of an MXFP4 weight to bf16.
#include "backends/cuda/quant_mma.cuh"

namespace tandem::cuda::k {

namespace {

// grid (ceil(N / 256), M).
template <typename TO>
__global__ void scale_rows_cols_kernel(const float* acc, int64_t N, const float* xs,
                                       const float* ws, int64_t ws_stride, TO* out, int64_t o_rs) {
  pdl_wait();
  const int64_t m = blockIdx.y, n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (n >= N) return;
  out[m * o_rs + n] = from_f<TO>(ws[n * ws_stride] * xs[m] * acc[m * N + n]);
}

// One thread per 8 weights (one 32-bit word of nibbles): out[n, 8j .. 8j + 7].
__global__ void mxfp4_dequant_kernel(const uint8_t* w, const uint8_t* s, int64_t s_rs, int64_t N,
                                     int64_t K, bf16* out) {
  pdl_wait();
  const int64_t words = K / 8;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= N * words) return;
  const int64_t n = i / words, j = i % words;
  const uint32_t v = *reinterpret_cast<const uint32_t*>(w + n * (K / 2) + 4 * j);
  const uint32_t sc = e8m0_bf16x2(s[n * s_rs + j / 4]);
  uint4 o;
  uint32_t* ow = reinterpret_cast<uint32_t*>(&o);
  uint32_t c[4];
  e2m1x8_to_bf16(v, c);
#pragma unroll
  for (int q = 0; q < 4; ++q) ow[q] = bf16x2_mul(c[q], sc);
  *reinterpret_cast<uint4*>(out + n * K + 8 * j) = o;
}

}  // namespace

void scale_rows_cols(const float* acc, int64_t M, int64_t N, const float* xs, const float* ws,
                     int64_t ws_stride, void* out, int64_t o_rs, DT out_dt, cudaStream_t s) {
  if (M == 0 || N == 0) return;
  const dim3 g(cdiv(N, 256), static_cast<unsigned>(M));
  if (out_dt == DT::F32)
    launch(scale_rows_cols_kernel<float>, g, 256, 0, s, acc, N, xs, ws, ws_stride,
           static_cast<float*>(out), o_rs);
  else
    launch(scale_rows_cols_kernel<bf16>, g, 256, 0, s, acc, N, xs, ws, ws_stride,
           static_cast<bf16*>(out), o_rs);
}

void mxfp4_dequant_bf16(const Mx4W& w, int64_t expert, void* out, cudaStream_t s) {
  const int64_t n = w.N * (w.K / 8);
  if (n == 0) return;
  launch(mxfp4_dequant_kernel, cdiv(n, 256), 256, 0, s, w.w + expert * w.w_es,
         w.s + expert * w.s_es, w.s_rs, w.N, w.K, static_cast<bf16*>(out));
}

}  // namespace tandem::cuda::k
