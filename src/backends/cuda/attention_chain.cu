// mla_decode for few query tokens as a chain of three kernels that gives, bit for bit, what the
// one-block wgmma kernel (attention_wgmma.cu, one split) gives, while spreading a token's keys
// over many SMs.
//
// Why: the one-block kernel's order of operations fixes its output bits. For each 64-key block b
// of a token, in order, it computes S_b = Q K_b^T (all 64 heads), the online softmax (running
// max m, running sum l, correction c_b = 2^(m_old - m_new)), and O = O c_b + P_b V_b. That order
// does not depend on the batch, so a token decoded alone and the same token among the S + 1 of a
// speculative verify get the same bits: greedy speculation is lossless. But with one block per
// token a batch-1 decode keeps one SM busy for 2,048 keys (26 us of mostly waiting), and the
// split-and-merge kernels that are fast there sum in another order.
//
// The chain computes the same quantities with the same instructions, in parallel where the order
// allows it:
//   scores        grid (T, blocks / NB): S_b and its row maxima, exactly as the one-block
//                 kernel's scorer (36 m64n64k16 over the 576 dims, the key mask, the log2 scale);
//   probabilities grid (T, blocks): the running max before block b is the max of the maxima of
//                 the blocks before it (max is exact in any order), so P_b, c_b and the row sums
//                 of P_b follow per block from the same online-softmax code;
//   values        grid (T, 512 / NC): NC = 64, 32 or 16 of the value columns per block
//                 (TANDEM_MLA_CHAIN_VALUE_COLS), in block order: O = O c_b + P_b V_b (four
//                 m64nNCk16, P from shared memory) and l = l c_b + sum_b.
// A column's wgmma arithmetic depends neither on N nor on whether A comes from registers or
// shared memory (MlaDecodeColumnPartsGiveTheSameBits), so every output bit equals the one-block
// kernel's (MlaDecodeChainGivesTheOneBlockBits).
//
// Scratch (per token t and block b, n = T x blocks of them; ChainScratch below): S_b as the
// scorer's fragments (16 KB f32), P_b as the swizzled bf16 tile the values kernel copies as it is
// (8 KB), c_b and sum_b per head (512 B), the row maxima (256 B), the key slots (256 B) and
// whether the block has a key at all (blocks without one are skipped, as the one-block kernel
// skips them).
#include <cfloat>

#include "backends/cuda/mma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int CH = 64;                   // heads (the M of every wgmma)
constexpr int CB = 64;                   // keys per block
constexpr int CLC = 512;                 // latent (value) columns
constexpr int CL = 576;                  // latent + rope dims of a key row
constexpr int kCPieces = CL / 8;         // 16-byte pieces of a row (72)
constexpr int kCAtoms = CL / 64;         // 128-byte column atoms of a row (9)
constexpr int kTileBytes = CL * 2 * CB;  // 73,728: Q or one key block, swizzled bf16
constexpr int kPTile = CH * CB * 2;      // 8,192: P [64 heads][64 keys] bf16, swizzled
constexpr int kWG = 128;                 // threads of a warpgroup
constexpr int kRing = 6;                 // value kernel stages

struct ChainScratch {
  float4* s;         // [n][8][128 threads]: S_b fragments, float4 i of thread x at [i][x]
  unsigned char* p;  // [n][8192]: P_b tiles
  float* cs;         // [n][2][64]: c_b, then sum_b, per head
  float* m;          // [n][64]: row maxima of S_b (-inf: no key)
  int32_t* slot;     // [n][64]: pool row of each key, -1 for none
  int32_t* has_key;  // [n]: 0 for a block without a key
};
__host__ __device__ inline ChainScratch chain_scratch(void* base, int64_t n) {
  ChainScratch c;
  auto* b = static_cast<unsigned char*>(base);
  c.s = reinterpret_cast<float4*>(b);
  b += n * 16384;
  c.p = b;
  b += n * kPTile;
  c.cs = reinterpret_cast<float*>(b);
  b += n * 512;
  c.m = reinterpret_cast<float*>(b);
  b += n * 256;
  c.slot = reinterpret_cast<int32_t*>(b);
  b += n * 256;
  c.has_key = reinterpret_cast<int32_t*>(b);
  return c;
}
static_assert(kMlaChainBytesPerBlock == 16384 + kPTile + 512 + 256 + 256 + 4);

