// Embedding, norms, RoPE, SiLU-and-mul, add, concat, row gathers, KV store/gather, argmax.
// Memory-bound one-pass kernels, fp32 math on bf16 or f32 storage.
#include <algorithm>
#include <cfloat>

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

namespace {

template <typename T>
__global__ void embedding_kernel(const int32_t* ids, const T* table, int64_t V, int64_t D, T* out) {
  pdl_wait();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool ok = id >= 0 && id < V;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x)
    out[t * D + i] = ok ? table[static_cast<int64_t>(id) * D + i] : from_f<T>(0.f);
}

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

// Argmax over a row in chunks of kArgmaxChunk values, one block per (chunk, row): a single block
// per row spent ~15 us walking 154880 logits with scalar loads, on the critical path of every
// decode and speculative phase. Each block writes its chunk's best (value, index) and the last
// block of the row to arrive (an arrival counter, reset by it) picks the row's best. The answer
// does not depend on the order: (value desc, index asc) is a total order on the candidates, NaN
// never wins, and a row without a value above -inf gives index 0, as on the CPU.
constexpr int kArgmaxThreads = 256;
constexpr int kArgmaxPerThread = 16;  // four float4 per thread
constexpr int64_t kArgmaxChunk = int64_t{kArgmaxThreads} * kArgmaxPerThread;
constexpr int kArgmaxNone = 0x7fffffff;  // no candidate yet

__device__ __forceinline__ bool argmax_better(float va, int ia, float vb, int ib) {
  return va > vb || (va == vb && ia < ib);
}

// The block's best (value, index) in thread 0 (warp shuffles, then the warps' results).
__device__ __forceinline__ void argmax_block(float& bv, int& bi, float* sv, int* si) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (argmax_better(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) sv[warp] = bv, si[warp] = bi;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w)
      if (argmax_better(sv[w], si[w], bv, bi)) bv = sv[w], bi = si[w];
}

