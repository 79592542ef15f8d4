// mla_decode on the tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate). Same block
// shape, online softmax and split/merge as the SIMT kernel in attention.cu: a block owns one
// query token, 16 heads and one split; 64 latent rows at a time sit in shared memory. Warp w
// computes S = Q K^T for keys [8w, 8w + 8) (16 heads x 8 keys, 36 k-steps at L = 576), the
// softmax runs per head in fp32 and leaves P in bf16, then warp w accumulates
// O[16 heads, 64w .. 64w + 64) += P V with V = the first Lc columns of the same rows (read
// transposed with ldmatrix). Fragment layouts: PTX ISA, "Matrix Fragments for mma.m16n8k16".
//
// q and the key rows arrive by cp.async, a whole tile's copies in flight at once: a
// load-then-store loop waits out one memory latency per 16 bytes (18 in a row per thread for a
// 64 x 576 key tile). With two key buffers, chunk i + 1 is copied while chunk i is computed.
#include <cfloat>

#include "backends/cuda/kv_fp8.cuh"
#include "backends/cuda/mma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int HB = kMlaHeadsPerBlock;  // 16 = the mma M dimension
constexpr int NK = kMlaKeysPerChunk;   // 64 = 8 warps x 8 keys
constexpr int PB = NK + 8;             // padded row of P (bf16)
constexpr int kThreads = 256;
static_assert(kThreads == 16 * HB && kThreads == 4 * NK, "copy mappings below assume these");

__host__ __device__ __forceinline__ int64_t padded_dims(int64_t L) {
  return (L + 15) / 16 * 16;
}

// nbuf key buffers of NK rows; slots in a ring of three chunks (written two chunks ahead).
size_t mma_smem(int64_t L, int nbuf) {
  const int64_t LP = padded_dims(L) + 8;
  return (HB + nbuf * NK) * LP * 2 + HB * NK * 4 + HB * PB * 2 + 3 * HB * 4 + 3 * NK * 8;
}

