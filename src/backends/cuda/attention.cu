// MLA attention kernels (fp32 math on bf16 storage, online softmax).
//
// mla_decode: the absorbed 576-dim MQA form. A block owns one query token, 16 heads and one
// split of its key list; 64 keys at a time are staged in shared memory and shared by the 16
// heads (every head reads the same latent rows). Splits are merged with their log-sum-exp.
//
// mla_prefill: the naive form over expanded per-head keys. A block owns 16 consecutive query
// tokens and one head; runs of tokens from the same sequence share each 32-key chunk, with a
// per-query mask (causal, or the query's top-k positions).
#include <cfloat>

#include "backends/cuda/kv_fp8.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int HB = kMlaHeadsPerBlock;
constexpr int NK = kMlaKeysPerChunk;
constexpr int kDecodeThreads = 256;
static_assert(HB == 16 && NK == 64 && kDecodeThreads == 256, "thread mappings below assume these");

size_t decode_smem(int64_t L) {
  const int64_t LP = L + 8;
  return (HB + NK) * LP * 2 + (HB * NK + 3 * HB) * 4 + NK * 8;
}

__device__ __forceinline__ float dot8(const float* a, const float* b) {
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s = fmaf(a[i], b[i], s);
  return s;
}

// grid (T, ceil(H / 16), num_splits), 256 threads.
__global__ void __launch_bounds__(kDecodeThreads) mla_decode_kernel(MlaDecodeParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int LP = static_cast<int>(p.L) + 8;  // padded rows: 16 heads' q rows hit different banks
  bf16* qs = reinterpret_cast<bf16*>(smem);  // [HB][LP]
  bf16* ks = qs + HB * LP;                   // [NK][LP]
  float* ps = reinterpret_cast<float*>(ks + NK * LP);      // [HB][NK] scores, then probabilities
  float* corr = ps + HB * NK;                              // [HB] rescale of the running output
  float* mfin = corr + HB;                                 // [HB]
  float* lfin = mfin + HB;                                 // [HB]
  int64_t* slots = reinterpret_cast<int64_t*>(lfin + HB);  // [NK] cache slot of each key, -1 = none

  const int t = blockIdx.x, h0 = blockIdx.y * HB, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int seq = p.meta.token_seq[t];
  const int64_t pos = p.meta.token_pos[t];
  // The last split takes everything left, so a plan made from an understated max length still
  // covers every key.
  const SplitRange sr = split_range(p, pos, split, NK);
  const int64_t it0 = sr.it0, it1 = sr.it1;
  const int vpr = static_cast<int>(p.L / 8);
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* pool = static_cast<const bf16*>(p.pool);
  const uint8_t* pool8 = static_cast<const uint8_t*>(p.pool);  // FP8 rows (p.kv_fp8)
  const int Lc = static_cast<int>(p.Lc);

  for (int i = tid; i < HB * vpr; i += kDecodeThreads) {
    const int h = i / vpr, v = i - h * vpr;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (h0 + h < p.H)
      val = *reinterpret_cast<const uint4*>(q + t * p.q_s0 + (h0 + h) * p.q_s1 + v * 8);
    *reinterpret_cast<uint4*>(qs + h * LP + v * 8) = val;
  }

  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};  // heads 2*warp + r
  const int cg = tid % 64, hg = tid / 64;  // P.V: columns [8cg, 8cg + 8) of heads [4hg, 4hg + 4)
  const bool col_ok = cg * 8 < p.Lc;
  float acc[4][8] = {};
  const int sh = tid % 16, sj = tid / 16;  // scores: head sh, keys sj + 16i

  for (int64_t c0 = it0; c0 < it1; c0 += NK) {
    const int nk = static_cast<int>(min64(NK, it1 - c0));
    __syncthreads();  // the previous chunk is consumed (and q is staged)
    int64_t slot = -1;
    if (tid < NK) {
      if (tid < nk) {
        const int64_t kp = p.topk ? p.topk[t * p.topk_k + c0 + tid] : c0 + tid;
        if (kp >= 0 && kp <= pos) slot = paged_slot(p.meta, seq, kp);
      }
      slots[tid] = slot;
    }
    // A chunk without keys (a top-k row's -1 tail) would leave every running value unchanged
    // bit for bit: skip it (uniform over the block).
    if (!__syncthreads_or(slot >= 0)) continue;
    for (int i = tid; i < NK * vpr; i += kDecodeThreads) {
      const int j = i / vpr, v = i - j * vpr;
      const int64_t sl = slots[j];
      uint4 val = make_uint4(0, 0, 0, 0);
      if (sl >= 0)
        val = p.kv_fp8 ? fp8_latent_chunk(pool8 + sl * p.kv_row_bytes, v, Lc)
                       : __ldg(reinterpret_cast<const uint4*>(pool + sl * p.L + v * 8));
      *reinterpret_cast<uint4*>(ks + j * LP + v * 8) = val;
    }
    __syncthreads();

    float sc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int d = 0; d < p.L; d += 8) {
      float qf[8];
      bf16x8_to_f(*reinterpret_cast<const uint4*>(qs + sh * LP + d), qf);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float kf[8];
        bf16x8_to_f(*reinterpret_cast<const uint4*>(ks + (sj + 16 * i) * LP + d), kf);
        sc[i] += dot8(qf, kf);
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j = sj + 16 * i;
      ps[sh * NK + j] = slots[j] >= 0 ? sc[i] * p.scale : -INFINITY;
    }
    __syncthreads();

