// mla_decode with all 64 heads of a query token in one block (the FlashMLA shape, on mma.sync).
// The 16-head kernel of attention_mma.cu copies every key row into shared memory once per head
// group, four times per token, and with a 74 KB key tile it fits one buffer per block at large
// batches, so each chunk waits out its copy. Here a block stages a token's key rows once for all
// heads, 32 keys per chunk, in three buffers: chunk i + 2 is copied while chunk i is computed.
//
// The O accumulator of 64 heads x 512 columns in f32 is half the register file, so a block is
// the SM's only one and its 8 warps must keep the tensor cores busy by themselves: every warp
// runs long chains of independent mma with its fragments loaded ahead, and a chunk costs
// two barriers. Warp w owns head tile ht = w % 4 (heads 16 ht .. 16 ht + 15) and half kh = w / 4:
//   S   partial scores of its heads for all 32 keys over dims [288 kh, 288 kh + 288) of the row
//       (each q fragment feeds four key tiles); the two halves meet through shared memory, both
//       warps of a head tile add them (the same sum: f32 addition commutes) and run the same
//       softmax, so both keep identical running max and sum without another exchange;
//   P V O[its heads, columns [256 kh, 256 kh + 256)] += P[its heads, 32 keys] V[32 keys, ...],
//       P straight from the score registers (an m16n8 accumulator pair is an m16k16 A fragment),
//       V the first 512 dims of the same key rows (read transposed with ldmatrix).
// Every output depends on its own token's query, keys and split only: batch-invariant.
//
// The cache slots of the keys come from mla_slot_table.cuh (looked up 32 chunks ahead).
#include <cfloat>

#include "backends/cuda/kv_fp8.cuh"
#include "backends/cuda/mla_slot_table.cuh"
#include "backends/cuda/mma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int WH = 64;    // heads per block
constexpr int WK = 32;    // keys per chunk
constexpr int WLC = 512;  // latent (value) columns
constexpr int WL = 576;   // latent + rope dims of a key row (GLM-5.x, DeepSeek-V3.x)
constexpr int NB = 3;     // key buffers
constexpr int kWideThreads = 256;
static_assert(WK == MlaSlotTable::kChunk && kWideThreads == MlaSlotTable::kThreads);
static_assert(WL % 32 == 0, "two halves of whole 16-dim k-steps");

constexpr int LP = WL + 8;           // row stride: 8 rows of an ldmatrix hit distinct banks
constexpr int kHalfSteps = WL / 32;  // k-steps of 16 dims in half a row (18)
constexpr int kVecPerRow = WL / 8;   // 16-byte pieces of a bf16 row (72)
constexpr size_t kWideSmem = (WH + NB * WK) * LP * 2  // q rows, key buffers (bf16)
                             + 2 * WH * WK * 4        // partial scores, both halves (f32)
                             + MlaSlotTable::kSmemBytes;

// Named barrier of the two warps of head tile ht (ids 1-4; 0 is __syncthreads).
__device__ __forceinline__ void pair_sync(int ht) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(1 + ht) : "memory");
}

// Partial scores of 16 heads x 32 keys over kHalfSteps k-steps: sp[nt][e] is head g (e < 2) or
// g + 8, key 8 nt + 2c + (e & 1). qa, kb: this lane's ldmatrix addresses at the first k-step (A:
// the head tile's q rows; B: keys 8 (lane / 16) + lane % 8, dims 8 ((lane / 8) % 2) on). The
// fragments of step s + kAhead are loaded while step s multiplies; even and odd steps accumulate
// apart (eight independent chains), summed in a fixed order at the end.
template <int kAhead>
__device__ __forceinline__ void qk_half(const bf16* qa, const bf16* kb, float (&sp)[4][4]) {
  float ev[4][4] = {}, od[4][4] = {};
  uint32_t fa[kAhead + 1][4], fb[kAhead + 1][8];
  const auto load = [&](int s, int slot) {
    ldmatrix_x4(fa[slot][0], fa[slot][1], fa[slot][2], fa[slot][3], qa + 16 * s);
    ldmatrix_x4(fb[slot][0], fb[slot][1], fb[slot][2], fb[slot][3], kb + 16 * s);
    ldmatrix_x4(fb[slot][4], fb[slot][5], fb[slot][6], fb[slot][7], kb + 16 * LP + 16 * s);
  };
#pragma unroll
  for (int s = 0; s < kAhead; ++s) load(s, s);
#pragma unroll
  for (int s = 0; s < kHalfSteps; ++s) {
    const int slot = s % (kAhead + 1);
    if (s + kAhead < kHalfSteps) load(s + kAhead, (s + kAhead) % (kAhead + 1));
    float(&d)[4][4] = (s & 1) ? od : ev;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
      mma_bf16(d[nt], fa[slot][0], fa[slot][1], fa[slot][2], fa[slot][3], fb[slot][2 * nt],
               fb[slot][2 * nt + 1]);
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) sp[nt][e] = ev[nt][e] + od[nt][e];
}

