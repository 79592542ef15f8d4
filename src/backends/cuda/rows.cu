// Row copies: embedding lookup, column concat, row gather (one block per row, plain copies of
// 2- or 4-byte elements).
#include "backends/cuda/common.cuh"
#include "backends/cuda/elementwise.cuh"

namespace tandem::cuda::k {

namespace {

template <typename T>
__global__ void embedding_kernel(const int32_t* ids, const T* table, int64_t v0, int64_t V,
                                 int64_t D, T* out) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int64_t row = ids[t] - v0;  // a row of this rank's slice of the vocabulary
  const bool ok = row >= 0 && row < V;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    out[t * D + i] = ok ? table[row * D + i] : from_f<T>(0.f);
}

// Row copies of 2- or 4-byte elements.
template <typename E>
__global__ void concat_kernel(const E* a, int64_t as, const E* b, int64_t bs, E* out, int64_t D1,
                              int64_t D2) {
  pdl_wait();
  const int64_t t = blockIdx.x, W = D1 + D2;
  for (int64_t i = threadIdx.x; i < W; i += blockDim.x)
    out[t * W + i] = i < D1 ? a[t * as + i] : b[t * bs + i - D1];
}

template <typename E>
__global__ void gather_rows_kernel(const E* src, int64_t ss, int64_t N, const int32_t* rows, E* out,
                                   int64_t D) {
  pdl_wait();
  const int64_t i = blockIdx.x;
  const int32_t r = rows[i];
  const bool ok = r >= 0 && r < N;
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x)
    out[i * D + d] = ok ? src[r * ss + d] : E(0);
}

}  // namespace

void embedding(const int32_t* ids, int64_t T, const void* table, int64_t vocab_start, int64_t V,
               int64_t D, void* out, DT dt, cudaStream_t s) {
  if (T == 0) return;
  if (dt == DT::BF16)
    launch(embedding_kernel<bf16>, T, row_threads(D), 0, s, ids, static_cast<const bf16*>(table),
           vocab_start, V, D, static_cast<bf16*>(out));
  else
    launch(embedding_kernel<float>, T, row_threads(D), 0, s, ids, static_cast<const float*>(table),
           vocab_start, V, D, static_cast<float*>(out));
}

void concat_cols(const void* a, int64_t as, const void* b, int64_t bs, void* out, int64_t T,
                 int64_t D1, int64_t D2, int64_t eb, cudaStream_t s) {
  if (T == 0) return;
  if (eb == 2)
    launch(concat_kernel<uint16_t>, T, 256, 0, s, static_cast<const uint16_t*>(a), as,
           static_cast<const uint16_t*>(b), bs, static_cast<uint16_t*>(out), D1, D2);
  else
    launch(concat_kernel<uint32_t>, T, 256, 0, s, static_cast<const uint32_t*>(a), as,
           static_cast<const uint32_t*>(b), bs, static_cast<uint32_t*>(out), D1, D2);
}

void gather_rows(const void* src, int64_t ss, int64_t N, const int32_t* rows, void* out, int64_t M,
                 int64_t D, int64_t eb, cudaStream_t s) {
  if (M == 0) return;
  if (eb == 2)
    launch(gather_rows_kernel<uint16_t>, M, row_threads(D), 0, s, static_cast<const uint16_t*>(src),
           ss, N, rows, static_cast<uint16_t*>(out), D);
  else
    launch(gather_rows_kernel<uint32_t>, M, row_threads(D), 0, s, static_cast<const uint32_t*>(src),
           ss, N, rows, static_cast<uint32_t*>(out), D);
}

}  // namespace tandem::cuda::k