// grid (chunks, T). part_v / part_i: [T, chunks]; counters: [T], zero, left zero.
__global__ void argmax_kernel(const float* logits, int64_t ls, int64_t V, bool vec, float* part_v,
                              int* part_i, int* counters, int32_t* out) {
  pdl_wait();
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ bool last;
  const int64_t t = blockIdx.y, c0 = blockIdx.x * kArgmaxChunk;
  const float* row = logits + t * ls;
  float bv = -INFINITY;
  int bi = kArgmaxNone;
  if (vec) {  // four float4 per thread, all in flight; each thread's indices ascend
    float4 x[kArgmaxPerThread / 4];
#pragma unroll
    for (int k = 0; k < kArgmaxPerThread / 4; ++k) {
      const int64_t v = c0 + (int64_t{k} * kArgmaxThreads + threadIdx.x) * 4;
      x[k] = v < V ? *reinterpret_cast<const float4*>(row + v)
                   : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
#pragma unroll
    for (int k = 0; k < kArgmaxPerThread / 4; ++k) {
      const int v = static_cast<int>(c0 + (int64_t{k} * kArgmaxThreads + threadIdx.x) * 4);
      const float e[4] = {x[k].x, x[k].y, x[k].z, x[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (e[j] > bv) bv = e[j], bi = v + j;
    }
  } else {
    for (int64_t v = c0 + threadIdx.x; v < V && v < c0 + kArgmaxChunk; v += kArgmaxThreads) {
      const float x = row[v];
      if (x > bv) bv = x, bi = static_cast<int>(v);
    }
  }
  argmax_block(bv, bi, sv, si);
  const int chunks = static_cast<int>(gridDim.x);
  if (chunks == 1) {
    if (threadIdx.x == 0) out[t] = bi == kArgmaxNone ? 0 : bi;
    return;
  }
  if (threadIdx.x == 0) {
    part_v[t * chunks + blockIdx.x] = bv;
    part_i[t * chunks + blockIdx.x] = bi;
    __threadfence();
    last = atomicAdd(counters + t, 1) == chunks - 1;
    if (last) counters[t] = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  bv = -INFINITY, bi = kArgmaxNone;
  for (int c = threadIdx.x; c < chunks; c += kArgmaxThreads) {
    const float v = __ldcg(part_v + t * chunks + c);
    const int i = __ldcg(part_i + t * chunks + c);
    if (argmax_better(v, i, bv, bi)) bv = v, bi = i;
  }
  __syncthreads();  // sv / si are reused
  argmax_block(bv, bi, sv, si);
  if (threadIdx.x == 0) out[t] = bi == kArgmaxNone ? 0 : bi;
}

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

constexpr int kThreads = 256;
unsigned grid_for(int64_t n) {
  const int64_t g = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > 65535 * 16 ? 65535 * 16 : g));
}

unsigned row_threads(int64_t D) {
  return D >= 1024 ? 512 : D >= 256 ? 256 : 128;
}

}  // namespace

void embedding(const int32_t* ids, int64_t T, const void* table, int64_t V, int64_t D, void* out,
               DT dt, cudaStream_t s) {
  if (T == 0) return;
  if (dt == DT::BF16)
    launch(embedding_kernel<bf16>, T, row_threads(D), 0, s, ids, static_cast<const bf16*>(table), V,
           D, static_cast<bf16*>(out));
  else
    launch(embedding_kernel<float>, T, row_threads(D), 0, s, ids, static_cast<const float*>(table),
           V, D, static_cast<float*>(out));
}

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

void rope(void* x, int64_t s0, int64_t s1, int64_t T, int64_t H, int64_t d, const int32_t* pos,
          const float* inv_freq, bool interleaved, float af, DT dt, cudaStream_t s) {
  const int64_t n = T * H * (d / 2);
  if (n == 0) return;
  const unsigned g = cdiv(n, kThreads);
  if (dt == DT::BF16)
    launch(rope_kernel<bf16>, g, kThreads, 0, s, static_cast<bf16*>(x), s0, s1, T, H, d / 2, pos,
           inv_freq, interleaved, af);
  else
    launch(rope_kernel<float>, g, kThreads, 0, s, static_cast<float*>(x), s0, s1, T, H, d / 2, pos,
           inv_freq, interleaved, af);
}

void silu_mul(const void* x, int64_t xs, void* out, int64_t T, int64_t I, DT dt, cudaStream_t s) {
  if (T == 0 || I == 0) return;
  const dim3 g(cdiv(I, kThreads) > 64 ? 64 : cdiv(I, kThreads), static_cast<unsigned>(T));
  if (dt == DT::BF16)
    launch(silu_mul_kernel<bf16>, g, kThreads, 0, s, static_cast<const bf16*>(x), xs,
           static_cast<bf16*>(out), I);
  else
    launch(silu_mul_kernel<float>, g, kThreads, 0, s, static_cast<const float*>(x), xs,
           static_cast<float*>(out), I);
}

void add(const void* a, const void* b, void* out, int64_t n, DT dt, cudaStream_t s) {
  if (n == 0) return;
  if (dt == DT::BF16)
    launch(add_kernel<bf16>, grid_for(n), kThreads, 0, s, static_cast<const bf16*>(a),
           static_cast<const bf16*>(b), static_cast<bf16*>(out), n);
  else
    launch(add_kernel<float>, grid_for(n), kThreads, 0, s, static_cast<const float*>(a),
           static_cast<const float*>(b), static_cast<float*>(out), n);
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

int64_t argmax_chunks(int64_t V) {
  return (V + kArgmaxChunk - 1) / kArgmaxChunk;
}

void argmax(const float* logits, int64_t ls, int64_t T, int64_t V, float* part_v, int* part_i,
            int* counters, int32_t* out, cudaStream_t s) {
  if (T == 0) return;
  const bool vec = V % 4 == 0 && ls % 4 == 0 && (reinterpret_cast<uintptr_t>(logits) & 15) == 0;
  const dim3 g(static_cast<unsigned>(std::max<int64_t>(argmax_chunks(V), 1)),
               static_cast<unsigned>(T));
  launch(argmax_kernel, g, kArgmaxThreads, 0, s, logits, ls, V, vec, part_v, part_i, counters, out);
}

void fill_random(void* p, int64_t n, uint64_t seed, float scale, DT dt, cudaStream_t s) {
  if (n == 0) return;
  const unsigned g = grid_for(n) > 8192 ? 8192 : grid_for(n);
  if (dt == DT::BF16)
    launch(fill_random_kernel<bf16>, g, kThreads, 0, s, static_cast<bf16*>(p), n, seed, scale);
  else
    launch(fill_random_kernel<float>, g, kThreads, 0, s, static_cast<float*>(p), n, seed, scale);
}

}  // namespace tandem::cuda::k
