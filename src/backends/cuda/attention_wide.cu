// mla_decode with all 64 heads of a query token in one block (the FlashMLA shape, on mma.sync).
// The 16-head kernel of attention_mma.cu copies every key row into shared memory once per head
// group, four times per token, and with a 74 KB key tile it fits one buffer per block at large
// batches, so each chunk waits out its copy. Here a block stages a token's key rows once for all
// heads, 32 keys per chunk, in three buffers: chunk i + 2 is copied while chunk i is computed.
//
// Warp w owns head tile ht = w % 4 (heads 16 ht .. 16 ht + 15) and half kh = w / 4:
//   S   scores of its heads for keys [16 kh, 16 kh + 16) of the chunk (two n-tiles, all L dims);
//   the chunk's row max and row sum combine the two key halves through shared memory;
//   P V O[its heads, columns [256 kh, 256 kh + 256)] += P[its heads, 32 keys] V[32 keys, ...],
//       V being the first 512 dims of the same key rows (read transposed with ldmatrix).
// Both warps of a head tile keep identical running max and sum (same values, same order).
// Every output depends on its own token's query, keys and split only: batch-invariant.
//
// The cache slots of the keys are looked up a span of 32 chunks at a time into a table (two
// tables: the next span's is filled while this one's chunks are copied), with one bit per key
// saying whether it exists, so no chunk waits on a top-k or page-table load.
#include <cfloat>

#include "backends/cuda/kv_fp8.cuh"
#include "backends/cuda/mma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int WH = 64;       // heads per block
constexpr int WK = 32;       // keys per chunk
constexpr int WLC = 512;     // latent (value) columns
constexpr int WPB = WK + 8;  // padded row of P (bf16)
constexpr int NB = 3;        // key buffers
constexpr int SPAN = 32;     // chunks per slot table
constexpr int kWideThreads = 256;
static_assert(SPAN * WK == 4 * kWideThreads, "a table fill gives each thread 4 entries");

size_t wide_smem(int64_t L) {
  const int64_t LP = L + 8;
  return (WH + NB * WK) * LP * 2 + WH * WPB * 2 + 4 * WH * 4 + 2 * SPAN * WK * 4 + 2 * SPAN * 4;
}

