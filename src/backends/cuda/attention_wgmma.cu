// mla_decode with all 64 heads of a query token in one block, on Hopper's warpgroup MMA. The
// mma.sync kernel (attention_wide.cu) is bound by shared memory: every warp loads its own copy
// of each operand fragment, so a 32-key chunk costs ~350 KB of ldmatrix traffic. wgmma reads its
// shared-memory operands once per warpgroup and multiplies 64 rows at a time, and the B operand
// of P V is the key tile itself, read N-major (no transpose copy).
//
// Two warpgroups, 32 keys per chunk, three key buffers. Warpgroup w (warps 4w .. 4w + 3):
//   S   partial scores of all 64 heads x all 32 keys over half of the 576 dims (wgmma
//       m64n32k16, 18 k-steps: atoms 4w .. 4w + 3 and half of atom 8; Q and the key rows both
//       K-major in shared memory). A thread of either warpgroup holds the same (head, key)
//       elements, so the halves meet through shared memory thread to thread, and both
//       warpgroups add them (own + other: commutative, so both hold identical scores) and run
//       the same softmax, keeping identical running max and sum (no max or sum exchange);
//   P V O[64 heads, columns [256 w, 256 w + 256)] += P[64, 32 keys] V[32 keys, ...] (wgmma
//       m64n256k16, P straight from the score registers, V = the first 512 dims of the same
//       key rows, read N-major). It is left running into the next chunk: the next wait is the
//       one after the next chunk's scores.
// Every output depends on its own token's query, keys and split only: batch-invariant.
//
// Column parts (NP = 1, 2, 4; grid z): a block may own only 512 / NP of the value columns, each
// warpgroup 256 / NP of them (P V on m64n{256,128,64}k16). Every part computes the same scores
// and softmax (the same code on the same data: the same bits), so a column's output does not
// depend on NP. With few query tokens (a batch-1 decode has one token and 2,048 / split keys, so
// four blocks for 132 SMs) the parts put more SMs to work without shortening the splits, whose
// length fixes the reduction order that deterministic mode keeps for every batch size.
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

constexpr int GH = 64;                     // heads per block (the M of every wgmma)
constexpr int GK = 32;                     // keys per chunk
constexpr int GLC = 512;                   // latent (value) columns
constexpr int GL = 576;                    // latent + rope dims of a key row
constexpr int GNB = 3;                     // key buffers
constexpr int kPieces = GL / 8;            // 16-byte pieces of a row (72)
constexpr int kQBytes = GL * 2 * GH;       // 73,728
constexpr int kKBytes = GL * 2 * GK;       // 36,864 per buffer
constexpr int kXBytes = 2 * 128 * 16 * 4;  // partial scores, [warpgroup][16 floats][128 threads]
constexpr int kGThreads = 256;
static_assert(GK == MlaSlotTable::kChunk && kGThreads == MlaSlotTable::kThreads);

constexpr size_t kGSmem = 1024                         // alignment slack for the atoms
                          + kQBytes + GNB * kKBytes    // Q, key buffers (swizzled bf16)
                          + kXBytes                    // partial-score exchange
                          + MlaSlotTable::kSmemBytes;  // slot tables

// Named barrier 1 of both warpgroups (0 is __syncthreads).
__device__ __forceinline__ void block_bar1() {
  asm volatile("bar.sync 1, 256;\n" ::: "memory");
}

// k-step s of a warpgroup's first 16 (atoms 4w .. 4w + 3) as a descriptor offset in 16-byte
// units for a tile of `rows` rows: atom s / 4, byte 32 (s % 4) of its 128-byte rows.
constexpr uint32_t kstep_off(int s, int rows) {
  return static_cast<uint32_t>(((s >> 2) * rows * 128 + (s & 3) * 32) >> 4);
}

