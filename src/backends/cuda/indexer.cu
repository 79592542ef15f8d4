// The DSA lightning indexer: fp32 scores sum_h w[h] * relu(q_h . k_j) for every visible cached
// key (one thread per key, the key row in registers, q broadcast from shared memory), then an
// exact top-K per token on the scores' order-preserving bit patterns (a sampled threshold, then
// rounds narrowing a key range over the keys above it; see "The selection" below), written in
// ascending position order (ties at the threshold: earlier positions first), exactly
// CpuBackend::indexer_topk's selection.
#include <cfloat>

#include "backends/cuda/kv_fp8.cuh"
#include "backends/cuda/mma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kKeysPerBlock = 128;
constexpr int kSelectThreads = 1024;  // 512 was faster at 8k by 3%, slower at 32k by 30%

// grid (ceil(max_len / 128), Tc); dynamic smem q [Hi][DI] f32 + w [Hi].
template <int DI>
__global__ void __launch_bounds__(kKeysPerBlock)
    indexer_scores_kernel(IndexerParams p, int64_t t0) {
  pdl_wait();
  extern __shared__ float sm[];
  float* qsm = sm;
  float* wsm = sm + p.Hi * DI;
  const int64_t t = t0 + blockIdx.y;
  const int64_t visible = static_cast<int64_t>(p.meta.token_pos[t]) + 1;
  if (visible <= p.K) return;  // everything visible is selected: no scores needed
  const int64_t jb = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  if (jb >= visible) return;  // uniform over the block
  const bf16* q = static_cast<const bf16*>(p.q);
  for (int64_t i = threadIdx.x; i < p.Hi * DI; i += kKeysPerBlock) {
    const int64_t h = i / DI, d = i - h * DI;
    qsm[i] = to_f(q[t * p.q_s0 + h * p.q_s1 + d]);
  }
  for (int64_t h = threadIdx.x; h < p.Hi; h += kKeysPerBlock) wsm[h] = p.w[t * p.w_s0 + h];
  __syncthreads();
  const int64_t j = jb + threadIdx.x;
  if (j >= visible) return;
  const int64_t slot = paged_slot(p.meta, p.meta.token_seq[t], j);
  const bf16* krow = static_cast<const bf16*>(p.pool) + slot * DI;
  float kf[DI];
#pragma unroll
  for (int v = 0; v < DI / 8; ++v)
    bf16x8_to_f(__ldg(reinterpret_cast<const uint4*>(krow) + v), kf + 8 * v);
  float score = 0.f;
  for (int64_t h = 0; h < p.Hi; ++h) {
    const float* qh = qsm + h * DI;
    float a[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < DI; ++i) a[i & 3] = fmaf(qh[i], kf[i], a[i & 3]);
    const float d = (a[0] + a[1]) + (a[2] + a[3]);
    score += wsm[h] * (d > 0.f ? d : 0.f);
  }
  p.scores[static_cast<int64_t>(blockIdx.y) * p.max_len + j] = score;
}

// The same scores on the tensor cores: per token, S = Q [Hi x DI] . K^T [DI x 128 keys] with
// mma.sync m16n8k16 (Hi a multiple of 16), then sum_h w[h] * relu(S[h, j]) reduced across the
// lanes that hold one key's heads. Warp w owns keys [32w, 32w + 32) of the block's 128.
// grid (ceil(max_len / 128), Tc), 128 threads; dynamic smem q [Hi][DI + 8] bf16, k [128][DI + 8]
// bf16, w [Hi] f32.
template <int DI>
__global__ void __launch_bounds__(kKeysPerBlock)
    indexer_scores_mma_kernel(IndexerParams p, int64_t t0) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int RP = DI + 8;  // padded rows: the 8 rows of a fragment load hit different banks
  const int Hi = static_cast<int>(p.Hi);
  bf16* qs = reinterpret_cast<bf16*>(smem);
  bf16* ks = qs + Hi * RP;
  float* wsm = reinterpret_cast<float*>(ks + kKeysPerBlock * RP);
  const int64_t t = t0 + blockIdx.y;
  const int64_t visible = static_cast<int64_t>(p.meta.token_pos[t]) + 1;
  if (visible <= p.K) return;
  const int64_t jb = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  if (jb >= visible) return;  // uniform over the block
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, c = lane & 3;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* pool = static_cast<const bf16*>(p.pool);
  const int seq = p.meta.token_seq[t];
  constexpr int V = DI / 8;
  // Every copy of the tile in flight at once (cp.async, V per thread for the keys): loads issued
  // one after another, each waiting on its page-table entry, held the kernel to a third of the
  // copy bandwidth at batch 128 and 32k context.
  for (int i = tid; i < Hi * V; i += kKeysPerBlock) {
    const int h = i / V, v = i - h * V;
    cp_async16(qs + h * RP + v * 8, q + t * p.q_s0 + h * p.q_s1 + v * 8, true);
  }
  // This thread copies piece v = tid % V of the keys j0 + r * kStep, r < V. Their page and
  // offset advance by kStep per key (32-bit, no division in the loop: paged_slot's 64-bit
  // division per copy made the kernel issue-bound).
  constexpr int kStep = kKeysPerBlock / V;
  const int v = tid % V, j0 = tid / V, ps = p.meta.page_size;
  const int32_t* pages = p.meta.page_table + static_cast<int64_t>(seq) * p.meta.max_pages;
  int page = (static_cast<int>(jb) + j0) / ps, off = (static_cast<int>(jb) + j0) % ps;