#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int h = 2 * warp + r;
      const float v0 = ps[h * NK + lane], v1 = ps[h * NK + lane + 32];
      const float m_new = fmaxf(m_run[r], warp_max(fmaxf(v0, v1)));
      float p0 = 0.f, p1 = 0.f, c = 1.f;
      if (m_new != -INFINITY) {  // prevents (-inf) - (-inf) = nan
        p0 = v0 == -INFINITY ? 0.f : expf(v0 - m_new);
        p1 = v1 == -INFINITY ? 0.f : expf(v1 - m_new);
        c = expf(m_run[r] - m_new);
      }
      ps[h * NK + lane] = p0;
      ps[h * NK + lane + 32] = p1;
      l_run[r] = l_run[r] * c + warp_sum(p0 + p1);
      m_run[r] = m_new;
      if (lane == 0) corr[h] = c;
    }
    __syncthreads();

#pragma unroll
    for (int hh = 0; hh < 4; ++hh) {
      const float c = corr[hg * 4 + hh];
#pragma unroll
      for (int cc = 0; cc < 8; ++cc) acc[hh][cc] *= c;
    }
    if (col_ok)
      for (int j = 0; j < nk; ++j) {
        float kf[8];
        bf16x8_to_f(*reinterpret_cast<const uint4*>(ks + j * LP + cg * 8), kf);
#pragma unroll
        for (int hh = 0; hh < 4; ++hh) {
          const float pj = ps[(hg * 4 + hh) * NK + j];
#pragma unroll
          for (int cc = 0; cc < 8; ++cc) acc[hh][cc] = fmaf(pj, kf[cc], acc[hh][cc]);
        }
      }
  }

  if (lane == 0)
    for (int r = 0; r < 2; ++r) mfin[2 * warp + r] = m_run[r], lfin[2 * warp + r] = l_run[r];
  __syncthreads();
  if (col_ok)
#pragma unroll
    for (int hh = 0; hh < 4; ++hh) {
      const int hl = hg * 4 + hh, h = h0 + hl;
      if (h >= p.H) continue;
      const float l = lfin[hl], inv = l > 0.f ? 1.0f / l : 0.f;
      const int64_t th = static_cast<int64_t>(t) * p.H + h;
      if (p.num_splits == 1) {
        bf16* o = static_cast<bf16*>(p.out) + th * p.Lc + cg * 8;
#pragma unroll
        for (int cc = 0; cc < 8; ++cc) o[cc] = from_f<bf16>(acc[hh][cc] * inv);
      } else {
        float* o = p.part_o + (th * p.num_splits + split) * p.Lc + cg * 8;
#pragma unroll
        for (int cc = 0; cc < 8; ++cc) o[cc] = acc[hh][cc] * inv;
      }
    }
  if (p.num_splits > 1 && tid < HB && h0 + tid < p.H) {
    const int64_t th = static_cast<int64_t>(t) * p.H + h0 + tid;
    p.part_lse[th * p.num_splits + split] =
        lfin[tid] > 0.f ? mfin[tid] + logf(lfin[tid]) : -INFINITY;
  }
}