// O[16 heads, 256 columns] += P V for one chunk. pa[kk]: P's A fragments (keys 16 kk ..);
// vb: this lane's ldmatrix.trans address of V (keys (lane / 8 % 2) 8 + lane % 8, columns
// 8 (lane / 16) on). A column pair's B fragments are loaded kAhead pairs ahead.
template <int kAhead>
__device__ __forceinline__ void pv_half(const uint32_t (&pa)[2][4], const bf16* vb,
                                        float (&acc)[32][4]) {
  uint32_t b[kAhead + 1][2][4];
  const auto load = [&](int np, int slot) {
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
      ldmatrix_x4_trans(b[slot][kk][0], b[slot][kk][1], b[slot][kk][2], b[slot][kk][3],
                        vb + 16 * kk * LP + 16 * np);
  };
#pragma unroll
  for (int np = 0; np < kAhead; ++np) load(np, np);
#pragma unroll
  for (int np = 0; np < 16; ++np) {
    const int slot = np % (kAhead + 1);
    if (np + kAhead < 16) load(np + kAhead, (np + kAhead) % (kAhead + 1));
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      mma_bf16(acc[2 * np], pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], b[slot][kk][0],
               b[slot][kk][1]);
      mma_bf16(acc[2 * np + 1], pa[kk][0], pa[kk][1], pa[kk][2], pa[kk][3], b[slot][kk][2],
               b[slot][kk][3]);
    }
  }
}