#pragma unroll
  for (int r = 0; r < V; ++r) {
    const int j = j0 + r * kStep;
    const bool in = jb + j < visible;
    const int64_t slot = in ? static_cast<int64_t>(pages[page]) * ps + off : 0;
    cp_async16(ks + j * RP + v * 8, pool + slot * DI + v * 8, in);  // zeros past visible
    for (off += kStep; off >= ps; off -= ps) ++page;
  }
  cp_async_commit();
  for (int h = tid; h < Hi; h += kKeysPerBlock) wsm[h] = p.w[t * p.w_s0 + h];
  cp_async_wait<0>();
  __syncthreads();

  // Fragments by ldmatrix: per 16-wide k step one x4 for the query heads' A fragment and two
  // for the warp's four key n-tiles (matrices: n-tile nt and nt + 1, k and k + 8 each), where
  // 32-bit shared loads took six instructions per mma and bound the kernel on the LSU.
  float part[4][2] = {};  // this thread's heads' share of keys n0 + 2c, n0 + 2c + 1 per n-tile
  const bf16* kb =
      ks + (warp * 32 + ((lane >> 4) & 1) * 8 + (lane & 7)) * RP + ((lane >> 3) & 1) * 8;
  for (int mt = 0; mt < Hi / 16; ++mt) {
    const bf16* qa = qs + (mt * 16) * RP;
    const float w0 = wsm[mt * 16 + g], w1 = wsm[mt * 16 + g + 8];
    float d[4][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < DI; k0 += 16) {
      uint32_t a0, a1, a2, a3, b[4][2];
      ldmatrix_a(a0, a1, a2, a3, qa, RP, k0, lane);
      ldmatrix_x4(b[0][0], b[0][1], b[1][0], b[1][1], kb + k0);
      ldmatrix_x4(b[2][0], b[2][1], b[3][0], b[3][1], kb + 16 * RP + k0);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) mma_bf16(d[nt], a0, a1, a2, a3, b[nt][0], b[nt][1]);
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      // d: S[g][2c], S[g][2c + 1], S[g + 8][2c], S[g + 8][2c + 1] of n-tile nt
      part[nt][0] += w0 * fmaxf(d[nt][0], 0.f) + w1 * fmaxf(d[nt][2], 0.f);
      part[nt][1] += w0 * fmaxf(d[nt][1], 0.f) + w1 * fmaxf(d[nt][3], 0.f);
    }
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = part[nt][e];
      v += __shfl_xor_sync(0xffffffffu, v, 4);  // sum over g: lanes c, c + 4, ..., c + 28
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      const int64_t j = jb + warp * 32 + nt * 8 + 2 * c + e;
      if (g == 0 && j < visible) p.scores[static_cast<int64_t>(blockIdx.y) * p.max_len + j] = v;
    }
}

struct WarpSync {
  __device__ void operator()() const { __syncwarp(); }
};