// grid (T, num_splits, NP), 256 threads. Per chunk i (a block-uniform loop):
//   X  (this thread's copies of chunk i landed and were fenced) chunk i visible: S issued; the
//      wait covers it and the previous chunk's P V
//   E  partial scores exchanged; every warpgroup's P V of chunk i - 1 is done, so its buffer
//      takes chunk i + 2's copies; softmax; O rescaled; P V issued
template <int NP>
__global__ void __launch_bounds__(kGThreads, 1) mla_decode_wgmma_kernel(MlaDecodeParams p) {
  constexpr int WN = 256 / NP;  // value columns per warpgroup
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem =
      smem_raw +
      ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) & 1023)) & 1023);
  unsigned char* qs = smem;                                    // Q, swizzled
  unsigned char* ks = qs + kQBytes;                            // [GNB] key buffers, swizzled
  float4* xs = reinterpret_cast<float4*>(ks + GNB * kKBytes);  // [2][4][128] partial scores
  unsigned char* tables = ks + GNB * kKBytes + kXBytes;        // MlaSlotTable's

  const int t = blockIdx.x, split = blockIdx.y, part = blockIdx.z;
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
  MlaSlotTable slots(p, tables, t, pos, sr.it0, sr.it1);

  // Chunk ci's rows into buffer ci % GNB: 8 threads per row (kr), thread kp its pieces kp,
  // kp + 8, .. (one per 128-byte atom, all at the same swizzled place of their atom's row);
  // zeros for a missing key.
  const int kr = tid >> 3, kp = tid & 7;
  const uint32_t k_dst = kr * 128 + ((kp ^ (kr & 7)) << 4);
  const auto copy_keys = [&](int ci) {
    const int32_t sl = slots.slot(ci, kr);
    unsigned char* dst = ks + (ci % GNB) * kKBytes + k_dst;
    const bf16* src = sl >= 0 ? pool + static_cast<int64_t>(sl) * GL + kp * 8 : pool;
    const int step = sl >= 0 ? 64 : 0;
#pragma unroll
    for (int a = 0; a < kPieces / 8; ++a) cp_async16(dst + a * (GK * 128), src + a * step, sl >= 0);
  };

  if (nchunks > 0) {
    slots.fill_first();
    __syncthreads();
    for (int ci = 0; ci < GNB - 1; ++ci) {  // one commit group per chunk, empty past the end
      if (ci < nchunks) copy_keys(ci);
      cp_async_commit();
    }
  }

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // heads r0, r1
  // This warpgroup's value columns: [col0, col0 + WN), whole 64-column atoms of the key rows.
  const int col0 = 2 * WN * part + WN * wg;
  float o[WN / 2];  // O[heads 16 wq + g (+ 8), columns col0 + 8 j + 2c (+ 1)]: o[4 j + e]
