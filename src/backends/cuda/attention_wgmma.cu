// mla_decode with all 64 heads of a query token in one block, on Hopper's warpgroup MMA. The
// mma.sync kernel (attention_wide.cu) is bound by shared memory: every warp loads its own copy
// of each operand fragment, so a 32-key chunk costs ~350 KB of ldmatrix traffic. wgmma reads its
// shared-memory operands once per warpgroup and multiplies 64 rows at a time, so the same chunk
// reads ~210 KB, and the B operand of P V is the key tile itself, read N-major (no transpose
// copy).
//
// Two warpgroups, 32 keys per chunk, three key buffers (chunk i + 2 is copied while chunk i is
// computed). Warpgroup w (warps 4w .. 4w + 3):
//   S   scores of all 64 heads for keys [16 w, 16 w + 16) of the chunk (wgmma m64n16k16, Q and
//       the key rows both K-major in shared memory, 36 k-steps over the 576 dims);
//   the two halves' row maxima meet through shared memory, so both warpgroups take the same
//   running max and correction; each sums its own 16 keys' probabilities (the two sums are
//   added once at the end);
//   P V O[64 heads, columns [256 w, 256 w + 256)] += P[64, 32 keys] V[32 keys, ...] (wgmma
//       m64n256k16, P from registers: its own 16 keys straight from the score accumulators,
//       the other warpgroup's 16 through shared memory; V = the first 512 dims of the same
//       key rows, read N-major).
// Every output depends on its own token's query, keys and split only: batch-invariant.
//
// Shared memory tiles use wgmma's 128-byte swizzle (wgmma.cuh): Q [9 atoms][64 heads][128 B],
// each key buffer [9 atoms][32 keys][128 B]. The copies (cp.async) write the generic proxy;
// each thread fences them to the async proxy before the barrier that publishes a chunk.
#include <cfloat>

#include "backends/cuda/mla_slot_table.cuh"
#include "backends/cuda/mma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int GH = 64;                // heads per block (the M of every wgmma)
constexpr int GK = 32;                // keys per chunk
constexpr int GLC = 512;              // latent (value) columns
constexpr int GL = 576;               // latent + rope dims of a key row
constexpr int GNB = 3;                // key buffers
constexpr int kPieces = GL / 8;       // 16-byte pieces of a row (72)
constexpr int kSteps = GL / 16;       // k-steps of S (36)
constexpr int kQBytes = GL * 2 * GH;  // 73,728
constexpr int kKBytes = GL * 2 * GK;  // 36,864 per buffer
constexpr int PBP = GK + 8;           // padded row of the P exchange tile (bf16)
constexpr int kGThreads = 256;
static_assert(GK == MlaSlotTable::kChunk && kGThreads == MlaSlotTable::kThreads);

constexpr size_t kGSmem = 1024                         // alignment slack for the atoms
                          + kQBytes + GNB * kKBytes    // Q, key buffers (swizzled bf16)
                          + GH * PBP * 2               // P exchange (bf16)
                          + 2 * 2 * GH * 4             // row maxima, row sums [2][64] each
                          + MlaSlotTable::kSmemBytes;  // slot tables

// The two warpgroups' meeting points (ids 1 and 2; 0 is __syncthreads).
__device__ __forceinline__ void block_bar(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}