// The FP8 scores (the reference's fp8_index, CpuBackend::indexer_topk's FP8 path): each query
// head rotated by the Hadamard and quantized with its own ue8m0 scale q_s, then for every key
// row (e4m3 k8, scale k_s) score = k_s * sum_h fma(w[h] q_s[h], relu(q8_h . k8)), the dot in
// the CPU's 16-lane order. Products of e4m3 values are exact in fp32, so the scores are the
// CPU's bit for bit and the top-K selection, ties included, is too.
// grid (ceil(max_len / 128), Tc), 128 threads; dynamic smem q8 [Hi][DI] f32 + w q_s [Hi].
template <int DI>
__global__ void __launch_bounds__(kKeysPerBlock)
    indexer_scores_fp8_kernel(IndexerParams p, int64_t t0) {
  pdl_wait();
  extern __shared__ float sm[];
  float* qsm = sm;
  float* wsm = sm + p.Hi * DI;
  const int64_t t = t0 + blockIdx.y;
  const int64_t visible = static_cast<int64_t>(p.meta.token_pos[t]) + 1;
  if (visible <= p.K) return;
  const int64_t jb = static_cast<int64_t>(blockIdx.x) * kKeysPerBlock;
  if (jb >= visible) return;  // uniform over the block
  const bf16* q = static_cast<const bf16*>(p.q);
  for (int64_t i = threadIdx.x; i < p.Hi * DI; i += kKeysPerBlock) {
    const int64_t h = i / DI, d = i - h * DI;
    qsm[i] = to_f(q[t * p.q_s0 + h * p.q_s1 + d]);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int h = warp; h < p.Hi; h += kKeysPerBlock / 32) {  // a warp per head
    float* x = qsm + h * DI;
    hadamard_smem(x, DI, p.rot_scale, lane, 32, WarpSync{});
    float amax = 0.f;
    for (int i = lane; i < DI; i += 32) amax = fmaxf(amax, fabsf(x[i]));
    const float s = fp8_scale(warp_max(amax)), inv = 1.0f / s;
    for (int i = lane; i < DI; i += 32) {
      const uint8_t c = to_e4m3(x[i] * inv);
      x[i] = e4m3x2_to_f2(c).x;
    }
    if (lane == 0) wsm[h] = p.w[t * p.w_s0 + h] * s;
  }
  __syncthreads();
  const int64_t j = jb + threadIdx.x;
  if (j >= visible) return;
  const int64_t slot = paged_slot(p.meta, p.meta.token_seq[t], j);
  const uint8_t* krow = static_cast<const uint8_t*>(p.pool) + slot * (DI + 4);
  float kf[DI];
#pragma unroll
  for (int v = 0; v < DI / 4; ++v) {
    const uint32_t u = __ldg(reinterpret_cast<const uint32_t*>(krow) + v);
    const float2 a = e4m3x2_to_f2(static_cast<uint16_t>(u)),
                 b = e4m3x2_to_f2(static_cast<uint16_t>(u >> 16));
    kf[4 * v] = a.x, kf[4 * v + 1] = a.y, kf[4 * v + 2] = b.x, kf[4 * v + 3] = b.y;
  }
  const float k_s = __ldg(reinterpret_cast<const float*>(krow + DI));
  float acc = 0.f;
  for (int64_t h = 0; h < p.Hi; ++h) {
    const float* qh = qsm + h * DI;
    float a[16] = {};  // cpu::dot's lanes and pairwise reduction
#pragma unroll
    for (int i = 0; i < DI; ++i) a[i & 15] = fmaf(qh[i], kf[i], a[i & 15]);
#pragma unroll
    for (int s = 8; s >= 1; s >>= 1)
#pragma unroll
      for (int i = 0; i < s; ++i) a[i] += a[i + s];
    acc = fmaf(wsm[h], a[0] > 0.f ? a[0] : 0.f, acc);
  }
  p.scores[static_cast<int64_t>(blockIdx.y) * p.max_len + j] = k_s * acc;
}