// grid (T, ceil(H / 16), num_splits), 256 threads; nbuf = 1 or 2 key buffers (mla_decode_mma
// picks). Both run the same math in the same order: only where chunk i's rows sit differs.
//
// Per chunk i (a block-uniform loop; A to D are its barriers):
//   A  chunk i - 1's P V is done with the buffer of chunk i + nbuf - 1: issue that chunk's
//      copies (one commit group per iteration, so the wait can count), then wait for this
//      thread's copies of chunk i (and q)
//   B  everyone's copies have landed: S of chunk i; then the slots of chunk i + 2 (their top-k
//      entries are loaded before S, the page-table lookups after it)
//   C  softmax
//   D  P V
// Chunk c's slots (ring entry c % 3) are written in iteration c - 2 (or before the loop), read
// by its copies (iteration c + 1 - nbuf) and its S (iteration c), and overwritten after the S
// of iteration c + 1, barriers later.
// kFp8: the pool holds FP8 rows (p.kv_fp8); a template parameter so the bf16 instance compiles
// exactly as it did without the FP8 staging.
template <bool kFp8>
__global__ void __launch_bounds__(kThreads, 2) mla_decode_mma_kernel(MlaDecodeParams p, int nbuf) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int LK = static_cast<int>(padded_dims(p.L));  // dims the mma steps cover (zero padded)
  const int LP = LK + 8;                              // row stride: rows land on different banks
  bf16* qs = reinterpret_cast<bf16*>(smem);           // [HB][LP]
  bf16* ks = qs + HB * LP;                            // [nbuf][NK][LP]
  float* ps = reinterpret_cast<float*>(ks + nbuf * NK * LP);  // [HB][NK] scaled scores
  bf16* pb = reinterpret_cast<bf16*>(ps + HB * NK);           // [HB][PB] probabilities
  float* corr = reinterpret_cast<float*>(pb + HB * PB);
  float* mfin = corr + HB;
  float* lfin = mfin + HB;
  int64_t* slots = reinterpret_cast<int64_t*>(lfin + HB);  // [3][NK] cache slot, -1 = no key

  const int t = blockIdx.x, h0 = blockIdx.y * HB, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;  // fragment row group and column pair
  const int vpr = static_cast<int>(p.L / 8), vpad = LK / 8;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* pool = static_cast<const bf16*>(p.pool);

  {  // q [16 heads, LK]: 16 threads per row; issued first, it needs no lookups
    const int h = tid >> 4;
    const bool hv = h0 + h < p.H;
    const bf16* src = q + t * p.q_s0 + (h0 + (hv ? h : 0)) * p.q_s1;
    for (int v = tid & 15; v < vpad; v += 16) {
      const bool ok = hv && v < vpr;
      cp_async16(qs + h * LP + v * 8, ok ? src + v * 8 : q, ok);
    }
    cp_async_commit();
  }

  const int seq = p.meta.token_seq[t];
  const int64_t pos = p.meta.token_pos[t];
  const SplitRange sr = split_range(p, pos, split, NK);
  const int64_t it0 = sr.it0, it1 = sr.it1;
  const int nchunks = sr.nchunks;

  // Key j of chunk ci: its position (-1: past the split's end, or a -1 top-k entry), then its
  // cache slot (-1: no key).
  const auto key_pos = [&](int ci, int j) -> int64_t {
    const int64_t it = it0 + static_cast<int64_t>(ci) * NK + j;
    if (it >= it1) return -1;
    return p.topk ? p.topk[t * p.topk_k + it] : it;
  };
  const auto key_slot = [&](int64_t kp) -> int64_t {
    return kp >= 0 && kp <= pos ? paged_slot(p.meta, seq, kp) : -1;
  };
  // Chunk ci's rows [NK, LK] into buffer ci % nbuf: 4 threads per row, 16 bytes each at a
  // 64-byte stride; zeros for a missing key and the padding dims (the mma steps read them).
  // FP8 rows are converted to bf16 on the way: plain loads and stores, which land no later
  // than the copies would (before the barrier that precedes the chunk's first read).
  const uint8_t* pool8 = static_cast<const uint8_t*>(p.pool);
  const int Lc = static_cast<int>(p.Lc);
  const auto copy_keys = [&](int ci) {
    const int j = tid >> 2;
    const int64_t sl = slots[(ci % 3) * NK + j];
    bf16* dst = ks + ((ci % nbuf) * NK + j) * LP;
    if constexpr (kFp8) {
      const uint8_t* row = pool8 + (sl >= 0 ? sl : 0) * p.kv_row_bytes;
      // Unrolled so the read-only loads of several chunks are in flight before their stores.
#pragma unroll 6
      for (int v = tid & 3; v < vpad; v += 4)
        *reinterpret_cast<uint4*>(dst + v * 8) =
            sl >= 0 && v < vpr ? fp8_latent_chunk(row, v, Lc) : make_uint4(0, 0, 0, 0);
      return;
    }
    const bf16* src = pool + (sl >= 0 ? sl : 0) * p.L;
    for (int v = tid & 3; v < vpad; v += 4) {
      const bool ok = sl >= 0 && v < vpr;
      cp_async16(dst + v * 8, ok ? src + v * 8 : pool, ok);
    }
  };

  // A chunk without a single key (a top-k row's -1 tail: the indexer pads rows with -1 while a
  // sequence is shorter than K) is skipped. Computing it would leave the running max, sum and
  // output bit for bit unchanged (scores -inf, P = 0, rescale exactly 1), so skipping changes
  // no result, only the time: half the chunks at a 1k context with K = 2048. live_cur / live_next
  // say whether chunks i and i + 1 have a key (block-uniform, from barrier votes).
  bool live_cur = false, live_next = false;

  // Block-uniform: the slots of chunks 0 and 1 (ring entries 0 and 1); with two buffers the
  // loop issues chunk i + 1's copies, so chunk 0's go out here.
  if (nchunks > 0) {
    int64_t sl = -1;
    if (tid < 2 * NK) slots[tid] = sl = key_slot(key_pos(tid / NK, tid % NK));
    live_cur = __syncthreads_or(tid < NK && sl >= 0);
    live_next = __syncthreads_or(tid >= NK && sl >= 0);
    if (nbuf == 2) {
      copy_keys(0);
      cp_async_commit();
    }
  }

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // softmax: heads 2*warp + r
  const int cb = warp * 64;                                        // P.V: columns [cb, cb + 64)
  float acc[8][4] = {};

  for (int i = 0; i < nchunks; ++i) {
    __syncthreads();  // A
    const int next = i + nbuf - 1;
    if (next < nchunks) copy_keys(next);
    cp_async_commit();  // possibly empty
    if (nbuf == 2)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
    __syncthreads();  // B
    const bf16* kt = ks + (i % nbuf) * NK * LP;
    const int64_t* sl = slots + (i % 3) * NK;
    const int64_t kp_ahead = tid < NK ? key_pos(i + 2, tid) : -1;
    const bool live = live_cur;

    if (live) {  // S[16 heads, keys 8w .. 8w + 8) = Q K^T
      // Four independent accumulator chains (k-step mod 4), summed at the end: one chain of 36
      // dependent mma (L = 576) waits on the tensor-core latency at every step, and with a few
      // warps per scheduler nothing hides it. The order is fixed, so a token's scores still
      // depend on its own query and keys only.
      // Fragments by ldmatrix (the same registers four 32-bit loads would give): A = the q
      // tile; B = the warp's 8 key rows at k, k + 8, k + 16, k + 24 (two k-steps per load).
      float acc4[4][4] = {};
      const int n0 = warp * 8;
      const bf16* kb = kt + (n0 + (lane & 7)) * LP + (lane >> 3) * 8;
      for (int k00 = 0; k00 < LK; k00 += 64) {
#pragma unroll
        for (int u = 0; u < 4; u += 2) {
          const int k0 = k00 + 16 * u;
          if (k0 >= LK) break;
          uint32_t b[4];
          if (k0 + 16 < LK) {
            ldmatrix_x4(b[0], b[1], b[2], b[3], kb + k0);
          } else {  // L = 16 mod 32: the last k-step alone
            b[0] = ld32(kt + (n0 + g) * LP + k0 + 2 * c);
            b[1] = ld32(kt + (n0 + g) * LP + k0 + 8 + 2 * c);
          }
#pragma unroll
          for (int v = 0; v < 2; ++v) {
            if (k0 + 16 * v >= LK) break;
            uint32_t a0, a1, a2, a3;
            ldmatrix_a(a0, a1, a2, a3, qs, LP, k0 + 16 * v, lane);
            mma_bf16(acc4[u + v], a0, a1, a2, a3, b[2 * v], b[2 * v + 1]);
          }
        }
      }
      float s[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) s[e] = (acc4[0][e] + acc4[1][e]) + (acc4[2][e] + acc4[3][e]);
      const int j0 = n0 + 2 * c;
      const bool v0 = sl[j0] >= 0, v1 = sl[j0 + 1] >= 0;
      ps[g * NK + j0] = v0 ? s[0] * p.scale : -INFINITY;
      ps[g * NK + j0 + 1] = v1 ? s[1] * p.scale : -INFINITY;
      ps[(g + 8) * NK + j0] = v0 ? s[2] * p.scale : -INFINITY;
      ps[(g + 8) * NK + j0 + 1] = v1 ? s[3] * p.scale : -INFINITY;
    }
    int64_t sl_ahead = -1;
    if (tid < NK && i + 2 < nchunks)
      slots[((i + 2) % 3) * NK + tid] = sl_ahead = key_slot(kp_ahead);
    live_cur = live_next;
    live_next = __syncthreads_or(sl_ahead >= 0);  // C

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      if (!live) break;
      const int h = 2 * warp + r;
      const float x0 = ps[h * NK + lane], x1 = ps[h * NK + lane + 32];
      const float m_new = fmaxf(m_run[r], warp_max(fmaxf(x0, x1)));
      float p0 = 0.f, p1 = 0.f, cr = 1.f;
      if (m_new != -INFINITY) {  // prevents (-inf) - (-inf) = nan
        p0 = x0 == -INFINITY ? 0.f : expf(x0 - m_new);
        p1 = x1 == -INFINITY ? 0.f : expf(x1 - m_new);
        cr = expf(m_run[r] - m_new);
      }
      pb[h * PB + lane] = from_f<bf16>(p0);
      pb[h * PB + lane + 32] = from_f<bf16>(p1);
      l_run[r] = l_run[r] * cr + warp_sum(p0 + p1);
      m_run[r] = m_new;
      if (lane == 0) corr[h] = cr;
    }
    __syncthreads();  // D

    if (live && cb < p.Lc) {  // O[16 heads, cb .. cb + 64) = O * corr + P V
      const float cg0 = corr[g], cg1 = corr[g + 8];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt)
        acc[nt][0] *= cg0, acc[nt][1] *= cg0, acc[nt][2] *= cg1, acc[nt][3] *= cg1;