__device__ __forceinline__ unsigned char* align1024(unsigned char* raw) {
  return raw + ((1024 - (static_cast<uint32_t>(__cvta_generic_to_shared(raw)) & 1023)) & 1023);
}

// The key range of token t (one split: the whole top-k row, or positions 0 .. pos).
__device__ __forceinline__ int64_t chain_range(const MlaDecodeParams& p, int64_t pos) {
  return p.topk ? p.topk_k : pos + 1;
}

// ---- scores ---------------------------------------------------------------------------------
// grid (T, ceil(blocks / NB)), NB warpgroups: warpgroup w scores block NB y + w. All threads
// copy Q; each warpgroup copies its block's rows as the one-block kernel's copier does (8
// threads a row, 16 rows a round) and records each key's slot and presence.
template <int NB>
__global__ void __launch_bounds__(kWG* NB, 1) mla_chain_scores_kernel(MlaDecodeParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* qs = align1024(smem_raw);                                       // Q, swizzled
  unsigned char* ks = qs + kTileBytes;                                           // [NB] key blocks
  unsigned int* bits_s = reinterpret_cast<unsigned int*>(ks + NB * kTileBytes);  // [NB][2]

  const int t = blockIdx.x, tid = threadIdx.x, wg = tid / kWG, wt = tid % kWG;
  const int lane = tid & 31, wq = (tid >> 5) & 3, g = lane >> 2, c = lane & 3;
  const int nbm = static_cast<int>(p.chain_blocks);
  const int b = blockIdx.y * NB + wg;
  const int64_t pos = p.meta.token_pos[t];
  const int64_t range = chain_range(p, pos);
  const ChainScratch cs = chain_scratch(p.chain, p.T * p.chain_blocks);
  const int64_t idx = static_cast<int64_t>(t) * nbm + b;
  const bf16* pool = static_cast<const bf16*>(p.pool);

  if (tid < 2 * NB) bits_s[tid] = 0u;
  __syncthreads();
  {  // Q [64 heads, 576]
    const bf16* src = static_cast<const bf16*>(p.q) + t * p.q_s0;
    for (int i = tid; i < CH * kCPieces; i += kWG * NB) {
      const int h = i / kCPieces, v = i % kCPieces;
      cp_async16(qs + sw128_offset(CH, h, v), src + h * p.q_s1 + v * 8, true);
    }
  }
  if (b < nbm) {
    const int kr = wt >> 3, kp = wt & 7;
    const int32_t* topk_row = p.topk ? p.topk + t * p.topk_k : nullptr;
    const int32_t* pages_row = p.meta.page_table + p.meta.token_seq[t] * p.meta.max_pages;
    const int32_t page_size = p.meta.page_size;
    unsigned char* dst = ks + wg * kTileBytes + kr * 128 + ((kp ^ (kr & 7)) << 4);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int key = kr + 16 * r;
      const int64_t it = static_cast<int64_t>(b) * CB + key;
      const int32_t kq = it >= range ? -1 : topk_row ? topk_row[it] : static_cast<int32_t>(it);
      const int32_t pg = kq >= 0 && kq <= pos ? pages_row[kq / page_size] : -1;
      const bool ok = pg >= 0;
      const int64_t sl = ok ? static_cast<int64_t>(pg) * page_size + kq % page_size : 0;
      const bf16* src = pool + sl * CL + (ok ? kp * 8 : 0);
      const int step = ok ? 64 : 0;
#pragma unroll
      for (int a = 0; a < kCAtoms; ++a)
        cp_async16(dst + r * 16 * 128 + a * (CB * 128), src + a * step, ok);
      if (kp == 0) {
        cs.slot[idx * CB + key] = ok ? static_cast<int32_t>(sl) : -1;
        if (ok) atomicOr(&bits_s[2 * wg + (key >> 5)], 1u << (key & 31));
      }
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  fence_proxy_async_smem();
  __syncthreads();
  if (b >= nbm) return;

  const uint32_t lo = bits_s[2 * wg], hi = bits_s[2 * wg + 1];
  if (wt == 0) cs.has_key[idx] = (lo | hi) != 0u;
  const float scale2 = p.scale * 1.4426950408889634f;  // scores in log2 units
  float sacc[32];  // sacc[4 j + e]: key 8 j + 2c + (e & 1), head r0 (e < 2) or r1
  const uint64_t q_desc = wgmma_desc(qs, 16, 1024);
  const uint64_t k_desc = wgmma_desc(ks + wg * kTileBytes, 16, 1024);
  wgmma_kmajor64_product<CL / 16>(sacc, q_desc, k_desc);
  float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < CB / 8; ++j) {
    const uint32_t word = j < 4 ? lo : hi;
    const int k0 = (8 * j + 2 * c) & 31;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float& x = sacc[4 * j + e];
      x = (word >> (k0 + (e & 1))) & 1u ? x * scale2 : -INFINITY;
      mloc[e >> 1] = fmaxf(mloc[e >> 1], x);
    }
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
    cs.s[(idx * 8 + i) * kWG + wt] =
        make_float4(sacc[4 * i], sacc[4 * i + 1], sacc[4 * i + 2], sacc[4 * i + 3]);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 1));
    mloc[r] = fmaxf(mloc[r], __shfl_xor_sync(0xffffffffu, mloc[r], 2));
  }
  if (c == 0) {
    const int r0 = 16 * wq + g;
    cs.m[idx * CH + r0] = mloc[0];
    cs.m[idx * CH + r0 + 8] = mloc[1];
  }
}

