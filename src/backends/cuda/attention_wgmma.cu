// mla_decode with all 64 heads of a query token in one block, on Hopper's warpgroup MMA. The
// mma.sync kernel (attention_wide.cu) is bound by shared memory: every warp loads its own copy
// of each operand fragment. wgmma reads its shared-memory operands once per warpgroup and
// multiplies 64 rows at a time, and the B operand of P V is the key tile itself, read N-major
// (no transpose copy).
//
// Keys go 64 a block through two buffers, and the two warpgroups have different jobs:
//   warpgroup 0 (the scorer) S = Q K^T for all 64 heads x 64 keys over the 576 dims (36
//       m64n64k16, Q and the key rows both K-major), the mask, the online softmax (it alone
//       keeps the running max and sum), P as bf16 into registers and into a shared tile, the
//       correction of each row into shared memory; then P V on its 256 value columns with P
//       from registers (m64n256k16);
//   warpgroup 1 (the copier) looks up the key slots (top-k entry, page) ahead, copies
//       Q and the key rows (cp.async), and runs P V on the other 256 columns with P from the
//       shared tile.
// Per block b, with named barriers between the warpgroups (one side arrives, the other waits):
//   keys   copier: block b's rows landed (and Q, for b = 0)          -> scorer: S, softmax
//   p      scorer: P, corrections and the skip flag of b written     -> copier: its P V of b
//   pfree  copier: its P V of b done (the P tile is free)            -> scorer: writes P of b + 1
//   vfree  scorer: its P V of b done (buffer b % 2 is free)          -> copier: publishes b + 1,
//                                                                        then copies b + 2
// So block b + 1's rows load while block b is scored and multiplied, and the scorer's S of b + 1
// waits only for them. (The copier waits at vfree before arriving at keys: the scorer's next
// arrival at vfree then cannot come before that wait, so no barrier phase is ever shared.)
// Measured and not kept: issuing block b + 1's scores right behind block b's P V (with the
// copier publishing b + 1 before its own P V) made the step slower everywhere (mla_decode at
// batch 128, 32k context: 104 -> 147 us; deterministic batch 1: 26 -> 36 us), as did an L2 bulk
// prefetch of the rows a block ahead of their copy (8-19%). A block
// without a key (ballots of the copier's slots) is skipped by both warpgroups: its P would be all
// zeros and its correction 1, so skipping changes no bit. Every output depends on its own token's
// query, keys and split only: batch-invariant.
//
// Column parts (NP = 1, 2, 4; grid z): a block may own only 512 / NP of the value columns, each
// warpgroup 256 / NP of them (P V on m64n{256,128,64}k16). Every part computes the same scores
// and softmax (the same code on the same data: the same bits), so a column's output does not
// depend on NP. With few query tokens (a batch-1 decode has one token and 2,048 / split keys)
// the parts put more SMs to work without shortening the splits, whose length fixes the
// reduction order that deterministic mode keeps for every batch size.
//
// Shared memory tiles use wgmma's 128-byte swizzle (wgmma.cuh): Q [9 atoms][64 heads][128 B],
// each key buffer [9 atoms][64 keys][128 B], P [64 heads][128 B]. The copies (cp.async) and the
// P stores write the generic proxy; the writing threads fence them to the async proxy before the
// barrier that publishes them.
#include <cfloat>

#include "backends/cuda/mma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int GH = 64;                // heads per block (the M of every wgmma)
constexpr int GB = 64;                // keys per block of the loop
constexpr int GLC = 512;              // latent (value) columns
constexpr int GL = 576;               // latent + rope dims of a key row
constexpr int kPieces = GL / 8;       // 16-byte pieces of a row (72)
constexpr int kAtoms = GL / 64;       // 128-byte column atoms of a row (9)
constexpr int kQBytes = GL * 2 * GH;  // 73,728
constexpr int kKBytes = GL * 2 * GB;  // 73,728 per buffer
constexpr int kPBytes = GH * GB * 2;  // 8,192: P [64 heads][64 keys] bf16, one atom wide
constexpr int kGThreads = 256;
constexpr int kCopyThreads = 128;                // warpgroup 1
constexpr int kRowsPerRound = kCopyThreads / 8;  // 16 key rows, 8 threads each
constexpr int kRounds = GB / kRowsPerRound;      // 4
static_assert(kRounds == 4 && GL % 64 == 0);

constexpr size_t kGSmem = 1024                     // alignment slack for the atoms
                          + kQBytes + 2 * kKBytes  // Q, key buffers (swizzled bf16)
                          + kPBytes                // P (swizzled bf16)
                          + 2 * GH * 4             // row corrections, final row sums
                          + 2 * 16 + 16;           // key bits [buffer][16 nibbles], skip flag