#pragma unroll
      for (int kk = 0; kk < NK; kk += 16) {
        uint32_t a0, a1, a2, a3;
        ldmatrix_a(a0, a1, a2, a3, pb, PB, kk, lane);
        const int m = lane >> 3, r = lane & 7;  // this thread's ldmatrix row: matrix m, row r
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          if (cb + 16 * np >= p.Lc) break;
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4_trans(b0, b1, b2, b3,
                            kt + (kk + (m & 1) * 8 + r) * LP + cb + 16 * np + (m >> 1) * 8);
          mma_bf16(acc[2 * np], a0, a1, a2, a3, b0, b1);
          mma_bf16(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
        }
      }
    }
  }
  cp_async_wait<0>();  // nothing in flight at exit (an empty split's q copies)

  if (lane == 0)
    for (int r = 0; r < 2; ++r) mfin[2 * warp + r] = m_run[r], lfin[2 * warp + r] = l_run[r];
  __syncthreads();
  if (cb < p.Lc) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int hl = g + 8 * half, h = h0 + hl;
      if (h >= p.H) continue;
      const float l = lfin[hl], inv = l > 0.f ? 1.0f / l : 0.f;
      const int64_t th = static_cast<int64_t>(t) * p.H + h;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int col = cb + nt * 8 + 2 * c;
        if (col >= p.Lc) break;
        const float o0 = acc[nt][2 * half] * inv, o1 = acc[nt][2 * half + 1] * inv;
        if (p.num_splits == 1)
          *reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * p.Lc + col) =
              __floats2bfloat162_rn(o0, o1);
        else
          *reinterpret_cast<float2*>(p.part_o + (th * p.num_splits + split) * p.Lc + col) =
              make_float2(o0, o1);
      }
    }
  }
  if (p.num_splits > 1 && tid < HB && h0 + tid < p.H) {
    const int64_t th = static_cast<int64_t>(t) * p.H + h0 + tid;
    p.part_lse[th * p.num_splits + split] =
        lfin[tid] > 0.f ? mfin[tid] + logf(lfin[tid]) : -INFINITY;
  }
}