// Order-preserving map of a float to uint32 (larger float -> larger key; -0 == +0).
__device__ __forceinline__ uint32_t order_key(float f) {
  if (f == 0.f) f = 0.f;
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The selection finds the K-th largest key T, then writes every position above T and the first
// `need` equal to it in ascending position order. T is found by narrowing a range of key values:
// each round takes the minimum and maximum of the keys in the range, splits [min, max] into at
// most 2,048 equal bins (a power-of-two width), counts the keys per bin with plain shared
// atomics (bins over the keys' own span spread them, where fixed high bits would pile them into
// a few bins) and keeps the bin of the need-th largest; at width 1 the range is T.
//
// Only keys near the top are narrowed. Samples give, in one round, a threshold tau a little below
// the K-th largest: 4,096 keys taken as 512 evenly spaced runs of 8 (one 32-byte sector each, so
// sampling reads 16 KB whatever the row's length). One pass over the row keeps the keys >= tau
// with their positions in shared memory (a ballot per key, one atomic per warp and 16 keys), and
// the rounds run over those; a round whose bin is taken whole ends the narrowing early. The
// positions of the selected candidates go into a bitmap of the row, and one scan over the
// bitmap's words writes them in position order, so the row is read once after the samples.
//
// When fewer than K or more than kCandidates keys reach tau (a tie-heavy row, an unlucky sample),
// the rounds run over the row instead; then, and for rows too long for the bitmap, two ordered
// sweeps over the row write the output. Either way T is exact.
constexpr int kRadixBins = 2048;
constexpr int kSamples = 4096;
constexpr int kSampleRun = 8;  // consecutive keys per sample run: one 32-byte sector
constexpr int kCandidates = 8192;
constexpr int kRowBatch = 16;  // loads in flight per thread in a pass over the row
// Rows up to this many keys write their output through the bitmap (two bits per position:
// 64 KB of shared memory at the limit); longer ones through the row sweeps.
constexpr int kBitmapKeys = 262144;

struct SelectShared {
  // Two histograms (and key ranges): a round counts into one while clearing the other for the
  // next, so a round needs no barrier of its own before it counts.
  unsigned hist[2][kRadixBins];
  uint32_t keys[kCandidates];  // the samples, then the keys >= tau
  int32_t pos[kCandidates];    // the candidates' positions
  int red[32], warp_gt[32], warp_eq[32];
  int bin, above, bin_count, count;
  unsigned kmin[2], kmax[2];
};

// Dynamic shared memory of the selection kernel for rows of up to max_len keys: SelectShared,
// then the two bitmaps (above T, equal to T) when the bitmap output applies.
size_t select_smem_bytes(int64_t max_len) {
  const int64_t words = max_len <= kBitmapKeys ? (max_len + 31) / 32 : 0;
  return sizeof(SelectShared) + 2 * static_cast<size_t>(words) * sizeof(uint32_t);
}

// The largest bin d whose suffix count (keys in bins >= d) reaches need, i.e. the bin of the
// need-th largest key, the count of keys in the bins above it and in it.
__device__ void threshold_bin(SelectShared& sh, const unsigned* hist, int need) {
  constexpr int per = kRadixBins / kSelectThreads;  // bins a thread sums, highest first
  const int hi = kRadixBins - 1 - static_cast<int>(threadIdx.x) * per;
  int local = 0;
#pragma unroll
  for (int k = 0; k < per; ++k) local += static_cast<int>(hist[hi - k]);
  int total = 0;
  int above = block_exclusive_scan(local, sh.red, &total);
#pragma unroll
  for (int k = 0; k < per; ++k) {
    const int c = static_cast<int>(hist[hi - k]);
    if (above < need && above + c >= need) sh.bin = hi - k, sh.above = above, sh.bin_count = c;
    above += c;
  }
  __syncthreads();
}

// Round `round` of the narrowing: narrows [lo, hi] to the bin holding the need-th largest key
// that visit(f) passes to f among those in [lo, hi], and takes the keys above that bin off need.
// With `tighten` the bins span the keys' own minimum and maximum in [lo, hi] (one more pass and
// barrier); without, [lo, hi] itself. Returns whether the bin is taken whole (need equals its
// count): then every key >= the new lo is selected. Expects hist[round & 1] zero and
// kmin/kmax[round & 1] reset, and leaves the other buffer so for the next round.
template <class Visit>
__device__ bool narrow(SelectShared& sh, int round, const Visit& visit, bool tighten, uint32_t& lo,
                       uint32_t& hi, int& need) {
  const int b = round & 1;
  uint32_t base = lo, top = hi;
  if (tighten) {
    uint32_t mn = 0xffffffffu, mx = 0u;
    const uint32_t a = lo, c = hi;
    visit([&](uint32_t u) {
      if (u >= a && u <= c) mn = min(mn, u), mx = max(mx, u);
    });
    mn = __reduce_min_sync(0xffffffffu, mn);
    mx = __reduce_max_sync(0xffffffffu, mx);
    if ((threadIdx.x & 31) == 0) atomicMin(&sh.kmin[b], mn), atomicMax(&sh.kmax[b], mx);
    __syncthreads();
    base = sh.kmin[b], top = sh.kmax[b];
  }
  const uint32_t span = top - base;
  const int shift = span < static_cast<uint32_t>(kRadixBins) ? 0 : 32 - __clz(span) - 11;
  unsigned* hist = sh.hist[b];
  visit([&](uint32_t u) {
    if (u >= base && u <= top) atomicAdd(&hist[(u - base) >> shift], 1u);
  });
  for (int i = threadIdx.x; i < kRadixBins; i += kSelectThreads) sh.hist[b ^ 1][i] = 0;
  if (threadIdx.x == 0) sh.kmin[b ^ 1] = 0xffffffffu, sh.kmax[b ^ 1] = 0u;
  __syncthreads();
  threshold_bin(sh, hist, need);
  const uint64_t first = base + (static_cast<uint64_t>(sh.bin) << shift);
  lo = static_cast<uint32_t>(first);
  const uint64_t last = first + (uint64_t{1} << shift) - 1;
  hi = last < top ? static_cast<uint32_t>(last) : top;
  need -= sh.above;
  return need == sh.bin_count;
}

// The keys of positions base + k * kSelectThreads + threadIdx.x for k < kRowBatch (0 from
// visible on), every load issued before any key is used.
__device__ __forceinline__ void load_row_batch(const float* sc, int visible, int base,
                                               uint32_t (&u)[kRowBatch]) {
#pragma unroll
  for (int k = 0; k < kRowBatch; ++k) {
    const int j = base + k * kSelectThreads + static_cast<int>(threadIdx.x);
    u[k] = j < visible ? order_key(__ldg(sc + j)) : 0u;
  }
}

__device__ __forceinline__ int warp_exclusive_scan(int v) {
  const int lane = threadIdx.x & 31;
  int x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  return x - v;
}

// Appends this lane's keys u[e] >= tau (at positions position(e) < visible) and their positions
// to the candidates: a ballot per key, one shared atomic per warp reserves the batch's slots.
// Keys past kCandidates are counted, not kept (the caller then runs over the row instead).
template <int N, class Position>
__device__ __forceinline__ void keep_candidates(SelectShared& sh, const uint32_t (&u)[N],
                                                uint32_t tau, int visible,
                                                const Position& position) {
  const int lane = threadIdx.x & 31;
  const unsigned lower = (1u << lane) - 1u;
  // The ballots are taken twice (count, then place) rather than kept: N more registers would
  // spill at 1,024 threads.
  int batch = 0;
#pragma unroll
  for (int e = 0; e < N; ++e)
    batch += __popc(__ballot_sync(0xffffffffu, position(e) < visible && u[e] >= tau));
  if (batch == 0) return;  // uniform over the warp
  int at = 0;
  if (lane == 0) at = atomicAdd(&sh.count, batch);
  at = __shfl_sync(0xffffffffu, at, 0);
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const bool keep = position(e) < visible && u[e] >= tau;
    const unsigned m = __ballot_sync(0xffffffffu, keep);
    const int i = at + __popc(m & lower);
    if (keep && i < kCandidates) sh.keys[i] = u[e], sh.pos[i] = position(e);
    at += __popc(m);
  }
}