enum : int { kBarKeys = 1, kBarP = 2, kBarPFree = 3, kBarVFree = 4 };
__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id) {
  asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

// grid (T, num_splits, NP), 256 threads: warpgroup 0 scores, warpgroup 1 copies (see above).
template <int NP>
__global__ void __launch_bounds__(kGThreads, 1) mla_decode_wgmma_kernel(MlaDecodeParams p) {
  constexpr int WN = 256 / NP;  // value columns per warpgroup
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem =
      smem_raw +
      ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  unsigned char* qs = smem;                                  // Q, swizzled
  unsigned char* ks = qs + kQBytes;                          // [2] key buffers, swizzled
  unsigned char* ps = ks + 2 * kKBytes;                      // P, swizzled
  float* corr_s = reinterpret_cast<float*>(ps + kPBytes);    // [64] this block's row corrections
  float* lsum_s = corr_s + GH;                               // [64] the final row sums
  uint8_t* nib_s = reinterpret_cast<uint8_t*>(lsum_s + GH);  // [2][16] key bits, 4 a byte
  int* skip_s = reinterpret_cast<int*>(nib_s + 32);

  const int t = blockIdx.x, split = blockIdx.y, part = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup, warp within it (rows 16 wq ..)
  const int r0 = 16 * wq + g, r1 = r0 + 8;  // this thread's two heads
  const bf16* pool = static_cast<const bf16*>(p.pool);

  const int64_t pos = p.meta.token_pos[t];
  const SplitRange sr = split_range(p, pos, split, GB);
  const int nb = sr.nchunks;  // blocks of 64 keys

  // This warpgroup's value columns: [col0, col0 + WN), whole 64-column atoms of the key rows.
  const int col0 = 2 * WN * part + WN * wg;
  float o[WN / 2];  // O[heads r0 / r1, columns col0 + 8 j + 2c (+ 1)]: o[4 j + e]
#pragma unroll
  for (int i = 0; i < WN / 2; ++i) o[i] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // the scorer's, heads r0, r1
  // O's rows times their corrections (skipped when no row of the warp changed its max).
  const auto rescale_o = [&](float c0, float c1) {
    if (__any_sync(0xffffffffu, c0 != 1.f || c1 != 1.f)) {
#pragma unroll
      for (int j = 0; j < WN / 8; ++j) {
        o[4 * j] *= c0, o[4 * j + 1] *= c0;
        o[4 * j + 2] *= c1, o[4 * j + 3] *= c1;
      }
    }
  };
  // This warpgroup's value columns of block b's key buffer as P V's B operand (N-major).
  const auto v_desc_of = [&](int b) {
    return wgmma_desc(ks + (b & 1) * kKBytes + (col0 / 64) * (GB * 128), GB * 128, 1024);
  };

  if (wg == 1) {
    // ---- copier -----------------------------------------------------------------------------
    const int ct = tid - kCopyThreads;
    const int kr = ct >> 3, kp = ct & 7;  // key rows kr + 16 r of a block; pieces kp, kp + 8, ..
    const uint32_t k_dst = kr * 128 + ((kp ^ (kr & 7)) << 4);  // (kr + 16 r) % 8 = kr % 8
    const int32_t* topk_row = p.topk ? p.topk + t * p.topk_k : nullptr;
    const int32_t* pages_row = p.meta.page_table + p.meta.token_seq[t] * p.meta.max_pages;
    const int32_t page_size = p.meta.page_size;
    // Block bi's key positions for this thread's rows as stored (checked in pages_of).
    const auto positions = [&](int bi, int32_t(&kq)[kRounds]) {
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int64_t it = sr.it0 + static_cast<int64_t>(bi) * GB + kr + kRowsPerRound * r;
        kq[r] = it >= sr.it1 ? -1 : topk_row ? topk_row[it] : static_cast<int32_t>(it);
      }
    };
    // Their pages, -1 for a missing key (no entry, -1 padding, or past the token's position).
    const auto pages_of = [&](const int32_t(&kq)[kRounds], int32_t(&pg)[kRounds]) {
#pragma unroll
      for (int r = 0; r < kRounds; ++r)
        pg[r] = kq[r] >= 0 && kq[r] <= pos ? pages_row[kq[r] / page_size] : -1;
    };
    // Block bi's rows into buffer bi % 2 (zeros for a missing key), and its key bits: lanes
    // kp = 0 of warp wq hold keys 16 r + 4 wq + (0..3), one nibble a round.
    const auto copy_block = [&](int bi, const int32_t(&kq)[kRounds], const int32_t(&pg)[kRounds]) {
      unsigned char* dst = ks + (bi & 1) * kKBytes + k_dst;
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const bool ok = pg[r] >= 0;
        const int64_t sl = ok ? static_cast<int64_t>(pg[r]) * page_size + kq[r] % page_size : 0;
        const bf16* src = pool + sl * GL + (ok ? kp * 8 : 0);
        const int step = ok ? 64 : 0;
#pragma unroll
        for (int a = 0; a < kAtoms; ++a)
          cp_async16(dst + r * kRowsPerRound * 128 + a * (GB * 128), src + a * step, ok);
        const uint32_t bal = __ballot_sync(0xffffffffu, ok);
        if (lane == 0)
          nib_s[(bi & 1) * 16 + 4 * r + wq] = static_cast<uint8_t>(
              (bal & 1u) | ((bal >> 7) & 2u) | ((bal >> 14) & 4u) | ((bal >> 21) & 8u));
      }
    };
    // The lookups run ahead of the copies: in iteration b the pages of block b + 3 and the
    // positions of b + 4 are loaded (they land while block b is scored), and block b + 2
    // (looked up one iteration earlier) is copied. (An L2 prefetch of block b + 3's rows here,
    // one bulk prefetch per row, made the kernel 8-19% slower: measured, removed.)
    int32_t kq2[kRounds], pg2[kRounds], kq3[kRounds], pg3[kRounds], kn[kRounds];
    if (nb > 0) {
      {  // Q [64 heads, 576]: 16-byte pieces into their swizzled places
        const bf16* src = static_cast<const bf16*>(p.q) + t * p.q_s0;
        for (int i = ct; i < GH * kPieces; i += kCopyThreads) {
          const int h = i / kPieces, v = i % kPieces;
          cp_async16(qs + sw128_offset(GH, h, v), src + h * p.q_s1 + v * 8, true);
        }
      }
      positions(0, kq2);
      pages_of(kq2, pg2);
      copy_block(0, kq2, pg2);
      cp_async_commit();  // Q and block 0
      positions(1, kq2);
      pages_of(kq2, pg2);
      copy_block(1, kq2, pg2);  // all zeros past the end (nothing copied)
      cp_async_commit();
      positions(2, kq2);
      positions(3, kq3);
      pages_of(kq2, pg2);
      cp_async_wait<1>();  // this thread's Q and block 0 copies have landed
      fence_proxy_async_smem();
      bar_arrive(kBarKeys);
    }
    const uint64_t p_desc = wgmma_desc(ps, 16, 1024);
    for (int b = 0; b < nb; ++b) {
      pages_of(kq3, pg3);
      positions(b + 4, kn);
      bar_sync(kBarP);
      if (*skip_s == 0) {
        rescale_o(corr_s[r0], corr_s[r1]);
        const uint64_t v_desc = v_desc_of(b);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < GB / 16; ++kk)
          wgmma_ss_tn<WN>(o, wgmma_desc_add(p_desc, 2 * kk), wgmma_desc_add(v_desc, 128 * kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(o);
      }
      if (b + 1 < nb) bar_arrive(kBarPFree);
      // Both warpgroups' P V of block b are done with its buffer. (Waited for before block
      // b + 1 is published: the scorer's next arrival at vfree must find this wait done.)
      if (b + 2 < nb) bar_sync(kBarVFree);
      if (b + 1 < nb) {
        cp_async_wait<0>();  // block b + 1's copies have landed
        fence_proxy_async_smem();
        bar_arrive(kBarKeys);
      }
      if (b + 2 < nb) copy_block(b + 2, kq2, pg2);
      cp_async_commit();  // possibly empty
#pragma unroll
      for (int r = 0; r < kRounds; ++r) kq2[r] = kq3[r], pg2[r] = pg3[r], kq3[r] = kn[r];
    }
  } else {
    // ---- scorer -----------------------------------------------------------------------------
    const float scale2 = p.scale * 1.4426950408889634f;  // scores in log2 units
    const uint64_t q_desc = wgmma_desc(qs, 16, 1024);
    // Key 8 j + 2c + e's bit in the nibble words: word j / 2, bit 16 (j % 2) + cs + e.
    const int cs = 8 * (c >> 1) + 2 * (c & 1);
    for (int b = 0; b < nb; ++b) {
      bar_sync(kBarKeys);
      const uint4 nibs = *reinterpret_cast<const uint4*>(nib_s + (b & 1) * 16);
      const bool skip = (nibs.x | nibs.y | nibs.z | nibs.w) == 0u;  // block-uniform
      float sacc[32];  // sacc[4 j + e]: key 8 j + 2c + (e & 1), head r0 (e < 2) or r1
      float corr[2] = {1.f, 1.f};
      uint32_t pa[4][4];  // P of keys [16 kk, 16 kk + 16): rows r0, r1 x keys 2c, 2c + 8 (+ 1)
      if (!skip) {
        const uint64_t k_desc = wgmma_desc(ks + (b & 1) * kKBytes, 16, 1024);
        wgmma_kmajor64_product<GL / 16>(sacc, q_desc, k_desc);
        const uint32_t nw[4] = {nibs.x, nibs.y, nibs.z, nibs.w};
        float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < GB / 8; ++j) {
          const uint32_t bits = nw[j >> 1] >> (16 * (j & 1) + cs);
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            float& x = sacc[4 * j + e];
            x = (bits >> (e & 1)) & 1u ? x * scale2 : -INFINITY;
            mloc[e >> 1] = fmaxf(mloc[e >> 1], x);
          }
        }
        online_softmax_chunk(*reinterpret_cast<float(*)[GB / 8][4]>(&sacc), mloc, m_run, l_run,
                             corr);
#pragma unroll
        for (int kk = 0; kk < GB / 16; ++kk) {
          pa[kk][0] = pack_bf16(sacc[8 * kk], sacc[8 * kk + 1]);
          pa[kk][1] = pack_bf16(sacc[8 * kk + 2], sacc[8 * kk + 3]);
          pa[kk][2] = pack_bf16(sacc[8 * kk + 4], sacc[8 * kk + 5]);
          pa[kk][3] = pack_bf16(sacc[8 * kk + 6], sacc[8 * kk + 7]);
        }
      }
      if (b > 0) bar_sync(kBarPFree);  // the copier's P V of block b - 1 has read the P tile
      if (!skip) {
        // P tile: keys 8 j .. 8 j + 7 of a row are its 16-byte piece j (swizzled by row % 8 = g).
#pragma unroll
        for (int j = 0; j < GB / 8; ++j) {
          const uint32_t off = ((j ^ g) << 4) + 4 * c;
          *reinterpret_cast<uint32_t*>(ps + r0 * 128 + off) = pa[j >> 1][2 * (j & 1)];
          *reinterpret_cast<uint32_t*>(ps + r1 * 128 + off) = pa[j >> 1][2 * (j & 1) + 1];
        }
      }
      if (c == 0) corr_s[r0] = corr[0], corr_s[r1] = corr[1];
      if (tid == 0) *skip_s = skip ? 1 : 0;
      fence_proxy_async_smem();
      bar_arrive(kBarP);
      if (!skip) {
        rescale_o(corr[0], corr[1]);
        const uint64_t v_desc = v_desc_of(b);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < GB / 16; ++kk)
          wgmma_rs_tn<WN>(o, pa[kk], wgmma_desc_add(v_desc, 128 * kk), 1);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_fence_operands(o);
#pragma unroll
        for (int kk = 0; kk < GB / 16; ++kk) wgmma_fence_operands(pa[kk]);
      }
      if (b + 2 < nb) bar_arrive(kBarVFree);
    }
    if (c == 0) lsum_s[r0] = l_run[0], lsum_s[r1] = l_run[1];
  }
  cp_async_wait<0>();  // nothing in flight at exit (the copier's empty groups)
  __syncthreads();     // the row sums

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r ? r1 : r0;
    const float l = lsum_s[h];
    const int64_t th = static_cast<int64_t>(t) * GH + h;
    const float inv = l > 0.f ? 1.0f / l : 0.f;