// ---- prefill ----------------------------------------------------------------------------------
// The naive-form kernel of attention.cu on the tensor cores: a block owns 16 consecutive query
// tokens (the mma M dimension) and one head; runs of queries from one sequence share each
// 32-key chunk under per-query masks (causal, or the query's ascending top-k row). Warp w
// computes S for keys [8w, 8w + 8) over the (zero-padded) qk dims, the softmax leaves P in bf16,
// and warp w accumulates O[16 queries, 64w .. 64w + 64) += P V.

constexpr int QT = 16;
constexpr int PNK = 32;
constexpr int PPB = PNK + 8;  // padded row of P (bf16)
constexpr int kPrefillThreads = 128;

__host__ __device__ __forceinline__ int64_t round16(int64_t x) {
  return (x + 15) / 16 * 16;
}

size_t prefill_mma_smem(int64_t dqk, int64_t dv) {
  const int64_t QP = round16(dqk) + 8, VP = round16(dv) + 8;
  return (QT + PNK) * QP * 2 + PNK * VP * 2 + QT * PNK * 4 + QT * PPB * 2 + 3 * QT * 4 + PNK * 8 +
         QT * 4 * 3;
}

// grid (ceil(T / 16), H), 128 threads.
__global__ void __launch_bounds__(kPrefillThreads) mla_prefill_mma_kernel(MlaPrefillParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int dqk = static_cast<int>(p.dn + p.dr), dv = static_cast<int>(p.dv),
            dn = static_cast<int>(p.dn);
  const int DK = static_cast<int>(round16(dqk)), DVK = static_cast<int>(round16(dv));
  const int QP = DK + 8, VP = DVK + 8;
  bf16* qs = reinterpret_cast<bf16*>(smem);             // [QT][QP]
  bf16* ks = qs + QT * QP;                              // [PNK][QP]
  bf16* vs = ks + PNK * QP;                             // [PNK][VP]
  float* ps = reinterpret_cast<float*>(vs + PNK * VP);  // [QT][PNK]
  bf16* pb = reinterpret_cast<bf16*>(ps + QT * PNK);    // [QT][PPB]
  float* corr = reinterpret_cast<float*>(pb + QT * PPB);
  float* mfin = corr + QT;
  float* lfin = mfin + QT;
  int64_t* rows = reinterpret_cast<int64_t*>(lfin + QT);     // [PNK] kv row of each key, -1 = none
  uint32_t* mask = reinterpret_cast<uint32_t*>(rows + PNK);  // [QT]
  int* qpos = reinterpret_cast<int*>(mask + QT);
  int* qseq = qpos + QT;

  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * QT;
  const int h = blockIdx.y, H = static_cast<int>(p.H);
  const int nq = static_cast<int>(min64(QT, p.T - t0));
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, c = lane & 3;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* kv = static_cast<const bf16*>(p.kv);
  const bf16* pe = static_cast<const bf16*>(p.k_pe);
  const int64_t kv_row = static_cast<int64_t>(H) * (p.dn + p.dv);

  if (tid < QT) {
    qpos[tid] = tid < nq ? p.meta.token_pos[t0 + tid] : 0;
    qseq[tid] = tid < nq ? p.meta.token_seq[t0 + tid] : -1;
  }
  const int qv = dqk / 8, qvp = DK / 8;
  for (int i = tid; i < QT * qvp; i += kPrefillThreads) {
    const int r = i / qvp, v = i - r * qvp;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < nq && v < qv)
      val = *reinterpret_cast<const uint4*>(q + (t0 + r) * p.q_s0 + h * p.q_s1 + v * 8);
    *reinterpret_cast<uint4*>(qs + r * QP + v * 8) = val;
  }
  __syncthreads();

  const int cb = warp * 64;  // P.V: columns [cb, cb + 64)
  int seg_begin = 0;
  while (seg_begin < nq) {  // runs of queries from one sequence (uniform over the block)
    const int seq = qseq[seg_begin];
    int seg_end = seg_begin + 1, maxpos = qpos[seg_begin];
    while (seg_end < nq && qseq[seg_end] == seq) maxpos = max(maxpos, qpos[seg_end]), ++seg_end;
    int64_t start = 0;  // kv row of position 0 of the sequence (kv_gather order)
    for (int b = 0; b < seq; ++b) start += p.meta.seq_lens[b];

    float m_run[4], l_run[4], acc[8][4];
#pragma unroll
    for (int r = 0; r < 4; ++r) m_run[r] = -INFINITY, l_run[r] = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    int ptr = 0;  // sparse: next unread entry of this thread's query row (tid < QT)

    for (int j0 = 0; j0 <= maxpos; j0 += PNK) {
      __syncthreads();  // the previous chunk is consumed
      if (tid < QT) {
        uint32_t mk = 0;
        if (tid >= seg_begin && tid < seg_end) {
          const int pq = qpos[tid];
          if (!p.topk) {
            const int lim = pq - j0 + 1;
            mk = lim >= PNK ? 0xffffffffu : lim <= 0 ? 0u : (1u << lim) - 1u;
          } else {
            const int32_t* row = p.topk + (t0 + tid) * p.topk_k;
            while (ptr < p.topk_k) {
              const int e = row[ptr];
              if (e < 0 || e >= j0 + PNK) break;
              if (e >= j0 && e <= pq) mk |= 1u << (e - j0);
              ++ptr;
            }
          }
        }
        mask[tid] = mk;
      }
      if (tid < PNK) rows[tid] = j0 + tid <= maxpos ? start + j0 + tid : -1;
      __syncthreads();
      uint32_t any = 0;
      for (int i = 0; i < QT; ++i) any |= mask[i];
      if (!any) continue;  // uniform: no query of the run attends to this chunk

      for (int i = tid; i < PNK * qvp; i += kPrefillThreads) {
        const int j = i / qvp, v = i - j * qvp, d = v * 8;
        const int64_t r = rows[j];
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r >= 0 && v < qv)
          val = d < dn
                    ? __ldg(reinterpret_cast<const uint4*>(kv + r * kv_row + h * (p.dn + p.dv) + d))
                    : __ldg(reinterpret_cast<const uint4*>(pe + r * p.pe_rs + d - dn));
        *reinterpret_cast<uint4*>(ks + j * QP + d) = val;
      }
      const int vv = dv / 8, vvp = DVK / 8;
      for (int i = tid; i < PNK * vvp; i += kPrefillThreads) {
        const int j = i / vvp, v = i - j * vvp;
        const int64_t r = rows[j];
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r >= 0 && v < vv)
          val = __ldg(
              reinterpret_cast<const uint4*>(kv + r * kv_row + h * (p.dn + p.dv) + dn + v * 8));
        *reinterpret_cast<uint4*>(vs + j * VP + v * 8) = val;
      }
      __syncthreads();

      {  // S[16 queries, keys 8w .. 8w + 8)
        float sc[4] = {0.f, 0.f, 0.f, 0.f};
        const int n0 = warp * 8;
        for (int k0 = 0; k0 < DK; k0 += 16) {
          const uint32_t a0 = ld32(qs + g * QP + k0 + 2 * c),
                         a1 = ld32(qs + (g + 8) * QP + k0 + 2 * c);
          const uint32_t a2 = ld32(qs + g * QP + k0 + 8 + 2 * c),
                         a3 = ld32(qs + (g + 8) * QP + k0 + 8 + 2 * c);
          const uint32_t b0 = ld32(ks + (n0 + g) * QP + k0 + 2 * c),
                         b1 = ld32(ks + (n0 + g) * QP + k0 + 8 + 2 * c);
          mma_bf16(sc, a0, a1, a2, a3, b0, b1);
        }
        const int j = n0 + 2 * c;
        const uint32_t m0 = mask[g], m1 = mask[g + 8];
        ps[g * PNK + j] = (m0 >> j) & 1u ? sc[0] * p.scale : -INFINITY;
        ps[g * PNK + j + 1] = (m0 >> (j + 1)) & 1u ? sc[1] * p.scale : -INFINITY;
        ps[(g + 8) * PNK + j] = (m1 >> j) & 1u ? sc[2] * p.scale : -INFINITY;
        ps[(g + 8) * PNK + j + 1] = (m1 >> (j + 1)) & 1u ? sc[3] * p.scale : -INFINITY;
      }
      __syncthreads();