// ---- probabilities --------------------------------------------------------------------------
// grid (T, blocks), one warpgroup in the scorer's fragment layout.
__global__ void __launch_bounds__(kWG) mla_chain_probs_kernel(MlaDecodeParams p) {
  pdl_wait();
  const int t = blockIdx.x, b = blockIdx.y, tid = threadIdx.x;
  const int lane = tid & 31, wq = tid >> 5, g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g, r1 = r0 + 8;
  const int nbm = static_cast<int>(p.chain_blocks);
  const ChainScratch cs = chain_scratch(p.chain, p.T * p.chain_blocks);
  const int64_t base = static_cast<int64_t>(t) * nbm, idx = base + b;
  if (!cs.has_key[idx]) return;
  // The running max before block b: the one-block kernel's m_run after its blocks 0 .. b - 1
  // (a block without a key left it as it was; its maxima are -inf here).
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, corr[2];
  for (int k = 0; k < b; ++k) {
    m_run[0] = fmaxf(m_run[0], cs.m[(base + k) * CH + r0]);
    m_run[1] = fmaxf(m_run[1], cs.m[(base + k) * CH + r1]);
  }
  float sacc[32];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 v = cs.s[(idx * 8 + i) * kWG + tid];
    sacc[4 * i] = v.x, sacc[4 * i + 1] = v.y, sacc[4 * i + 2] = v.z, sacc[4 * i + 3] = v.w;
  }
  float mloc[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int i = 0; i < 32; ++i) mloc[(i >> 1) & 1] = fmaxf(mloc[(i >> 1) & 1], sacc[i]);
  // With l_run = 0 the sum comes out as this block's row sum: 0 c + sum = sum exactly.
  online_softmax_chunk(*reinterpret_cast<float(*)[CB / 8][4]>(&sacc), mloc, m_run, l_run, corr);
  unsigned char* pt = cs.p + idx * kPTile;
#pragma unroll
  for (int j = 0; j < CB / 8; ++j) {  // key piece j of rows r0, r1 (swizzled by row % 8 = g)
    const uint32_t off = ((j ^ g) << 4) + 4 * c;
    *reinterpret_cast<uint32_t*>(pt + r0 * 128 + off) = pack_bf16(sacc[4 * j], sacc[4 * j + 1]);
    *reinterpret_cast<uint32_t*>(pt + r1 * 128 + off) = pack_bf16(sacc[4 * j + 2], sacc[4 * j + 3]);
  }
  if (c == 0) {
    float* row = cs.cs + idx * 2 * CH;
    row[r0] = corr[0], row[r1] = corr[1];
    row[CH + r0] = l_run[0], row[CH + r1] = l_run[1];
  }
}