// The output by two sweeps over the row: every key above T and the first `need` equal to it,
// in position order. Warp w owns the positions [w * chunk, (w + 1) * chunk): the first sweep
// counts each warp's keys above and equal to T, the second writes them at the offsets those
// counts give.
__device__ void write_by_row_sweeps(SelectShared& sh, const float* sc, int visible, uint32_t T,
                                    int need, int32_t* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned lower = (1u << lane) - 1u;
  const int chunk = (visible + kSelectThreads - 1) / kSelectThreads * 32;  // a multiple of 32
  const int begin = warp * chunk, end = min(begin + chunk, visible);
  // Both sweeps load kRowBatch keys per lane before using any (positions j0 + 32 k + lane).
  auto load_batch = [&](int j0, uint32_t* u) {
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int j = j0 + 32 * k + lane;
      u[k] = j < end ? order_key(__ldg(sc + j)) : 0u;
    }
  };
  int n_gt = 0, n_eq = 0;
  for (int j0 = begin; j0 < end; j0 += 32 * kRowBatch) {
    uint32_t u[kRowBatch];
    load_batch(j0, u);
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const bool in = j0 + 32 * k + lane < end;
      n_gt += __popc(__ballot_sync(0xffffffffu, in && u[k] > T));
      n_eq += __popc(__ballot_sync(0xffffffffu, in && u[k] == T));
    }
  }
  if (lane == 0) sh.warp_gt[warp] = n_gt, sh.warp_eq[warp] = n_eq;
  __syncthreads();
  if (warp == 0) {
    const int eq = sh.warp_eq[lane], eq_before = warp_exclusive_scan(eq);
    const int take = sh.warp_gt[lane] + min(max(need - eq_before, 0), eq);
    const int out_before = warp_exclusive_scan(take);
    sh.warp_eq[lane] = eq_before;
    sh.warp_gt[lane] = out_before;
  }
  __syncthreads();
  int eq_rank = sh.warp_eq[warp], o = sh.warp_gt[warp];
  for (int j0 = begin; j0 < end; j0 += 32 * kRowBatch) {
    uint32_t u[kRowBatch];
    load_batch(j0, u);
#pragma unroll
    for (int k = 0; k < kRowBatch; ++k) {
      const int j = j0 + 32 * k + lane;
      const bool gt = j < end && u[k] > T, eq = j < end && u[k] == T;
      const unsigned eqm = __ballot_sync(0xffffffffu, eq);
      const bool sel = gt || (eq && eq_rank + __popc(eqm & lower) < need);
      const unsigned selm = __ballot_sync(0xffffffffu, sel);
      if (sel) out[o + __popc(selm & lower)] = j;
      o += __popc(selm);
      eq_rank += __popc(eqm);
    }
  }
}