#pragma unroll
  for (int i = 0; i < WN / 2; ++i) o[i] = 0.f;
  uint32_t pa[2][4] = {};  // P of keys [0, 16) and [16, 32): read by a P V still in flight
  // This thread's slot of the exchange and the other warpgroup's thread with the same elements.
  float4* x_mine = xs + wg * 512 + wq * 32 + lane;
  const float4* x_other = xs + (wg ^ 1) * 512 + wq * 32 + lane;
  // The warpgroup's two k-step ranges of Q: atoms 4 wg .. 4 wg + 3, and bytes [64 wg, 64 wg +
  // 64) of atom 8's rows.
  const uint64_t q_desc0 = wgmma_desc(qs + 4 * wg * (GH * 128), 16, 1024);
  const uint64_t q_desc1 = wgmma_desc(qs + 8 * (GH * 128) + 64 * wg, 16, 1024);

  for (int i = 0; i < nchunks; ++i) {
    cp_async_wait<GNB - 2>();  // this thread's copies of chunk i have landed
    fence_proxy_async_smem();  // ... and are visible to wgmma
    __syncthreads();           // X
    slots.before_math(i, nchunks);
    unsigned char* kt = ks + (i % GNB) * kKBytes;
    const uint32_t bits = slots.bits(i);
    if (bits == 0) {    // block-uniform; a chunk without a key changes nothing
      wgmma_wait<0>();  // the previous P V has read its buffer (refilled below) and its P
      wgmma_fence_operands(o);
      __syncthreads();
      if (i + GNB - 1 < nchunks) copy_keys(i + GNB - 1);
      cp_async_commit();
      slots.after_math(i, nchunks);
      continue;
    }
    float sacc[16];  // sacc[4 j + e]: key 8 j + 2c + (e & 1), head r0 (e < 2) or r1
    {
      const uint64_t k_desc0 = wgmma_desc(kt + 4 * wg * (GK * 128), 16, 1024);
      const uint64_t k_desc1 = wgmma_desc(kt + 8 * (GK * 128) + 64 * wg, 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int s = 0; s < 16; ++s)
        wgmma_m64n32k16_ss(sacc, wgmma_desc_add(q_desc0, kstep_off(s, GH)),
                           wgmma_desc_add(k_desc0, kstep_off(s, GK)), s > 0);
#pragma unroll
      for (int s = 0; s < 2; ++s)
        wgmma_m64n32k16_ss(sacc, wgmma_desc_add(q_desc1, 2 * s), wgmma_desc_add(k_desc1, 2 * s), 1);
      wgmma_commit();
    }
    wgmma_wait<0>();  // these scores, and the previous chunk's P V
    wgmma_fence_operands(sacc);
    wgmma_fence_operands(o);
    wgmma_fence_operands(pa[0]);  // the previous P V's A operand: free from here
    wgmma_fence_operands(pa[1]);
#pragma unroll
    for (int v = 0; v < 4; ++v)
      x_mine[128 * v] = make_float4(sacc[4 * v], sacc[4 * v + 1], sacc[4 * v + 2], sacc[4 * v + 3]);
    block_bar1();  // E
    // Every warpgroup's P V of chunk i - 1 has finished (each waited above): its buffer is free.
    if (i + GNB - 1 < nchunks) copy_keys(i + GNB - 1);
    cp_async_commit();  // possibly empty
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float4 x = x_other[128 * v];
      sacc[4 * v] += x.x, sacc[4 * v + 1] += x.y, sacc[4 * v + 2] += x.z, sacc[4 * v + 3] += x.w;
    }
    float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool valid = (bits >> (8 * j + 2 * c + (e & 1))) & 1u;
        float& x = sacc[4 * j + e];
        x = valid ? x * scale2 : -INFINITY;
        mloc[e >> 1] = fmaxf(mloc[e >> 1], x);
      }
    float corr[2];  // 2^(old max - new max) per row
    online_softmax_chunk(*reinterpret_cast<float(*)[4][4]>(&sacc), mloc, m_run, l_run, corr);
    slots.after_math(i, nchunks);
    if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) {
#pragma unroll
      for (int j = 0; j < WN / 8; ++j) {
        o[4 * j] *= corr[0], o[4 * j + 1] *= corr[0];
        o[4 * j + 2] *= corr[1], o[4 * j + 3] *= corr[1];
      }
    }
    // The A fragments of keys [16 kk, 16 kk + 16): rows g, g + 8 x keys 2c, 2c + 8 (+ 1).
#pragma unroll
    for (int kk = 0; kk < 2; ++kk) {
      pa[kk][0] = pack_bf16(sacc[8 * kk], sacc[8 * kk + 1]);
      pa[kk][1] = pack_bf16(sacc[8 * kk + 2], sacc[8 * kk + 3]);
      pa[kk][2] = pack_bf16(sacc[8 * kk + 4], sacc[8 * kk + 5]);
      pa[kk][3] = pack_bf16(sacc[8 * kk + 6], sacc[8 * kk + 7]);
    }
    // P V: the value columns [col0, col0 + WN) are atoms col0 / 64 .. of the key rows; keys
    // [16, 32) start 2048 bytes in.
    const uint64_t v_desc = wgmma_desc(kt + (col0 / 64) * (GK * 128), GK * 128, 1024);
    wgmma_fence();
    wgmma_rs_tn<WN>(o, pa[0], v_desc, 1);
    wgmma_rs_tn<WN>(o, pa[1], wgmma_desc_add(v_desc, 2048 >> 4), 1);
    wgmma_commit();
  }
  wgmma_wait<0>();
  wgmma_fence_operands(o);
  cp_async_wait<0>();  // nothing in flight at exit (an empty split's q copies)

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r ? r1 : r0;
    const float l = l_run[r];
    const int64_t th = static_cast<int64_t>(t) * GH + h;
    const float inv = l > 0.f ? 1.0f / l : 0.f;
#pragma unroll
    for (int j = 0; j < WN / 8; ++j) {
      const int col = col0 + 8 * j + 2 * c;
      const float o0 = o[4 * j + 2 * r] * inv, o1 = o[4 * j + 2 * r + 1] * inv;
      if (p.num_splits == 1)
        *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * GLC + col) =
            __floats2bfloat162_rn(o0, o1);
      else
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
