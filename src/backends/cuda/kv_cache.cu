// KV cache: row store into the pool by slot, the fused MLA latent-row store (norm, rope,
// concat, store), paged gather back into contiguous rows; each also for the FP8 rows of
// ops/kv_fp8.h (quantized on the way in, dequantized to bf16 on the way out).
#include "backends/cuda/kv_fp8.cuh"

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

// Maximum over the block (blockDim.x a multiple of 32); every thread gets it. Contains barriers.
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < nw; ++i) r = fmaxf(r, red[i]);
  return r;
}

// The FP8 form of mla_kv_store_kernel: the same normalized and rotated values, quantized per
// tile of 128 (kv_fp8::quantize_latent_row). One block of 128 threads per token: thread i owns
// value i of every tile.
constexpr int kFp8StoreThreads = kFp8Tile;
__global__ void __launch_bounds__(kFp8StoreThreads)
    mla_kv_store_fp8_kernel(const bf16* x, int64_t xs, const float* w, float eps, int64_t n,
                            int64_t half, const int32_t* pos, const float* f, bool interleaved,
                            float af, const int32_t* slots, uint8_t* pool, int64_t S, int64_t RB) {
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
  if (slot < 0 || slot >= S) return;  // padding tokens write nowhere (uniform over the block)
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
  uint8_t* o = pool + static_cast<int64_t>(slot) * RB;
  const int64_t tiles = fp8_tiles(n);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int64_t i = tile * kFp8Tile + threadIdx.x;
    const float v = i < n ? w[i] * (to_f(r[i]) * inv) : 0.f;
    const float s = fp8_scale(block_max(fabsf(v), red));
    if (i < n) o[i] = to_e4m3(v * (1.0f / s));  // 1 / s is exact: s is a power of two
    if (threadIdx.x == 0) reinterpret_cast<float*>(o + n)[tile] = s;
  }
  bf16* pe = reinterpret_cast<bf16*>(o + n + 4 * tiles);
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    const float ang = static_cast<float>(pos[t]) * f[j];  // as rope_kernel
    const float c = cosf(ang) * af, sn = sinf(ang) * af;
    const int64_t i0 = interleaved ? 2 * j : j, i1 = interleaved ? 2 * j + 1 : j + half;
    const float a = to_f(r[n + i0]), b = to_f(r[n + i1]);
    pe[i0] = from_f<bf16>(a * c - b * sn);
    pe[i1] = from_f<bf16>(b * c + a * sn);
  }
}

struct WarpSync {
  __device__ void operator()() const { __syncwarp(); }
};

// One warp per token: rows[t] (bf16, D <= 128 values) rotated and quantized into its D + 4 byte
// key row (kv_fp8::quantize_index_row, the same operations in the same order).
__global__ void __launch_bounds__(32)
    index_key_store_fp8_kernel(const bf16* rows, int64_t rs, const int32_t* slots, uint8_t* pool,
                               int64_t S, int D, float rot_scale) {
  pdl_wait();
  __shared__ float x[128];
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0 || slot >= S) return;  // padding tokens write nowhere
  const int lane = threadIdx.x;
  for (int i = lane; i < D; i += 32) x[i] = to_f(rows[t * rs + i]);
  __syncwarp();
  hadamard_smem(x, D, rot_scale, lane, 32, WarpSync{});
  float amax = 0.f;
  for (int i = lane; i < D; i += 32) amax = fmaxf(amax, fabsf(x[i]));
  const float s = fp8_scale(warp_max(amax)), inv = 1.0f / s;
  uint8_t* o = pool + static_cast<int64_t>(slot) * (D + 4);
  for (int i = lane; i < D; i += 32) o[i] = to_e4m3(x[i] * inv);
  if (lane == 0) *reinterpret_cast<float*>(o + D) = s;
}

// grid (ceil(max_len / rows_per_block), B): each block dequantizes up to rows_per_block rows.
__global__ void kv_gather_fp8_kernel(const uint8_t* pool, PagedMeta m, int64_t rows_per_block,
                                     bf16* out, int n, int dr, int64_t RB) {
  pdl_wait();
  const int b = blockIdx.y;
  int64_t start = 0;
  for (int i = 0; i < b; ++i) start += m.seq_lens[i];
  const int64_t len = m.seq_lens[b];
  const int64_t p0 = blockIdx.x * rows_per_block;
  const int vpr = (n + dr) / 8;
  for (int64_t p = p0; p < p0 + rows_per_block && p < len; ++p) {
    const uint8_t* row = pool + paged_slot(m, b, p) * RB;
    for (int v = threadIdx.x; v < vpr; v += blockDim.x)
      *reinterpret_cast<uint4*>(out + (start + p) * (n + dr) + v * 8) = fp8_latent_chunk(row, v, n);
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
                  const int32_t* slots, void* pool, int64_t T, int64_t S, bool fp8,
                  int64_t row_bytes, cudaStream_t s) {
  if (T == 0) return;
  if (fp8) {
    launch(mla_kv_store_fp8_kernel, T, kFp8StoreThreads, 0, s, static_cast<const bf16*>(x), xs, w,
           eps, n, dr / 2, pos, inv_freq, interleaved, af, slots, static_cast<uint8_t*>(pool), S,
           row_bytes);
    return;
  }
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

void index_key_store_fp8(const void* rows, int64_t rs, const int32_t* slots, void* pool, int64_t T,
                         int64_t S, int64_t D, float rot_scale, cudaStream_t s) {
  if (T == 0) return;
  launch(index_key_store_fp8_kernel, T, 32, 0, s, static_cast<const bf16*>(rows), rs, slots,
         static_cast<uint8_t*>(pool), S, static_cast<int>(D), rot_scale);
}

void kv_gather_fp8(const void* pool, const PagedMeta& m, int64_t max_len, void* out, int64_t n,
                   int64_t dr, cudaStream_t s) {
  if (m.num_seqs == 0 || max_len == 0) return;
  constexpr int64_t kRows = 8;
  const dim3 g(cdiv(max_len, kRows), static_cast<unsigned>(m.num_seqs));
  launch(kv_gather_fp8_kernel, g, 128, 0, s, static_cast<const uint8_t*>(pool), m, kRows,
         static_cast<bf16*>(out), static_cast<int>(n), static_cast<int>(dr),
         n + 4 * fp8_tiles(n) + 2 * dr);
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