// The output through the bitmaps: gt_bits holds the positions of the selected keys above the
// tie key, eq_bits those equal to it (the first `need` of them are selected). Thread i owns the
// words [i * per, (i + 1) * per); one block scan gives its first tie rank and output offset.
__device__ void write_by_bitmap(SelectShared& sh, const uint32_t* gt_bits, const uint32_t* eq_bits,
                                int words, int need, int32_t* out) {
  const int per = (words + kSelectThreads - 1) / kSelectThreads;
  const int w0 = static_cast<int>(threadIdx.x) * per, w1 = min(w0 + per, words);
  int n_gt = 0, n_eq = 0;
  for (int w = w0; w < w1; ++w) n_gt += __popc(gt_bits[w]), n_eq += __popc(eq_bits[w]);
  // One scan of both counts, 16 bits each: they count candidates (at most kCandidates).
  static_assert(kCandidates < 65536);
  int total = 0;
  const int before = block_exclusive_scan(n_eq << 16 | n_gt, sh.red, &total);
  int eq_rank = before >> 16;
  int o = (before & 0xffff) + min(eq_rank, need);  // ties are taken in position order
  for (int w = w0; w < w1; ++w) {
    uint32_t e = eq_bits[w];
    const int left = need - eq_rank;  // ties still to take, in position order
    eq_rank += __popc(e);
    if (left <= 0) {
      e = 0u;
    } else {
      for (int drop = __popc(e) - left; drop > 0; --drop) e &= ~(0x80000000u >> __clz(e));
    }
    for (uint32_t m = gt_bits[w] | e; m != 0u; m &= m - 1u) out[o++] = w * 32 + __ffs(m) - 1;
  }
}