// ---- values ---------------------------------------------------------------------------------
// grid (T, 512 / NC), one warpgroup: value columns [NC part, NC part + NC) over the blocks in
// order, through a ring of kRing stages of (P_b, V_b's NC columns, c_b and sum_b). NC = 64 (eight
// blocks a token), 32 or 16 (16 or 32 blocks: a batch-1 token's values on more SMs; every block
// still reads all of each P_b, 8 KB, mostly from L2). A column's arithmetic does not depend on N
// (MlaDecodeChainGivesTheOneBlockBits runs every NC).
template <int NC>
__global__ void __launch_bounds__(kWG) mla_chain_values_kernel(MlaDecodeParams p) {
  constexpr int kVBytes = CB * NC * 2;              // one stage's value rows: 64 keys x NC columns
  constexpr int kRowPieces = NC / 8;                // 16-byte pieces of a key's NC columns
  constexpr int kPiecesPerThread = kRowPieces / 2;  // two threads a key
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* ps = align1024(smem_raw);                            // [kRing] P tiles
  unsigned char* vs = ps + kRing * kPTile;                            // [kRing] value columns
  float* css = reinterpret_cast<float*>(vs + kRing * kVBytes);        // [kRing][2][64]
  int32_t* slots = reinterpret_cast<int32_t*>(css + kRing * 2 * CH);  // [blocks][64]
  int32_t* has = slots + p.chain_blocks * CB;                         // [blocks]

  const int t = blockIdx.x, part = blockIdx.y, tid = threadIdx.x;
  const int lane = tid & 31, wq = tid >> 5, g = lane >> 2, c = lane & 3;
  const int r0 = 16 * wq + g, r1 = r0 + 8;
  const int nbm = static_cast<int>(p.chain_blocks);
  const ChainScratch cs = chain_scratch(p.chain, p.T * p.chain_blocks);
  const int64_t base = static_cast<int64_t>(t) * nbm;
  const int64_t range = chain_range(p, p.meta.token_pos[t]);
  const int nb = static_cast<int>((range + CB - 1) / CB);  // this token's blocks (<= nbm)
  const bf16* pool = static_cast<const bf16*>(p.pool);

  // The token's slot table and key flags, in one round trip.
  for (int i = tid; i < nb * CB / 4; i += kWG)
    cp_async16(slots + 4 * i, cs.slot + base * CB + 4 * i, true);
  for (int i = tid; i < nb; i += kWG) has[i] = cs.has_key[base + i];
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // Block bi into stage bi % kRing (nothing for a block without a key: it is skipped).
  const int kr = tid >> 1, kp0 = (tid & 1) * kPiecesPerThread;  // key kr, its pieces from kp0
  const auto issue = [&](int bi) {
    if (bi < nb && has[bi]) {
      const int st = bi % kRing;
      const unsigned char* src_p = cs.p + (base + bi) * kPTile;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int piece = tid + kWG * k;
        cp_async16(ps + st * kPTile + piece * 16, src_p + piece * 16, true);
      }
      const int32_t sl = slots[bi * CB + kr];
      const bool ok = sl >= 0;
      const bf16* src_v = pool + (ok ? static_cast<int64_t>(sl) * CL + NC * part : 0);
#pragma unroll
      for (int k = 0; k < kPiecesPerThread; ++k) {
        const int piece = kp0 + k;
        cp_async16(vs + st * kVBytes + kr * (NC * 2) + (nmajor_piece<NC>(kr, piece) << 4),
                   src_v + (ok ? piece * 8 : 0), ok);
      }
      if (tid < 32)
        cp_async16(css + st * 2 * CH + 4 * tid, cs.cs + (base + bi) * 2 * CH + 4 * tid, true);
    }
    cp_async_commit();
  };

  float o[NC / 2];  // O[heads r0 / r1, columns NC part + 8 j + 2c (+ 1)]: o[4 j + e]