// grid (T, num_splits), 256 threads. Per chunk i (a block-uniform loop; A to D its barriers):
//   A  chunk i - 1 is consumed: issue chunk i + 2's copies into its buffer; the first chunk of a
//      span issues the next span's table lookups; wait for this thread's copies of chunk i
//   B  everyone's copies of chunk i have landed: S and the per-half row max; the lookups land
//   C  the row max over both halves, P, per-half row sums
//   D  the row sums over both halves, rescale, P V
// Span s's table (s % 2) is filled in iteration 32 s - 32 (before the loop for span 0), read by
// the copies of its chunks (iterations 32 s - 2 .. 32 s + 29) and their S (32 s .. 32 s + 31),
// and refilled in iteration 32 s + 32, barriers after the last of those.
// kFp8: the pool holds FP8 rows (p.kv_fp8); a template parameter so the bf16 instance compiles
// exactly as it did without the FP8 staging.
template <bool kFp8>
__global__ void __launch_bounds__(kWideThreads, 1) mla_decode_wide_kernel(MlaDecodeParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int L = static_cast<int>(p.L);       // a multiple of 16 (mla_decode_wide_applies)
  const int LP = L + 8;                      // row stride: 8 rows of an ldmatrix hit distinct banks
  bf16* qs = reinterpret_cast<bf16*>(smem);  // [64][LP]
  bf16* ks = qs + WH * LP;                   // [NB][WK][LP]
  bf16* pb = ks + NB * WK * LP;              // [64][WPB] probabilities
  float* pmax = reinterpret_cast<float*>(pb + WH * WPB);       // [2 halves][64] chunk row max
  float* psum = pmax + 2 * WH;                                 // [2 halves][64] chunk row sum
  int32_t* table = reinterpret_cast<int32_t*>(psum + 2 * WH);  // [2][SPAN * WK] slot, -1 = none
  uint32_t* kmask = reinterpret_cast<uint32_t*>(table + 2 * SPAN * WK);  // [2][SPAN] key bits

  const int t = blockIdx.x, split = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int ht = warp & 3, kh = warp >> 2;
  const int vpr = L / 8;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* pool = static_cast<const bf16*>(p.pool);

  {  // q [64 heads, L]: 4 threads per row
    const int h = tid >> 2;
    const bf16* src = q + t * p.q_s0 + h * p.q_s1;
    for (int v = tid & 3; v < vpr; v += 4) cp_async16(qs + h * LP + v * 8, src + v * 8, true);
    cp_async_commit();
  }

  const int seq = p.meta.token_seq[t];
  const int64_t pos = p.meta.token_pos[t];
  const SplitRange sr = split_range(p, pos, split, WK);
  const int64_t it0 = sr.it0, it1 = sr.it1;
  const int nchunks = sr.nchunks;

  // Span s's lookups: entry e = r * 256 + tid is key e % 32 of chunk e / 32 (= 8 r + warp), so a
  // warp's ballot is that chunk's key bits. The loads are issued here and land where the
  // results are stored (fill_store), a barrier or more later.
  int64_t kp[4];
  const auto fill_load = [&](int s) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t it = it0 + static_cast<int64_t>(s) * SPAN * WK + r * kWideThreads + tid;
      kp[r] = it >= it1 ? -1 : p.topk ? p.topk[t * p.topk_k + it] : it;
    }
  };
  const auto fill_store = [&](int s) {
    int32_t* tab = table + (s & 1) * SPAN * WK;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int32_t sl =
          kp[r] >= 0 && kp[r] <= pos ? static_cast<int32_t>(paged_slot(p.meta, seq, kp[r])) : -1;
      tab[r * kWideThreads + tid] = sl;
      const uint32_t bits = __ballot_sync(0xffffffffu, sl >= 0);
      if (lane == 0) kmask[(s & 1) * SPAN + 8 * r + warp] = bits;
    }
  };
  const auto chunk_bits = [&](int ci) { return kmask[((ci / SPAN) & 1) * SPAN + ci % SPAN]; };
  // Chunk ci's rows into buffer ci % NB: 8 threads per row; zeros for a missing key.
  const auto copy_keys = [&](int ci) {
    const int j = tid >> 3;
    const int32_t sl = table[((ci / SPAN) & 1) * SPAN * WK + (ci % SPAN) * WK + j];
    bf16* dst = ks + ((ci % NB) * WK + j) * LP;
    const bf16* src = pool + static_cast<int64_t>(sl >= 0 ? sl : 0) * p.L;
    for (int v = tid & 7; v < vpr; v += 8)
      cp_async16(dst + v * 8, sl >= 0 ? src + v * 8 : pool, sl >= 0);
  };

  // FP8 rows instead: a thread's 9 chunks of its row are loaded into registers when the copies
  // would be issued (fp8_load) and converted to bf16 into the buffer at the end of the same
  // iteration (fp8_store), after that iteration's math: the loads are in flight during it, as the
  // copies are. The buffer, chunk i + 2's, was last read by chunk i - 1 (before barrier A).
  const uint8_t* pool8 = static_cast<const uint8_t*>(p.pool);
  constexpr int kFp8PerThread = (576 / 8 + 7) / 8;  // chunks of 8 values a thread stages
  Fp8Chunk raw[kFp8PerThread];
  int32_t raw_slot = -1;
  const auto fp8_load = [&](int ci) {
    raw_slot = table[((ci / SPAN) & 1) * SPAN * WK + (ci % SPAN) * WK + (tid >> 3)];
    const uint8_t* row =
        pool8 + static_cast<int64_t>(raw_slot >= 0 ? raw_slot : 0) * p.kv_row_bytes;
#pragma unroll
    for (int k = 0; k < kFp8PerThread; ++k) {
      const int v = (tid & 7) + 8 * k;
      if (raw_slot >= 0 && v < vpr) raw[k] = fp8_latent_load(row, v, WLC);
    }
  };
  const auto fp8_store = [&](int ci) {
    bf16* dst = ks + ((ci % NB) * WK + (tid >> 3)) * LP;
#pragma unroll
    for (int k = 0; k < kFp8PerThread; ++k) {
      const int v = (tid & 7) + 8 * k;
      if (v < vpr)
        *reinterpret_cast<uint4*>(dst + v * 8) =
            raw_slot >= 0 ? fp8_latent_convert(raw[k], v * 8 < WLC) : make_uint4(0, 0, 0, 0);
    }
  };

  if (nchunks > 0) {
    fill_load(0);
    fill_store(0);
    __syncthreads();
    for (int ci = 0; ci < NB - 1; ++ci) {  // one commit group per chunk, empty past the end
      if (ci < nchunks) {
        if constexpr (kFp8) {
          fp8_load(ci);
          fp8_store(ci);
        } else {
          copy_keys(ci);
        }
      }
      cp_async_commit();
    }
  }

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // heads 16 ht + g (+ 8)
  float acc[32][4] = {};  // O[those heads, columns 256 kh + 8 n + 2c (+ 1)]
  const int hr[2] = {16 * ht + g, 16 * ht + g + 8};

  for (int i = 0; i < nchunks; ++i) {
    __syncthreads();  // A
    if (i + NB - 1 < nchunks) {
      if constexpr (kFp8)
        fp8_load(i + NB - 1);  // stored at the end of this iteration
      else
        copy_keys(i + NB - 1);
    }
    cp_async_commit();  // possibly empty
    const bool fill = i % SPAN == 0 && i + SPAN < nchunks;
    if (fill) fill_load(i / SPAN + 1);
    cp_async_wait<NB - 1>();
    __syncthreads();  // B
    const bf16* kt = ks + (i % NB) * WK * LP;
    const uint32_t bits = chunk_bits(i);
    const bool live = bits != 0;  // a chunk without a key is skipped (no bit would change)

    float s[2][4];  // scores: n-tile nt, keys 16 kh + 8 nt + 2c (+ 1), heads hr[0] (e < 2), hr[1]
    if (live) {
      // Four accumulator chains per n-tile (k-step mod 4), summed in a fixed order.
      // Fragments by ldmatrix: A = q rows of the head tile; B = matrices (n-tile 0, k), (0, k + 8),
      // (1, k), (1, k + 8) of the key rows, lane l addressing row l % 8 of matrix l / 8.
      float a[2][4][4] = {};
      const bf16* qa = qs + 16 * ht * LP;
      const bf16* kb = kt + (16 * kh + 8 * (lane >> 4) + (lane & 7)) * LP + ((lane >> 3) & 1) * 8;
      for (int k0 = 0; k0 < L; k0 += 64) {
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const int kk = k0 + 16 * u;
          if (kk >= L) break;
          uint32_t a0, a1, a2, a3, b00, b01, b10, b11;
          ldmatrix_a(a0, a1, a2, a3, qa, LP, kk, lane);
          ldmatrix_x4(b00, b01, b10, b11, kb + kk);
          mma_bf16(a[0][u], a0, a1, a2, a3, b00, b01);
          mma_bf16(a[1][u], a0, a1, a2, a3, b10, b11);
        }
      }
      float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool valid = (bits >> (16 * kh + 8 * nt + 2 * c + (e & 1))) & 1u;
          const float v = (a[nt][0][e] + a[nt][1][e]) + (a[nt][2][e] + a[nt][3][e]);
          s[nt][e] = valid ? v * p.scale : -INFINITY;
          mloc[e >> 1] = fmaxf(mloc[e >> 1], s[nt][e]);
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 1));
        mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 2));
        if (c == 0) pmax[kh * WH + hr[r]] = mloc[r];
      }
    }
    if (fill) fill_store(i / SPAN + 1);
    __syncthreads();  // C

    float corr[2] = {1.f, 1.f};
    if (live) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m_new = fmaxf(m_run[r], fmaxf(pmax[hr[r]], pmax[WH + hr[r]]));
        float sum = 0.f;
        if (m_new != -INFINITY) {  // prevents (-inf) - (-inf) = nan
          corr[r] = expf(m_run[r] - m_new);
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const float x0 = s[nt][2 * r], x1 = s[nt][2 * r + 1];
            const float p0 = x0 == -INFINITY ? 0.f : expf(x0 - m_new);
            const float p1 = x1 == -INFINITY ? 0.f : expf(x1 - m_new);
            *reinterpret_cast<__nv_bfloat162*>(pb + hr[r] * WPB + 16 * kh + 8 * nt + 2 * c) =
                __floats2bfloat162_rn(p0, p1);
            sum += p0 + p1;
          }
        } else {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
            *reinterpret_cast<__nv_bfloat162*>(pb + hr[r] * WPB + 16 * kh + 8 * nt + 2 * c) =
                __floats2bfloat162_rn(0.f, 0.f);
        }
        m_run[r] = m_new;
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (c == 0) psum[kh * WH + hr[r]] = sum;
      }
    }
    __syncthreads();  // D

    if (live) {
#pragma unroll
      for (int r = 0; r < 2; ++r) l_run[r] = l_run[r] * corr[r] + (psum[hr[r]] + psum[WH + hr[r]]);
#pragma unroll
      for (int n = 0; n < 32; ++n)
        acc[n][0] *= corr[0], acc[n][1] *= corr[0], acc[n][2] *= corr[1], acc[n][3] *= corr[1];
      const int m = lane >> 3, r = lane & 7;  // this thread's ldmatrix row: matrix m, row r
      const bf16* pa = pb + 16 * ht * WPB;
#pragma unroll
      for (int kk = 0; kk < WK; kk += 16) {
        uint32_t a0, a1, a2, a3;
        ldmatrix_a(a0, a1, a2, a3, pa, WPB, kk, lane);
        const bf16* vrow = kt + (kk + (m & 1) * 8 + r) * LP + 256 * kh + (m >> 1) * 8;
#pragma unroll
        for (int np = 0; np < 16; ++np) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4_trans(b0, b1, b2, b3, vrow + 16 * np);
          mma_bf16(acc[2 * np], a0, a1, a2, a3, b0, b1);
          mma_bf16(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
        }
      }
    }
    if constexpr (kFp8)
      if (i + NB - 1 < nchunks) fp8_store(i + NB - 1);
  }
  cp_async_wait<0>();  // nothing in flight at exit (an empty split's q copies)

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t th = static_cast<int64_t>(t) * WH + hr[r];
    const float inv = l_run[r] > 0.f ? 1.0f / l_run[r] : 0.f;
