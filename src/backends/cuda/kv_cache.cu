// KV cache: row store into the pool by slot, the fused MLA latent-row store (norm, rope,
// concat, store), paged gather back into contiguous rows.
#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

namespace {

template <typename E>
__global__ void kv_store_kernel(const E* rows, int64_t rs, const int32_t* slots, E* pool, int64_t S,
                                int64_t R) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= S) return;  // padding tokens write nowhere
  for (int64_t i = threadIdx.x; i < R; i += blockDim.x)
    pool[static_cast<int64_t>(slot) * R + i] = rows[t * rs + i];
}

// One block per token: pool[slot] = [rms_norm(x[:n], w) | rope(x[n:])] (mla_kv_store), the four
// kernels of the unfused path (norm, rope, concat, store) in one. x is read, never written.
__global__ void mla_kv_store_kernel(const bf16* x, int64_t xs, const float* w, float eps, int64_t n,
                                    int64_t half, const int32_t* pos, const float* f,
                                    bool interleaved, float af, const int32_t* slots, bf16* pool,
                                    int64_t S) {
  pdl_wait();
  __shared__ float red[32];
  const int64_t t = blockIdx.x;
  const bf16* r = x + t * xs;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = to_f(r[i]);
    ss += v * v;
  }
  ss = block_sum(ss, red);
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= S) return;  // padding tokens write nowhere
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  bf16* o = pool + static_cast<int64_t>(slot) * (n + 2 * half);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    o[i] = from_f<bf16>(w[i] * (to_f(r[i]) * inv));
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    const float ang = static_cast<float>(pos[t]) * f[j];  // as rope_kernel
    const float c = cosf(ang) * af, sn = sinf(ang) * af;
    const int64_t i0 = n + (interleaved ? 2 * j : j), i1 = n + (interleaved ? 2 * j + 1 : j + half);
    const float a = to_f(r[i0]), b = to_f(r[i1]);
    o[i0] = from_f<bf16>(a * c - b * sn);
    o[i1] = from_f<bf16>(b * c + a * sn);
  }
}

// grid (ceil(max_len / rows_per_block), B): each block copies up to rows_per_block positions.
template <typename E>
__global__ void kv_gather_kernel(const E* pool, PagedMeta m, int64_t rows_per_block, E* out,
                                 int64_t R) {
  pdl_wait();
  const int b = blockIdx.y;
  int64_t start = 0;
  for (int i = 0; i < b; ++i) start += m.seq_lens[i];
  const int64_t len = m.seq_lens[b];
  const int64_t p0 = blockIdx.x * rows_per_block;
  for (int64_t p = p0; p < p0 + rows_per_block && p < len; ++p) {
    const int64_t slot = paged_slot(m, b, p);
    for (int64_t i = threadIdx.x; i < R; i += blockDim.x)
      out[(start + p) * R + i] = pool[slot * R + i];
  }
}

}  // namespace

void mla_kv_store(const void* x, int64_t xs, const float* w, float eps, int64_t n, int64_t dr,
                  const int32_t* pos, const float* inv_freq, bool interleaved, float af,
                  const int32_t* slots, void* pool, int64_t T, int64_t S, cudaStream_t s) {
  if (T == 0) return;
  launch(mla_kv_store_kernel, T, 128, 0, s, static_cast<const bf16*>(x), xs, w, eps, n, dr / 2, pos,
         inv_freq, interleaved, af, slots, static_cast<bf16*>(pool), S);
}

void kv_store(const void* rows, int64_t rs, const int32_t* slots, void* pool, int64_t T, int64_t S,
              int64_t R, int64_t eb, cudaStream_t s) {
  if (T == 0) return;
  if (eb == 2)
    launch(kv_store_kernel<uint16_t>, T, 128, 0, s, static_cast<const uint16_t*>(rows), rs, slots,
           static_cast<uint16_t*>(pool), S, R);
  else
    launch(kv_store_kernel<uint32_t>, T, 128, 0, s, static_cast<const uint32_t*>(rows), rs, slots,
           static_cast<uint32_t*>(pool), S, R);
}

void kv_gather(const void* pool, const PagedMeta& m, int64_t max_len, void* out, int64_t R,
               int64_t eb, cudaStream_t s) {
  if (m.num_seqs == 0 || max_len == 0) return;
  constexpr int64_t kRows = 8;
  const dim3 g(cdiv(max_len, kRows), static_cast<unsigned>(m.num_seqs));
  if (eb == 2)
    launch(kv_gather_kernel<uint16_t>, g, 128, 0, s, static_cast<const uint16_t*>(pool), m, kRows,
           static_cast<uint16_t*>(out), R);
  else
    launch(kv_gather_kernel<uint32_t>, g, 128, 0, s, static_cast<const uint32_t*>(pool), m, kRows,
           static_cast<uint32_t*>(out), R);
}

}  // namespace tandem::cuda::k