// grid (T, num_splits), 256 threads. Per chunk i (a block-uniform loop):
//   X  (after this thread's copies of chunk i landed) every copy of chunk i is visible and every
//      warp is done with chunk i - 1: issue chunk i + 2's copies into i - 1's buffer and the
//      slot table's lookups of this iteration; partial S into shared memory
//   Y  (the two warps of a head tile) add the halves, softmax, P V
// kFp8: the pool holds FP8 rows (p.kv_fp8); a template parameter so the bf16 instance compiles
// without the FP8 staging.
template <bool kFp8>
__global__ void __launch_bounds__(kWideThreads, 1) mla_decode_wide_kernel(MlaDecodeParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* qs = reinterpret_cast<bf16*>(smem);                 // [64][LP]
  bf16* ks = qs + WH * LP;                                  // [NB][WK][LP]
  float* xs = reinterpret_cast<float*>(ks + NB * WK * LP);  // [2 halves][4 tiles][16][32 lanes]
  float* tables = xs + 2 * WH * WK;                         // MlaSlotTable's

  const int t = blockIdx.x, split = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int ht = warp & 3, kh = warp >> 2;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* pool = static_cast<const bf16*>(p.pool);
  // Fragments loaded two k-steps ahead; one with FP8 rows, whose staging registers are live
  // through the math (two would spill).
  constexpr int kAhead = kFp8 ? 1 : 2;
  // Scores in log2 units (scale * log2 e folded in once), so the softmax runs on exp2.
  const float scale2 = p.scale * 1.4426950408889634f;

  {  // q [64 heads, WL]: 4 threads per row
    const int h = tid >> 2;
    const bf16* src = q + t * p.q_s0 + h * p.q_s1;
    for (int v = tid & 3; v < kVecPerRow; v += 4)
      cp_async16(qs + h * LP + v * 8, src + v * 8, true);
    cp_async_commit();
  }

  const int64_t pos = p.meta.token_pos[t];
  const SplitRange sr = split_range(p, pos, split, WK);
  const int nchunks = sr.nchunks;
  MlaSlotTable slots(p, tables, t, pos, sr.it0, sr.it1);
  // Chunk ci's rows into buffer ci % NB: 8 threads per row; zeros for a missing key.
  const auto copy_keys = [&](int ci) {
    const int j = tid >> 3;
    const int32_t sl = slots.slot(ci, j);
    bf16* dst = ks + ((ci % NB) * WK + j) * LP;
    const bf16* src = pool + static_cast<int64_t>(sl >= 0 ? sl : 0) * WL;
#pragma unroll
    for (int k = 0; k < kVecPerRow / 8; ++k) {
      const int v = (tid & 7) + 8 * k;
      cp_async16(dst + v * 8, sl >= 0 ? src + v * 8 : pool, sl >= 0);
    }
  };

  // FP8 rows instead: a thread's 9 chunks of its row are loaded into registers when the copies
  // would be issued (fp8_load) and converted to bf16 into the buffer at the end of the same
  // iteration (fp8_store), after that iteration's math: the loads are in flight during it, as the
  // copies are. The buffer, chunk i + 2's, was last read by chunk i - 1 (before barrier X).
  const uint8_t* pool8 = static_cast<const uint8_t*>(p.pool);
  constexpr int kFp8PerThread = kVecPerRow / 8;  // chunks of 8 values a thread stages
  Fp8Chunk raw[kFp8PerThread];
  int32_t raw_slot = -1;
  const auto fp8_load = [&](int ci) {
    raw_slot = slots.slot(ci, tid >> 3);
    const uint8_t* row =
        pool8 + static_cast<int64_t>(raw_slot >= 0 ? raw_slot : 0) * p.kv_row_bytes;
#pragma unroll
    for (int k = 0; k < kFp8PerThread; ++k)
      if (raw_slot >= 0) raw[k] = fp8_latent_load(row, (tid & 7) + 8 * k, WLC);
  };
  const auto fp8_store = [&](int ci) {
    bf16* dst = ks + ((ci % NB) * WK + (tid >> 3)) * LP;
#pragma unroll
    for (int k = 0; k < kFp8PerThread; ++k) {
      const int v = (tid & 7) + 8 * k;
      *reinterpret_cast<uint4*>(dst + v * 8) =
          raw_slot >= 0 ? fp8_latent_convert(raw[k], v * 8 < WLC) : make_uint4(0, 0, 0, 0);
    }
  };

  if (nchunks > 0) {
    slots.fill_first();
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
  // This lane's ldmatrix addresses within a buffer (see qk_half and pv_half).
  const bf16* qa =
      qs + (16 * ht + (lane & 7) + ((lane >> 3) & 1) * 8) * LP + (lane >> 4) * 8 + kh * (WL / 2);
  const int kb_off = (8 * (lane >> 4) + (lane & 7)) * LP + ((lane >> 3) & 1) * 8 + kh * (WL / 2);
  const int vb_off = (((lane >> 3) & 1) * 8 + (lane & 7)) * LP + 256 * kh + (lane >> 4) * 8;
  // This lane's 16 partial scores in the exchange: [half][tile][element][lane], conflict-free.
  float* x_mine = xs + (kh * 4 + ht) * 16 * 32 + lane;
  const float* x_other = xs + ((kh ^ 1) * 4 + ht) * 16 * 32 + lane;

  for (int i = 0; i < nchunks; ++i) {
    cp_async_wait<NB - 2>();  // this thread's copies of chunk i have landed
    __syncthreads();          // X
    if (i + NB - 1 < nchunks) {
      if constexpr (kFp8)
        fp8_load(i + NB - 1);  // stored at the end of this iteration
      else
        copy_keys(i + NB - 1);
    }
    cp_async_commit();  // possibly empty
    slots.before_math(i, nchunks);
    const bf16* kt = ks + (i % NB) * WK * LP;
    const uint32_t bits = slots.bits(i);
    const bool live = bits != 0;  // a chunk without a key is skipped (no bit would change)

    float s[4][4];  // scores: n-tile nt, keys 8 nt + 2c (+ 1), heads hr[0] (e < 2), hr[1]
    if (live) {
      qk_half<kAhead>(qa, kt + kb_off, s);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) x_mine[(4 * nt + e) * 32] = s[nt][e];
    }
    slots.after_math(i, nchunks);
    if (live) {       // block-uniform
      pair_sync(ht);  // Y
      float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool valid = (bits >> (8 * nt + 2 * c + (e & 1))) & 1u;
          const float v = s[nt][e] + x_other[(4 * nt + e) * 32];
          s[nt][e] = valid ? v * scale2 : -INFINITY;
          mloc[e >> 1] = fmaxf(mloc[e >> 1], s[nt][e]);
        }
      float corr[2];      // 2^(old max - new max) per row, set below
      uint32_t pa[2][4];  // P as the A fragments of keys [16 kk, 16 kk + 16)
      online_softmax_chunk(s, mloc, m_run, l_run, corr);
#pragma unroll
      for (int kk = 0; kk < 2; ++kk) {
        pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
        pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
        pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
      }
      // Once the running maxima settle most chunks change none of a warp's rows: skip the 128
      // multiplications by 1 then (exact either way).
      if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
        for (int n = 0; n < 32; ++n)
          acc[n][0] *= corr[0], acc[n][1] *= corr[0], acc[n][2] *= corr[1], acc[n][3] *= corr[1];
      }
      pv_half<kAhead>(pa, kt + vb_off, acc);
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
      p.part_lse[th * p.num_splits + split] =  // natural log, as the merge reads it
          l_run[r] > 0.f ? m_run[r] * 0.6931471805599453f + logf(l_run[r]) : -INFINITY;
  }
}

}  // namespace

bool mla_decode_wide_applies(int64_t H, int64_t L, int64_t Lc) {
  return H == WH && Lc == WLC && L == WL;
}

void mla_decode_wide(const MlaDecodeParams& p, cudaStream_t s) {
  const dim3 g(static_cast<unsigned>(p.T), static_cast<unsigned>(p.num_splits));
  if (p.kv_fp8) {
    opt_in_smem<mla_decode_wide_kernel<true>>(kWideSmem);
    launch(mla_decode_wide_kernel<true>, g, kWideThreads, kWideSmem, s, p);
    return;
  }
  opt_in_smem<mla_decode_wide_kernel<false>>(kWideSmem);
  launch(mla_decode_wide_kernel<false>, g, kWideThreads, kWideSmem, s, p);
}

}  // namespace tandem::cuda::k