#pragma unroll
  for (int i = 0; i < NC / 2; ++i) o[i] = 0.f;
  float l_run[2] = {0.f, 0.f};
  for (int bi = 0; bi < kRing - 1; ++bi) issue(bi);
  for (int b = 0; b < nb; ++b) {
    cp_async_wait<kRing - 2>();  // block b's stage has landed (this thread's copies)
    fence_proxy_async_smem();
    __syncthreads();  // everyone's copies; and every thread is past block b - 1's products
    if (has[b]) {
      const int st = b % kRing;
      const float* cb = css + st * 2 * CH;
      const float c0 = cb[r0], c1 = cb[r1];
      l_run[0] = __fmaf_rn(l_run[0], c0, cb[CH + r0]);
      l_run[1] = __fmaf_rn(l_run[1], c1, cb[CH + r1]);
#pragma unroll
      for (int j = 0; j < NC / 8; ++j) {
        o[4 * j] *= c0, o[4 * j + 1] *= c0;
        o[4 * j + 2] *= c1, o[4 * j + 3] *= c1;
      }
      const uint64_t p_desc = wgmma_desc(ps + st * kPTile, 16, 1024);
      const uint64_t v_desc = wgmma_desc_nmajor<NC>(vs + st * kVBytes, kVBytes);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < CB / 16; ++kk)  // 16 key rows of V a k-step: NC * 2 * 16 bytes
        wgmma_ss_tn<NC>(o, wgmma_desc_add(p_desc, 2 * kk), wgmma_desc_add(v_desc, 2 * NC * kk), 1);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(o);
    }
    issue(b + kRing - 1);  // into the stage of block b - 1, which every thread is done with
  }
  cp_async_wait<0>();

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int h = r ? r1 : r0;
    const float l = l_run[r];
    const int64_t th = static_cast<int64_t>(t) * CH + h;
    const float inv = l > 0.f ? 1.0f / l : 0.f;
#pragma unroll
    for (int j = 0; j < NC / 8; ++j) {
      const int col = NC * part + 8 * j + 2 * c;
      *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * CLC + col) =
          __floats2bfloat162_rn(o[4 * j + 2 * r] * inv, o[4 * j + 2 * r + 1] * inv);
    }
  }
}

constexpr size_t scores_smem(int nb) {
  return 1024 + kTileBytes * (1 + nb) + 16 * nb;
}
size_t values_smem(int nc, int64_t blocks) {
  return 1024 + kRing * (kPTile + CB * nc * 2 + 2 * CH * 4) +
         static_cast<size_t>(blocks) * (CB + 1) * 4;
}
template <int NC>
void launch_values(const MlaDecodeParams& p, cudaStream_t s) {
  const size_t smem = values_smem(NC, p.chain_blocks);
  opt_in_smem<mla_chain_values_kernel<NC>>(smem);
  launch(mla_chain_values_kernel<NC>, dim3(static_cast<unsigned>(p.T), CLC / NC), kWG, smem, s, p);
}

}  // namespace

void mla_decode_chain(const MlaDecodeParams& p, cudaStream_t s) {
  const unsigned T = static_cast<unsigned>(p.T);
  const int64_t nbm = p.chain_blocks;
  if (p.scores_per_block == 2) {
    opt_in_smem<mla_chain_scores_kernel<2>>(scores_smem(2));
    launch(mla_chain_scores_kernel<2>, dim3(T, cdiv(nbm, 2)), 2 * kWG, scores_smem(2), s, p);
  } else {
    opt_in_smem<mla_chain_scores_kernel<1>>(scores_smem(1));
    launch(mla_chain_scores_kernel<1>, dim3(T, static_cast<unsigned>(nbm)), kWG, scores_smem(1), s,
           p);
  }
  launch(mla_chain_probs_kernel, dim3(T, static_cast<unsigned>(nbm)), kWG, 0, s, p);
  if (p.chain_value_cols == 16)
    launch_values<16>(p, s);
  else if (p.chain_value_cols == 32)
    launch_values<32>(p, s);
  else
    launch_values<64>(p, s);
}

}  // namespace tandem::cuda::k