#pragma unroll
    for (int n = 0; n < 32; ++n) {
      const int col = 256 * kh + 8 * n + 2 * c;
      const float o0 = acc[n][2 * r] * inv, o1 = acc[n][2 * r + 1] * inv;
      if (p.num_splits == 1)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * WLC + col) =
            __floats2bfloat162_rn(o0, o1);
      else
        *reinterpret_cast<float2*>(p.part_o + (th * p.num_splits + split) * WLC + col) =
            make_float2(o0, o1);
    }
    if (p.num_splits > 1 && kh == 0 && c == 0)
      p.part_lse[th * p.num_splits + split] =
          l_run[r] > 0.f ? m_run[r] + logf(l_run[r]) : -INFINITY;
  }
}

}  // namespace

bool mla_decode_wide_applies(int64_t H, int64_t L, int64_t Lc) {
  return H == WH && Lc == WLC && L % 16 == 0 && L >= Lc && L <= 576;
}

void mla_decode_wide(const MlaDecodeParams& p, cudaStream_t s) {
  const size_t smem = wide_smem(p.L);
  const dim3 g(static_cast<unsigned>(p.T), static_cast<unsigned>(p.num_splits));
  if (p.kv_fp8) {
    opt_in_smem<mla_decode_wide_kernel<true>>(smem);
    launch(mla_decode_wide_kernel<true>, g, kWideThreads, smem, s, p);
    return;
  }
  opt_in_smem<mla_decode_wide_kernel<false>>(smem);
  launch(mla_decode_wide_kernel<false>, g, kWideThreads, smem, s, p);
}

}  // namespace tandem::cuda::k