#pragma unroll
    for (int j = 0; j < WN / 8; ++j) {
      const int col = col0 + 8 * j + 2 * c;
      const float o0 = o[4 * j + 2 * r] * inv, o1 = o[4 * j + 2 * r + 1] * inv;
      if (p.num_splits == 1)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * GLC + col) =
            __floats2bfloat162_rn(o0, o1);
      else if (l > 0.f)  // the merge skips a split without keys (lse -inf) unread
        *reinterpret_cast<float2*>(p.part_o + (th * p.num_splits + split) * GLC + col) =
            make_float2(o0, o1);
    }
    if (p.num_splits > 1 && part == 0 && wg == 0 && c == 0)  // natural log, as the merge reads it
      p.part_lse[th * p.num_splits + split] =
          l > 0.f ? m_run[r] * 0.6931471805599453f + logf(l) : -INFINITY;
  }
}

}  // namespace

bool mla_decode_wgmma_applies(int64_t H, int64_t L, int64_t Lc, bool kv_fp8) {
  return H == GH && Lc == GLC && L == GL && !kv_fp8;
}

namespace {
template <int NP>
void launch_parts(const MlaDecodeParams& p, cudaStream_t s) {
  const dim3 g(static_cast<unsigned>(p.T), static_cast<unsigned>(p.num_splits), NP);
  opt_in_smem<mla_decode_wgmma_kernel<NP>>(kGSmem);
  launch(mla_decode_wgmma_kernel<NP>, g, kGThreads, kGSmem, s, p);
}
}  // namespace

void mla_decode_wgmma(const MlaDecodeParams& p, cudaStream_t s) {
  if (p.column_parts == 4)
    launch_parts<4>(p, s);
  else if (p.column_parts == 2)
    launch_parts<2>(p, s);
  else
    launch_parts<1>(p, s);
}

}  // namespace tandem::cuda::k
