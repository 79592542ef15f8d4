// Truly elementwise ops: SiLU-and-mul, add, bf16 rows to f32. Grid-stride loops, fp32 math on bf16
// or f32 storage.
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

template <typename T>
__global__ void silu_mul_kernel(const T* x, int64_t xs, T* out, int64_t I) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < I;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = to_f(x[t * xs + i]), u = to_f(x[t * xs + I + i]);
    out[t * I + i] = from_f<T>(g / (1.0f + expf(-g)) * u);
  }
}

template <typename T>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n) {
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = from_f<T>(to_f(a[i]) + to_f(b[i]));
}

__global__ void bf16_rows_to_f32_kernel(const bf16* x, int64_t xs, float* out, int64_t D) {
  pdl_wait();
  const int64_t t = blockIdx.y;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < D;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[t * D + i] = to_f(x[t * xs + i]);
}

}  // namespace

void bf16_rows_to_f32(const void* x, int64_t xs, float* out, int64_t T, int64_t D, cudaStream_t s) {
  for (int64_t t0 = 0; t0 < T; t0 += 65535) {  // grid.y is at most 65535 rows
    const int64_t n = T - t0 < 65535 ? T - t0 : 65535;
    const dim3 g(cdiv(D, kEwThreads) > 64 ? 64 : cdiv(D, kEwThreads), static_cast<unsigned>(n));
    launch(bf16_rows_to_f32_kernel, g, kEwThreads, 0, s, static_cast<const bf16*>(x) + t0 * xs, xs,
           out + t0 * D, D);
  }
}

void silu_mul(const void* x, int64_t xs, void* out, int64_t T, int64_t I, DT dt, cudaStream_t s) {
  if (T == 0 || I == 0) return;
  const dim3 g(cdiv(I, kEwThreads) > 64 ? 64 : cdiv(I, kEwThreads), static_cast<unsigned>(T));
  if (dt == DT::BF16)
    launch(silu_mul_kernel<bf16>, g, kEwThreads, 0, s, static_cast<const bf16*>(x), xs,
           static_cast<bf16*>(out), I);
  else
    launch(silu_mul_kernel<float>, g, kEwThreads, 0, s, static_cast<const float*>(x), xs,
           static_cast<float*>(out), I);
}

void add(const void* a, const void* b, void* out, int64_t n, DT dt, cudaStream_t s) {
  if (n == 0) return;
  if (dt == DT::BF16)
    launch(add_kernel<bf16>, grid_for(n), kEwThreads, 0, s, static_cast<const bf16*>(a),
           static_cast<const bf16*>(b), static_cast<bf16*>(out), n);
  else
    launch(add_kernel<float>, grid_for(n), kEwThreads, 0, s, static_cast<const float*>(a),
           static_cast<const float*>(b), static_cast<float*>(out), n);
}

}  // namespace tandem::cuda::k