// grid (T * H), 128 threads, dynamic smem 2 * num_splits floats: out = sum_s e^(lse_s - M) o_s /
// sum_s e^(lse_s - M), summed in split order (deterministic mode relies on it). A merge is a
// few dependent steps over little data, so it is latency bound unless many loads are in flight
// (12 us for 16 splits of 64 rows at 128 threads with one scalar column each): a thread owns 4
// adjacent columns (Lc <= 512 = 4 x 128, mla_decode checks) and loads them for kMergeBatch
// splits before it sums any, and the first batch is issued before the log-sum-exp pass.
constexpr int kMergeThreads = 128;
constexpr int kMergeBatch = 16;

__global__ void __launch_bounds__(kMergeThreads) mla_merge_kernel(MlaDecodeParams p) {
  pdl_wait();
  extern __shared__ float merge_sm[];
  const int64_t th = blockIdx.x;
  const int S = static_cast<int>(p.num_splits);
  const int c = 4 * threadIdx.x;  // columns [c, c + 4)
  const bool active = c < p.Lc;
  const float* part = p.part_o + th * S * p.Lc + c;  // [S][Lc] from column c
  float4 v[kMergeBatch];
  const auto load = [&](int s0) {
#pragma unroll
    for (int b = 0; b < kMergeBatch; ++b)
      if (active && s0 + b < S)
        v[b] = __ldg(reinterpret_cast<const float4*>(part + static_cast<int64_t>(s0 + b) * p.Lc));
  };
  load(0);

  float* lse = merge_sm;  // [S]
  float* wgt = lse + S;   // [S] e^(lse_s - M), 0 for empty splits
  for (int s = threadIdx.x; s < S; s += kMergeThreads) lse[s] = p.part_lse[th * S + s];
  __syncthreads();
  float M = -INFINITY;
  for (int s = 0; s < S; ++s) M = fmaxf(M, lse[s]);
  for (int s = threadIdx.x; s < S; s += kMergeThreads)
    wgt[s] = lse[s] == -INFINITY ? 0.f : expf(lse[s] - M);
  __syncthreads();
  if (!active) return;

  float4 num = make_float4(0.f, 0.f, 0.f, 0.f);
  float den = 0.f;  // the same for every column
  for (int s0 = 0; s0 < S; s0 += kMergeBatch) {
    if (s0 > 0) load(s0);
#pragma unroll
    for (int b = 0; b < kMergeBatch; ++b) {
      const int s = s0 + b;
      if (s >= S) break;
      if (lse[s] == -INFINITY) continue;  // an empty split's row may never have been written
      const float w = wgt[s];
      num.x += w * v[b].x;
      num.y += w * v[b].y;
      num.z += w * v[b].z;
      num.w += w * v[b].w;
      den += w;
    }
  }
  const bool any = den > 0.f;
  __nv_bfloat162* o = reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(p.out) + th * p.Lc + c);
  o[0] = __floats2bfloat162_rn(any ? num.x / den : 0.f, any ? num.y / den : 0.f);
  o[1] = __floats2bfloat162_rn(any ? num.z / den : 0.f, any ? num.w / den : 0.f);
}

void launch_mla_merge(const MlaDecodeParams& p, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(2 * p.num_splits) * sizeof(float);
  launch(mla_merge_kernel, static_cast<unsigned>(p.T * p.H), kMergeThreads, smem, s, p);
}

// ---- prefill --------------------------------------------------------------------------------

constexpr int QT = 16;   // query tokens per block
constexpr int PNK = 32;  // keys per chunk (one bit each in a query's mask)
constexpr int kPrefillThreads = 128;

size_t prefill_smem(int64_t dqk, int64_t dv) {
  return (QT + PNK) * (dqk + 8) * 2 + PNK * (dv + 8) * 2 + (QT * PNK + 3 * QT) * 4 + PNK * 8 +
         QT * 4 * 3;
}