// grid (Tc), 1024 threads, dynamic smem select_smem_bytes(max_len).
__global__ void __launch_bounds__(kSelectThreads)
    indexer_select_kernel(IndexerParams p, int64_t t0) {
  pdl_wait();
  extern __shared__ __align__(16) unsigned char select_smem[];
  SelectShared& sh = *reinterpret_cast<SelectShared*>(select_smem);
  const int64_t t = t0 + blockIdx.x;
  const int visible = p.meta.token_pos[t] + 1;
  const int K = static_cast<int>(p.K);
  int32_t* out = p.out + t * p.K;
  if (visible <= K) {
    for (int j = threadIdx.x; j < K; j += kSelectThreads) out[j] = j < visible ? j : -1;
    return;
  }
  const float* sc = p.scores + static_cast<int64_t>(blockIdx.x) * p.max_len;
  const bool bitmap = p.max_len <= kBitmapKeys;
  const int words = (visible + 31) / 32;
  uint32_t* gt_bits = reinterpret_cast<uint32_t*>(select_smem + sizeof(SelectShared));
  uint32_t* eq_bits = gt_bits + words;
  // Visitors: each thread's share of the keys in shared memory, or of the row's.
  SelectShared* shp = &sh;
  auto shared_keys = [shp](int n) {
    return [shp, n](auto&& f) {
      for (int i = threadIdx.x; i < n; i += kSelectThreads) f(shp->keys[i]);
    };
  };
  auto row_keys = [sc, visible](auto&& f) {
    for (int base = 0; base < visible; base += kSelectThreads * kRowBatch) {
      uint32_t u[kRowBatch];
      load_row_batch(sc, visible, base, u);
#pragma unroll
      for (int k = 0; k < kRowBatch; ++k)
        if (base + k * kSelectThreads + static_cast<int>(threadIdx.x) < visible) f(u[k]);
    }
  };

  // tau: the lower edge of the bin of the r-th largest of S samples, r chosen so that ~1.5 K
  // keys of the row reach it. Sample i is key i % 8 of run i / 8; the runs start at evenly
  // spaced multiples of 8, the last one ending within 8 keys of the row's end.
  const int S = min(kSamples, visible);
  constexpr int kRuns = kSamples / kSampleRun;
  for (int i = threadIdx.x; i < S; i += kSelectThreads) {
    const int run = i / kSampleRun;
    const int start =
        S < kSamples
            ? run * kSampleRun
            : static_cast<int>(static_cast<int64_t>(run) * (visible - kSampleRun) / (kRuns - 1)) &
                  ~(kSampleRun - 1);
    sh.keys[i] = order_key(sc[start + i % kSampleRun]);
  }
  if (threadIdx.x == 0) sh.count = 0, sh.kmin[0] = 0xffffffffu, sh.kmax[0] = 0u;
  for (int i = threadIdx.x; i < kRadixBins; i += kSelectThreads) sh.hist[0][i] = 0;
  if (bitmap)
    for (int i = threadIdx.x; i < 2 * words; i += kSelectThreads) gt_bits[i] = 0u;
  __syncthreads();
  const int r = min(S, static_cast<int>(static_cast<int64_t>(3) * K * S / (2 * visible)) + 8);
  uint32_t tau = 0u, tau_hi = 0xffffffffu;
  int r_left = r, round = 0;
  narrow(sh, round++, shared_keys(S), true, tau, tau_hi, r_left);
  // The keys >= tau and their positions, in no particular order (keep_candidates). Rows whose
  // start is 16-byte aligned (a stride of a multiple of 4, as the backend allocates them) are
  // read 4 keys per load: 32 KB per batch of 8 loads a thread in flight, a 32k row in one batch.
  if ((reinterpret_cast<uintptr_t>(sc) & 15u) == 0 && (p.max_len & 3) == 0) {
    constexpr int kVecBatch = 8;  // 6 (no halves): 1 us faster at 8k, 2 us slower at 32k
    for (int base = 0; base < visible; base += kSelectThreads * kVecBatch * 4) {
      float4 v[kVecBatch];
#pragma unroll
      for (int k = 0; k < kVecBatch; ++k) {  // visible <= max_len, a multiple of 4: in bounds
        const int j = base + (k * kSelectThreads + static_cast<int>(threadIdx.x)) * 4;
        v[k] = j < visible ? __ldg(reinterpret_cast<const float4*>(sc + j))
                           : make_float4(0.f, 0.f, 0.f, 0.f);
      }
      // Placed in two halves (two atomics a warp): 32 keys' worth of registers at once spills.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t u[2 * kVecBatch];
#pragma unroll
        for (int k = 0; k < kVecBatch / 2; ++k) {
          const float4 f = v[h * kVecBatch / 2 + k];
          u[4 * k] = order_key(f.x), u[4 * k + 1] = order_key(f.y);
          u[4 * k + 2] = order_key(f.z), u[4 * k + 3] = order_key(f.w);
        }
        keep_candidates(sh, u, tau, visible, [&](int e) {
          const int k = h * kVecBatch / 2 + e / 4;
          return base + (k * kSelectThreads + static_cast<int>(threadIdx.x)) * 4 + e % 4;
        });
      }
    }
  } else {
    for (int base = 0; base < visible; base += kSelectThreads * kRowBatch) {
      uint32_t u[kRowBatch];
      load_row_batch(sc, visible, base, u);
      keep_candidates(sh, u, tau, visible, [&](int e) {
        return base + e * kSelectThreads + static_cast<int>(threadIdx.x);
      });
    }
  }
  __syncthreads();
  const int n = sh.count;
  int need = K;
  uint32_t T = 0u, T_hi = 0xffffffffu;
  if (n >= K && n <= kCandidates) {
    const auto candidates = shared_keys(n);
    // The first round spans the candidates' own range; the next ones the bin before them.
    bool whole = narrow(sh, round, candidates, true, T, T_hi, need);
    while (!whole && T != T_hi) whole = narrow(sh, ++round, candidates, false, T, T_hi, need);
    // A bin taken whole selects every key >= T, i.e. every key above T - 1 and none equal to
    // it (T > 0 here: were every key >= 0 selected, the row would have no more than K keys).
    if (whole) T -= 1u, need = 0;
    if (bitmap) {
      for (int i = threadIdx.x; i < n; i += kSelectThreads) {
        const uint32_t u = sh.keys[i];
        const int j = sh.pos[i];
        if (u > T)
          atomicOr(&gt_bits[j >> 5], 1u << (j & 31));
        else if (u == T)
          atomicOr(&eq_bits[j >> 5], 1u << (j & 31));
      }
      __syncthreads();
      write_by_bitmap(sh, gt_bits, eq_bits, words, need, out);
      return;
    }
  } else {
    do narrow(sh, round++, row_keys, true, T, T_hi, need);
    while (T != T_hi);
  }
  write_by_row_sweeps(sh, sc, visible, T, need, out);
}