#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int qi = 4 * warp + r;
        const float v = ps[qi * PNK + lane];
        const float m_new = fmaxf(m_run[r], warp_max(v));
        float pv = 0.f, cr = 1.f;
        if (m_new != -INFINITY) {
          pv = v == -INFINITY ? 0.f : expf(v - m_new);
          cr = expf(m_run[r] - m_new);
        }
        pb[qi * PPB + lane] = from_f<bf16>(pv);
        l_run[r] = l_run[r] * cr + warp_sum(pv);
        m_run[r] = m_new;
        if (lane == 0) corr[qi] = cr;
      }
      __syncthreads();

      if (cb < dv) {
        const float cg0 = corr[g], cg1 = corr[g + 8];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt)
          acc[nt][0] *= cg0, acc[nt][1] *= cg0, acc[nt][2] *= cg1, acc[nt][3] *= cg1;
        const int m = lane >> 3, r = lane & 7;
#pragma unroll
        for (int kk = 0; kk < PNK; kk += 16) {
          const uint32_t a0 = ld32(pb + g * PPB + kk + 2 * c),
                         a1 = ld32(pb + (g + 8) * PPB + kk + 2 * c);
          const uint32_t a2 = ld32(pb + g * PPB + kk + 8 + 2 * c),
                         a3 = ld32(pb + (g + 8) * PPB + kk + 8 + 2 * c);
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            if (cb + 16 * np >= dv) break;
            uint32_t b0, b1, b2, b3;
            ldmatrix_x4_trans(b0, b1, b2, b3,
                              vs + (kk + (m & 1) * 8 + r) * VP + cb + 16 * np + (m >> 1) * 8);
            mma_bf16(acc[2 * np], a0, a1, a2, a3, b0, b1);
            mma_bf16(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
          }
        }
      }
    }

    if (lane == 0)
      for (int r = 0; r < 4; ++r) mfin[4 * warp + r] = m_run[r], lfin[4 * warp + r] = l_run[r];
    __syncthreads();
    if (cb < dv) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int qi = g + 8 * half;
        if (qi < seg_begin || qi >= seg_end) continue;
        const float l = lfin[qi], inv = l > 0.f ? 1.0f / l : 0.f;
        bf16* o = static_cast<bf16*>(p.out) + ((t0 + qi) * H + h) * p.dv;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const int col = cb + nt * 8 + 2 * c;
          if (col >= dv) break;
          o[col] = from_f<bf16>(acc[nt][2 * half] * inv);
          o[col + 1] = from_f<bf16>(acc[nt][2 * half + 1] * inv);
        }
      }
    }
    __syncthreads();  // lfin and the run's masks are read before the next run rewrites them
    seg_begin = seg_end;
  }
}

}  // namespace