// grid (ceil(T / 16), H), 128 threads.
__global__ void __launch_bounds__(kPrefillThreads) mla_prefill_kernel(MlaPrefillParams p) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  const int dqk = static_cast<int>(p.dn + p.dr), dv = static_cast<int>(p.dv),
            dn = static_cast<int>(p.dn);
  const int QP = dqk + 8, VP = dv + 8;
  bf16* qs = reinterpret_cast<bf16*>(smem);             // [QT][QP]
  bf16* ks = qs + QT * QP;                              // [PNK][QP]
  bf16* vs = ks + PNK * QP;                             // [PNK][VP]
  float* ps = reinterpret_cast<float*>(vs + PNK * VP);  // [QT][PNK]
  float* corr = ps + QT * PNK;
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
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* kv = static_cast<const bf16*>(p.kv);
  const bf16* pe = static_cast<const bf16*>(p.k_pe);
  const int64_t kv_row = static_cast<int64_t>(H) * (p.dn + p.dv);

  if (tid < QT) {
    qpos[tid] = tid < nq ? p.meta.token_pos[t0 + tid] : 0;
    qseq[tid] = tid < nq ? p.meta.token_seq[t0 + tid] : -1;
  }
  const int qv = dqk / 8;
  for (int i = tid; i < QT * qv; i += kPrefillThreads) {
    const int r = i / qv, v = i - r * qv;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r < nq) val = *reinterpret_cast<const uint4*>(q + (t0 + r) * p.q_s0 + h * p.q_s1 + v * 8);
    *reinterpret_cast<uint4*>(qs + r * QP + v * 8) = val;
  }
  __syncthreads();

  const int cg = tid % 32, qg = tid / 32;  // P.V: columns [8cg, 8cg + 8) of queries [4qg, 4qg + 4)
  const bool col_ok = cg * 8 < dv;
  const int sq = tid % 16, sj = tid / 16;  // scores: query sq, keys sj + 8i

  int seg_begin = 0;
  while (seg_begin < nq) {  // runs of queries from one sequence (uniform over the block)
    const int seq = qseq[seg_begin];
    int seg_end = seg_begin + 1, maxpos = qpos[seg_begin];
    while (seg_end < nq && qseq[seg_end] == seq) maxpos = max(maxpos, qpos[seg_end]), ++seg_end;
    int64_t start = 0;  // kv row of position 0 of the sequence (kv_gather order)
    for (int b = 0; b < seq; ++b) start += p.meta.seq_lens[b];

    float m_run[4], l_run[4], acc[4][8];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      m_run[r] = -INFINITY, l_run[r] = 0.f;
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[r][c] = 0.f;
    }
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

      for (int i = tid; i < PNK * qv; i += kPrefillThreads) {
        const int j = i / qv, v = i - j * qv, d = v * 8;
        const int64_t r = rows[j];
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r >= 0)
          val = d < dn
                    ? __ldg(reinterpret_cast<const uint4*>(kv + r * kv_row + h * (p.dn + p.dv) + d))
                    : __ldg(reinterpret_cast<const uint4*>(pe + r * p.pe_rs + d - dn));
        *reinterpret_cast<uint4*>(ks + j * QP + d) = val;
      }
      const int vv = dv / 8;
      for (int i = tid; i < PNK * vv; i += kPrefillThreads) {
        const int j = i / vv, v = i - j * vv;
        const int64_t r = rows[j];
        uint4 val = make_uint4(0, 0, 0, 0);
        if (r >= 0)
          val = __ldg(
              reinterpret_cast<const uint4*>(kv + r * kv_row + h * (p.dn + p.dv) + dn + v * 8));
        *reinterpret_cast<uint4*>(vs + j * VP + v * 8) = val;
      }
      __syncthreads();

      float sc[4] = {0.f, 0.f, 0.f, 0.f};
      for (int d = 0; d < dqk; d += 8) {
        float qf[8];
        bf16x8_to_f(*reinterpret_cast<const uint4*>(qs + sq * QP + d), qf);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float kf[8];
          bf16x8_to_f(*reinterpret_cast<const uint4*>(ks + (sj + 8 * i) * QP + d), kf);
          sc[i] += dot8(qf, kf);
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int j = sj + 8 * i;
        ps[sq * PNK + j] = (mask[sq] >> j) & 1u ? sc[i] * p.scale : -INFINITY;
      }
      __syncthreads();