// grid (T, num_splits), 256 threads. Per chunk i (a block-uniform loop):
//   X  (after this thread's copies of chunk i landed and were fenced, and its warpgroup's P V of
//      chunk i - 1 finished) chunk i is visible and chunk i - 1's buffer free: issue chunk
//      i + 2's copies into it and the slot table's lookups; S of both halves
//   M  row maxima exchanged; softmax; P halves into the exchange tile
//   P  the other half's P read; O rescaled; P V issued (it runs on through the next
//      iteration's copy wait)
__global__ void __launch_bounds__(kGThreads, 1) mla_decode_wgmma_kernel(MlaDecodeParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem =
      smem_raw +
      ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  unsigned char* qs = smem;                                    // Q, swizzled
  unsigned char* ks = qs + kQBytes;                            // [GNB] key buffers, swizzled
  bf16* pb = reinterpret_cast<bf16*>(ks + GNB * kKBytes);      // [64][PBP]
  float* rmax = reinterpret_cast<float*>(pb + GH * PBP);       // [2][64]
  float* rsum = rmax + 2 * GH;                                 // [2][64]
  int32_t* table = reinterpret_cast<int32_t*>(rsum + 2 * GH);  // MlaSlotTable's tables
  uint32_t* kmask = reinterpret_cast<uint32_t*>(table + 2 * MlaSlotTable::kSpan * GK);

  const int t = blockIdx.x, split = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup, warp within it (rows 16 wq ..)
  const int r0 = 16 * wq + g, r1 = r0 + 8;  // this thread's two heads
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* pool = static_cast<const bf16*>(p.pool);
  const float scale2 = p.scale * 1.4426950408889634f;  // scores in log2 units

  {  // Q [64 heads, 576]: 16-byte pieces into their swizzled places
    const bf16* src = q + t * p.q_s0;
    for (int i = tid; i < GH * kPieces; i += kGThreads) {
      const int h = i / kPieces, v = i % kPieces;
      cp_async16(qs + sw128_offset(GH, h, v), src + h * p.q_s1 + v * 8, true);
    }
    cp_async_commit();
  }

  const int64_t pos = p.meta.token_pos[t];
  const SplitRange sr = split_range(p, pos, split, GK);
  const int nchunks = sr.nchunks;
  MlaSlotTable slots(p, table, kmask, t, pos, sr.it0, sr.it1);

  // Chunk ci's rows into buffer ci % GNB: 8 threads per row, thread j8 its pieces j8, j8 + 8, ..
  // (one per 128-byte atom); zeros for a missing key.
  const auto copy_keys = [&](int ci) {
    const int j = tid >> 3, j8 = tid & 7;
    const int32_t sl = slots.slot(ci, j);
    unsigned char* dst = ks + (ci % GNB) * kKBytes;
    const bf16* src = pool + static_cast<int64_t>(sl >= 0 ? sl : 0) * GL;
#pragma unroll
    for (int a = 0; a < kPieces / 8; ++a) {
      const int v = 8 * a + j8;
      cp_async16(dst + sw128_offset(GK, j, v), sl >= 0 ? src + v * 8 : pool, sl >= 0);
    }
  };

  if (nchunks > 0) {
    slots.fill_first();
    __syncthreads();
    for (int ci = 0; ci < GNB - 1; ++ci) {  // one commit group per chunk, empty past the end
      if (ci < nchunks) copy_keys(ci);
      cp_async_commit();
    }
  }

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // heads r0, r1 (own keys)
  float o[128];  // O[heads 16 wq + g (+ 8), columns 256 wg + 8 j + 2c (+ 1)]: o[4 j + e]
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  // This warp's ldmatrix address of the other half's P (rows 16 wq .., keys 16 (1 - wg) ..).
  const bf16* p_other =
      pb + (16 * wq + (lane & 7) + ((lane >> 3) & 1) * 8) * PBP + 16 * (wg ^ 1) + (lane >> 4) * 8;
  const uint64_t q_desc = wgmma_desc(qs, 16, 1024);

  for (int i = 0; i < nchunks; ++i) {
    cp_async_wait<GNB - 2>();  // this thread's copies of chunk i have landed
    fence_proxy_async_smem();  // ... and are visible to wgmma
    wgmma_wait<0>();           // chunk i - 1's P V has read its buffer (refilled below)
    wgmma_fence_operands(o);
    __syncthreads();  // X
    if (i + GNB - 1 < nchunks) copy_keys(i + GNB - 1);
    cp_async_commit();  // possibly empty
    slots.before_math(i, nchunks);
    unsigned char* kt = ks + (i % GNB) * kKBytes;
    const uint32_t bits = slots.bits(i);
    if (bits != 0) {  // block-uniform; a chunk without a key changes nothing
      // S: k-step s reads atom s / 4 at byte 32 (s % 4) of Q's and the keys' 128-byte rows.
      float sacc[8] = {};
      const uint64_t k_desc = wgmma_desc(kt + 2048 * wg, 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        const uint64_t off_q = ((s >> 2) * (GH * 128) + (s & 3) * 32) >> 4;
        const uint64_t off_k = ((s >> 2) * (GK * 128) + (s & 3) * 32) >> 4;
        wgmma_m64n16k16_ss(sacc, q_desc + off_q, k_desc + off_k, s > 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(sacc);

      // sacc[4 j + e]: key 16 wg + 8 j + 2c + (e & 1), head r0 (e < 2) or r1.
      float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool valid = (bits >> (16 * wg + 8 * j + 2 * c + (e & 1))) & 1u;
          float& x = sacc[4 * j + e];
          x = valid ? x * scale2 : -INFINITY;
          mloc[e >> 1] = fmaxf(mloc[e >> 1], x);
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 1));
        mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 2));
      }
      if (c == 0) rmax[wg * GH + r0] = mloc[0], rmax[wg * GH + r1] = mloc[1];
      block_bar(1);  // M
      float corr[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int h = r ? r1 : r0;
        const float m_new = fmaxf(m_run[r], fmaxf(rmax[h], rmax[GH + h]));
        // exp2(-inf) = 0 takes care of masked keys and of the first chunk's correction (its
        // state is zero); a row without any key so far (m_new = -inf) gets p = 0, not nan.
        const float m_use = m_new == -INFINITY ? 0.f : m_new;
        corr[r] = fast_exp2(m_run[r] - m_use);
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          sacc[4 * j + 2 * r] = fast_exp2(sacc[4 * j + 2 * r] - m_use);
          sacc[4 * j + 2 * r + 1] = fast_exp2(sacc[4 * j + 2 * r + 1] - m_use);
          sum += sacc[4 * j + 2 * r] + sacc[4 * j + 2 * r + 1];
        }
        m_run[r] = m_new;
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        l_run[r] = l_run[r] * corr[r] + sum;
      }
      // Own P as the A fragment of keys [16 wg, 16 wg + 16), and into the exchange tile.
      uint32_t own[4], other[4];
      own[0] = pack_bf16(sacc[0], sacc[1]);
      own[1] = pack_bf16(sacc[2], sacc[3]);
      own[2] = pack_bf16(sacc[4], sacc[5]);
      own[3] = pack_bf16(sacc[6], sacc[7]);
      {
        bf16* w0 = pb + r0 * PBP + 16 * wg + 2 * c;
        bf16* w1 = pb + r1 * PBP + 16 * wg + 2 * c;
        *reinterpret_cast<uint32_t*>(w0) = own[0];
        *reinterpret_cast<uint32_t*>(w1) = own[1];
        *reinterpret_cast<uint32_t*>(w0 + 8) = own[2];
        *reinterpret_cast<uint32_t*>(w1 + 8) = own[3];
      }
      slots.after_math(i, nchunks);
      block_bar(2);  // P
      ldmatrix_x4(other[0], other[1], other[2], other[3], p_other);
      uint32_t pa[2][4];  // the A fragments of keys [0, 16) and [16, 32) (selects, no indexing)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        pa[0][e] = wg ? other[e] : own[e];
        pa[1][e] = wg ? own[e] : other[e];
      }
      if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          o[4 * j] *= corr[0], o[4 * j + 1] *= corr[0];
          o[4 * j + 2] *= corr[1], o[4 * j + 3] *= corr[1];
        }
      }
      // P V: the value columns [256 wg, +256) are atoms 4 wg .. 4 wg + 3 of the key rows; keys
      // [16 kk, +16) start 2048 kk bytes in.
      const uint64_t v_desc = wgmma_desc(kt + 4 * wg * (GK * 128), GK * 128, 1024);
      wgmma_fence();
      wgmma_m64n256k16_rs_tn(o, pa[0], v_desc, 1);
      wgmma_m64n256k16_rs_tn(o, pa[1], v_desc + (2048 >> 4), 1);
      wgmma_commit();
    } else {
      slots.after_math(i, nchunks);
    }
  }
  wgmma_wait<0>();
  wgmma_fence_operands(o);
  cp_async_wait<0>();  // nothing in flight at exit (an empty split's q copies)

  // The row sums of both halves (each warpgroup summed its own keys under the same maxima).
  if (c == 0) rsum[wg * GH + r0] = l_run[0], rsum[wg * GH + r1] = l_run[1];
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r ? r1 : r0;
    const float l = rsum[h] + rsum[GH + h];
    const int64_t th = static_cast<int64_t>(t) * GH + h;
    const float inv = l > 0.f ? 1.0f / l : 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) {
      const int col = 256 * wg + 8 * j + 2 * c;
      const float o0 = o[4 * j + 2 * r] * inv, o1 = o[4 * j + 2 * r + 1] * inv;
      if (p.num_splits == 1)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * GLC + col) =
            __floats2bfloat162_rn(o0, o1);
      else
        *reinterpret_cast<float2*>(p.part_o + (th * p.num_splits + split) * GLC + col) =
            make_float2(o0, o1);
    }
    if (p.num_splits > 1 && wg == 0 && c == 0)  // natural log, as the merge reads it
      p.part_lse[th * p.num_splits + split] =
          l > 0.f ? m_run[r] * 0.6931471805599453f + logf(l) : -INFINITY;
  }
}

}  // namespace

bool mla_decode_wgmma_applies(int64_t H, int64_t L, int64_t Lc, bool kv_fp8) {
  return H == GH && Lc == GLC && L == GL && !kv_fp8;
}

void mla_decode_wgmma(const MlaDecodeParams& p, cudaStream_t s) {
  const dim3 g(static_cast<unsigned>(p.T), static_cast<unsigned>(p.num_splits));
  opt_in_smem<mla_decode_wgmma_kernel>(kGSmem);
  launch(mla_decode_wgmma_kernel, g, kGThreads, kGSmem, s, p);
}

}  // namespace tandem::cuda::k