void mla_decode_mma(const MlaDecodeParams& p, cudaStream_t s) {
  static const int2 dev = [] {  // SMs, opt-in shared memory per block
    int d = 0;
    int2 r = {0, 0};
    cudaGetDevice(&d);
    cudaDeviceGetAttribute(&r.x, cudaDevAttrMultiProcessorCount, d);
    cudaDeviceGetAttribute(&r.y, cudaDevAttrMaxSharedMemoryPerBlockOptin, d);
    return r;
  }();
  const dim3 g(static_cast<unsigned>(p.T), cdiv(p.H, HB), static_cast<unsigned>(p.num_splits));
  // Two key buffers (172 KB at L = 576) hide a block's next copy under its math but leave room
  // for one block per SM; one buffer (99 KB) fits two, whose copies and math interleave
  // instead. So two only while the grid leaves SMs idle anyway (small batch; the results are
  // the same bits either way, which keeps deterministic mode batch-invariant).
  const int64_t blocks = static_cast<int64_t>(g.x) * g.y * g.z;
  const int nbuf = blocks <= dev.x && mma_smem(p.L, 2) <= static_cast<size_t>(dev.y) ? 2 : 1;
  const size_t smem = mma_smem(p.L, nbuf);
  if (p.kv_fp8) {
    opt_in_smem<mla_decode_mma_kernel<true>>(smem);
    launch(mla_decode_mma_kernel<true>, g, kThreads, smem, s, p, nbuf);
    return;
  }
  opt_in_smem<mla_decode_mma_kernel<false>>(smem);
  launch(mla_decode_mma_kernel<false>, g, kThreads, smem, s, p, nbuf);
}

}  // namespace tandem::cuda::k

namespace tandem::cuda::k {

void mla_prefill_mma(const MlaPrefillParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  const size_t smem = prefill_mma_smem(p.dn + p.dr, p.dv);
  opt_in_smem<mla_prefill_mma_kernel>(smem);
  const dim3 g(cdiv(p.T, QT), static_cast<unsigned>(p.H));
  launch(mla_prefill_mma_kernel, g, kPrefillThreads, smem, s, p);
}

}  // namespace tandem::cuda::k