template <int DI>
void launch_scores(const IndexerParams& p, int64_t t0, int64_t Tc, cudaStream_t s) {
  if (p.kv_fp8) {
    const size_t smem = (p.Hi * DI + p.Hi) * sizeof(float);
    opt_in_smem<indexer_scores_fp8_kernel<DI>>(smem);
    const dim3 g(cdiv(p.max_len, kKeysPerBlock), static_cast<unsigned>(Tc));
    launch(indexer_scores_fp8_kernel<DI>, g, kKeysPerBlock, smem, s, p, t0);
    return;
  }
  if (p.tensor_cores && p.Hi % 16 == 0) {
    const size_t smem = (p.Hi + kKeysPerBlock) * (DI + 8) * 2 + p.Hi * sizeof(float);
    opt_in_smem<indexer_scores_mma_kernel<DI>>(smem);
    const dim3 g(cdiv(p.max_len, kKeysPerBlock), static_cast<unsigned>(Tc));
    launch(indexer_scores_mma_kernel<DI>, g, kKeysPerBlock, smem, s, p, t0);
    return;
  }
  const size_t smem = (p.Hi * DI + p.Hi) * sizeof(float);
  opt_in_smem<indexer_scores_kernel<DI>>(smem);
  const dim3 g(cdiv(p.max_len, kKeysPerBlock), static_cast<unsigned>(Tc));
  launch(indexer_scores_kernel<DI>, g, kKeysPerBlock, smem, s, p, t0);
}

}  // namespace

bool indexer_supports_head_dim(int64_t Di) {
  return Di == 16 || Di == 32 || Di == 64 || Di == 128;
}

void indexer_topk(const IndexerParams& p, int64_t t0, int64_t Tc, cudaStream_t s) {
  if (Tc == 0) return;
  if (p.max_len > p.K) {  // otherwise every token selects all it sees
    switch (p.Di) {
      case 16:
        launch_scores<16>(p, t0, Tc, s);
        break;
      case 32:
        launch_scores<32>(p, t0, Tc, s);
        break;
      case 64:
        launch_scores<64>(p, t0, Tc, s);
        break;
      default:
        launch_scores<128>(p, t0, Tc, s);
        break;
    }
  }
  indexer_select(p, t0, Tc, s);
}

void indexer_select(const IndexerParams& p, int64_t t0, int64_t Tc, cudaStream_t s) {
  if (Tc == 0) return;
  const size_t smem = select_smem_bytes(p.max_len);
  opt_in_smem<indexer_select_kernel>(smem);
  launch(indexer_select_kernel, static_cast<unsigned>(Tc), kSelectThreads, smem, s, p, t0);
}

}  // namespace tandem::cuda::k