#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int qi = 4 * warp + r;
        const float v = ps[qi * PNK + lane];
        const float m_new = fmaxf(m_run[r], warp_max(v));
        float pv = 0.f, c = 1.f;
        if (m_new != -INFINITY) {
          pv = v == -INFINITY ? 0.f : expf(v - m_new);
          c = expf(m_run[r] - m_new);
        }
        ps[qi * PNK + lane] = pv;
        l_run[r] = l_run[r] * c + warp_sum(pv);
        m_run[r] = m_new;
        if (lane == 0) corr[qi] = c;
      }
      __syncthreads();

      // acc rows here are queries 4qg + qq (the P.V mapping), not the softmax mapping above.
#pragma unroll
      for (int qq = 0; qq < 4; ++qq) {
        const float c = corr[qg * 4 + qq];
#pragma unroll
        for (int cc = 0; cc < 8; ++cc) acc[qq][cc] *= c;
      }
      if (col_ok)
        for (int j = 0; j < PNK; ++j) {
          float vf[8];
          bf16x8_to_f(*reinterpret_cast<const uint4*>(vs + j * VP + cg * 8), vf);
#pragma unroll
          for (int qq = 0; qq < 4; ++qq) {
            const float pj = ps[(qg * 4 + qq) * PNK + j];
#pragma unroll
            for (int cc = 0; cc < 8; ++cc) acc[qq][cc] = fmaf(pj, vf[cc], acc[qq][cc]);
          }
        }
    }

    if (lane == 0)
      for (int r = 0; r < 4; ++r) mfin[4 * warp + r] = m_run[r], lfin[4 * warp + r] = l_run[r];
    __syncthreads();
    if (col_ok)
#pragma unroll
      for (int qq = 0; qq < 4; ++qq) {
        const int qi = qg * 4 + qq;
        if (qi < seg_begin || qi >= seg_end) continue;
        const float l = lfin[qi], inv = l > 0.f ? 1.0f / l : 0.f;
        bf16* o = static_cast<bf16*>(p.out) + ((t0 + qi) * H + h) * p.dv + cg * 8;
#pragma unroll
        for (int cc = 0; cc < 8; ++cc) o[cc] = from_f<bf16>(acc[qq][cc] * inv);
      }
    __syncthreads();  // lfin and the run's masks are read before the next run rewrites them
    seg_begin = seg_end;
  }
}

}  // namespace

void mla_decode(const MlaDecodeParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.chain) {
    mla_decode_chain(p, s);
    return;
  }
  if (p.tensor_cores) {
    if (p.wide && p.wgmma && mla_decode_wgmma_applies(p.H, p.L, p.Lc, p.kv_fp8))
      mla_decode_wgmma(p, s);
    else if (p.wide)
      mla_decode_wide(p, s);
    else
      mla_decode_mma(p, s);
    if (p.num_splits > 1) launch_mla_merge(p, s);
    return;
  }
  const size_t smem = decode_smem(p.L);
  opt_in_smem<mla_decode_kernel>(smem);
  const dim3 g(static_cast<unsigned>(p.T), cdiv(p.H, HB), static_cast<unsigned>(p.num_splits));
  launch(mla_decode_kernel, g, kDecodeThreads, smem, s, p);
  if (p.num_splits > 1) launch_mla_merge(p, s);
}

void mla_prefill(const MlaPrefillParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.tensor_cores) {
    mla_prefill_mma(p, s);
    return;
  }
  const size_t smem = prefill_smem(p.dn + p.dr, p.dv);
  opt_in_smem<mla_prefill_kernel>(smem);
  const dim3 g(cdiv(p.T, QT), static_cast<unsigned>(p.H));
  launch(mla_prefill_kernel, g, kPrefillThreads, smem, s, p);
}

}  // namespace tandem::cuda::k
