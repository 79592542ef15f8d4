// Sampling with temperature, top-k and top-p (Backend::sample), one CTA per row, no sort.
//
//   1. One pass: the row's max logit and an (approximate, fp64) softmax normaliser S. Every
//      token's weight is then q_v = round(expf((l_v - max) / temperature) * 2^62 / S), a 64-bit
//      fixed-point probability; every mass below is an exact integer sum of these, so results
//      do not depend on the reduction order (deterministic, and as good as exact next to the
//      oracle's fp32 sums).
//   2. top-k: radix select (11 + 11 + 10 bits, shared-memory count histograms) of the k-th
//      largest logit over order-preserving keys of the fp32 bits. Ranking by logit is ranking by
//      probability (the softmax is monotone) without rounding ties; equal logits are taken
//      toward the lower index, as the CPU's stable sort does.
//   3. top-p: the same radix descent over mass histograms finds the largest key whose kept mass
//      at or above it reaches top_p * (kept mass): the smallest most-probable prefix.
//   4. Inverse CDF in vocabulary order: the first kept token whose cumulative weight exceeds
//      u * (kept mass), found by warp-segment totals and one block scan inside the segment.
// Each step re-reads the row from global memory (L2); nothing is allocated, nothing synchronises
// with the host: graph-capturable. Rows with temperature <= 0 or top_k == 1 take the argmax.
#include <cfloat>

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

namespace {

using u64 = unsigned long long;

constexpr int kThreads = 512;  // 64 registers without spills; two CTAs per SM
constexpr int kWarps = kThreads / 32;
constexpr int kBuckets = 2048;             // 11-bit digits; the last pass uses 10 bits
constexpr int kPer = kBuckets / kThreads;  // histogram buckets per thread in select_desc

struct SampleSmem {
  u64 mass[kBuckets];
  unsigned cnt[kBuckets];
  u64 red[kWarps];
  double redd[kWarps];
  float redf[kWarps];
  int redi[kWarps];
  int sel_digit;
  u64 sel_above;
  int result;
};

__device__ __forceinline__ u64 warp_sum_u64(u64 v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ double warp_sum_d(double v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block reductions over kThreads threads; every thread gets the result (fixed order: the same
// value in every thread and on every run). Contain barriers.
__device__ __forceinline__ double block_sum_d(double v, double* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum_d(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  double r = 0;
  for (int i = 0; i < kWarps; ++i) r += red[i];
  return r;
}

__device__ __forceinline__ float block_max_f(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int i = 1; i < kWarps; ++i) r = fmaxf(r, red[i]);
  return r;
}

__device__ __forceinline__ int block_max_i(int v, int* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  int r = red[0];
  for (int i = 1; i < kWarps; ++i) r = max(r, red[i]);
  return r;
}

// Exclusive prefix sum of v in thread order; *total gets the block's sum. Contains barriers.
__device__ __forceinline__ u64 block_excl_scan_u64(u64 v, u64* red, u64* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  u64 x = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const u64 y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  __syncthreads();
  if (lane == 31) red[warp] = x;
  __syncthreads();
  u64 before = 0, all = 0;
  for (int i = 0; i < kWarps; ++i) {
    if (i < warp) before += red[i];
    all += red[i];
  }
  *total = all;
  return before + x - v;
}

// Order-preserving unsigned key of a float (larger float, larger key; -0 is +0).
__device__ __forceinline__ uint32_t order_key(float x) {
  uint32_t u = __float_as_uint(x);
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// A prefix of the order (key descending, index ascending): tokens with a larger key, and those
// with exactly `key` up to index `idx`.
struct Cut {
  uint32_t key;
  int idx;
  __device__ __forceinline__ bool keeps(uint32_t k, int v) const {
    return k > key || (k == key && v <= idx);
  }
};

// Radix pass geometry: 11, 11 and 10 bits from the top.
__device__ __forceinline__ int pass_shift(int p) {
  return p == 0 ? 21 : p == 1 ? 10 : 0;
}
__device__ __forceinline__ int pass_buckets(int p) {
  return p < 2 ? 2048 : 1024;
}

// Over buckets nb-1 down to 0 of a histogram (get(b) >= 0), the first bucket at which the
// running sum reaches need_of(total). Returns it; *above: the sum of the buckets above it.
// need_of must give the same value in every thread and at least 1 (else bucket 0, above 0).
template <class Get, class Need>
__device__ int select_desc(int nb, Get get, Need need_of, SampleSmem& sm, u64* above) {
  // Thread i owns the kPer buckets nb-1-kPer*i, nb-2-kPer*i, ... (descending).
  const int top = nb - 1 - kPer * static_cast<int>(threadIdx.x);
  u64 a[kPer], mine = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    a[j] = top - j >= 0 ? get(top - j) : 0;
    mine += a[j];
  }
  if (threadIdx.x == 0) sm.sel_digit = 0, sm.sel_above = 0;
  u64 total;
  u64 run = block_excl_scan_u64(mine, sm.red, &total);
  const u64 need = need_of(total);
  if (run < need && run + mine >= need) {  // the crossing bucket is one of mine
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      if (run + a[j] >= need) {
        sm.sel_digit = top - j;
        sm.sel_above = run;
        break;
      }
      run += a[j];
    }
  }
  __syncthreads();
  const int d = sm.sel_digit;
  *above = sm.sel_above;
  __syncthreads();
  return d;
}

// The first v in [0, V) at which the inclusive prefix sum of f (in index order) exceeds
// t = thresh(total of f); -1 when the total does not. f must be a pure function of v.
// Warp w sums the contiguous segment w of the row (coalesced), the crossing segment is found in
// fixed order, then the block splits that segment into per-thread chunks and scans them.
template <class F, class Th>
__device__ int find_first(int V, F f, Th thresh, SampleSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int seg = (V + kWarps - 1) / kWarps;
  {
    const int s0 = warp * seg, s1 = min(V, s0 + seg);
    u64 part = 0;
#pragma unroll 4
    for (int v = s0 + lane; v < s1; v += 32) part += f(v);
    part = warp_sum_u64(part);
    __syncthreads();
    if (lane == 0) sm.red[warp] = part;
    __syncthreads();
  }
  u64 total = 0;
  for (int i = 0; i < kWarps; ++i) total += sm.red[i];
  const u64 t = thresh(total);
  if (total <= t) return -1;  // the same in every thread
  int w = 0;
  u64 base = 0;
  for (; w < kWarps - 1; ++w) {
    if (base + sm.red[w] > t) break;
    base += sm.red[w];
  }
  const int a = w * seg, b = min(V, a + seg);
  const int c = (b - a + kThreads - 1) / kThreads;
  const int c0 = a + static_cast<int>(threadIdx.x) * c, c1 = min(b, c0 + c);
  u64 mine = 0;
  for (int v = c0; v < c1; ++v) mine += f(v);
  if (threadIdx.x == 0) sm.result = -1;
  u64 seg_total;
  const u64 start = base + block_excl_scan_u64(mine, sm.red, &seg_total);
  if (start <= t && t < start + mine) {
    u64 acc = start;
    for (int v = c0; v < c1; ++v) {
      acc += f(v);
      if (acc > t) {
        sm.result = v;
        break;
      }
    }
  }
  __syncthreads();
  const int r = sm.result;
  __syncthreads();
  return r;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, int64_t ls, int V, const float* temperature,
                  const int32_t* top_k, const float* top_p, const float* u, int32_t* out) {
  pdl_wait();
  __shared__ SampleSmem sm;
  const int row_id = blockIdx.x;
  const float* __restrict__ row = logits + row_id * ls;
  const float temp = temperature[row_id];
  const int tk = top_k[row_id];
  const float tp = top_p[row_id];
  const float uu = u[row_id];
  const int tid = threadIdx.x;

  if (temp <= 0.0f || tk == 1) {  // greedy: argmax, lowest index on ties
    float bv = -INFINITY;
    int bi = 0;
#pragma unroll 4
    for (int v = tid; v < V; v += kThreads) {
      const float x = row[v];
      if (x > bv) bv = x, bi = v;
    }
    auto better = [](float va, int ia, float vb, int ib) {
      return va > vb || (va == vb && ia < ib);
    };
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (better(ov, oi, bv, bi)) bv = ov, bi = oi;
    }
    const int lane = tid & 31, warp = tid >> 5;
    if (lane == 0) sm.redf[warp] = bv, sm.redi[warp] = bi;
    __syncthreads();
    if (tid == 0) {
      for (int w = 1; w < kWarps; ++w)
        if (better(sm.redf[w], sm.redi[w], bv, bi)) bv = sm.redf[w], bi = sm.redi[w];
      out[row_id] = bi;
    }
    return;
  }

  // 1. Max and normaliser in one pass (online rescaling per thread).
  float m = -INFINITY;
  double s = 0;
#pragma unroll 4
  for (int v = tid; v < V; v += kThreads) {
    const float x = row[v];
    if (x > m) {
      s = s * static_cast<double>(expf(__fdiv_rn(__fsub_rn(m, x), temp))) + 1.0;
      m = x;
    } else if (x > -INFINITY) {
      s += static_cast<double>(expf(__fdiv_rn(__fsub_rn(x, m), temp)));
    }
  }
  const float mx = block_max_f(m, sm.redf);
  const double S = block_sum_d(
      m > -INFINITY ? s * static_cast<double>(expf(__fdiv_rn(__fsub_rn(m, mx), temp))) : 0.0,
      sm.redd);
  // Fixed-point weights: the top token gets 2^62 / S, the row about 2^62 (S is within ~1e-6 of
  // the sum of the weights it normalises), far from overflowing 64 bits.
  const double scale = S > 0.0 ? 4611686018427387904.0 / S : 0.0;
  auto q = [&](float x) -> u64 {
    const float e = expf(__fdiv_rn(__fsub_rn(x, mx), temp));
    return __double2ull_rn(__dmul_rn(static_cast<double>(e), scale));
  };

  // 2. top-k: the k-th largest key (with multiplicity), then how many of its ties to keep.
  Cut kc{0u, V};  // keeps everything
  if (tk > 1 && tk < V) {
    uint32_t prefix = 0, mask = 0;
    u64 remaining = static_cast<u64>(tk);
    unsigned ties = 0;
    for (int p = 0; p < 3; ++p) {
      const int shift = pass_shift(p), nb = pass_buckets(p);
      __syncthreads();
      for (int b = tid; b < nb; b += kThreads) sm.cnt[b] = 0;
      __syncthreads();
#pragma unroll 4
      for (int v = tid; v < V; v += kThreads) {
        const uint32_t key = order_key(row[v]);
        if ((key & mask) == prefix) atomicAdd(&sm.cnt[(key >> shift) & (nb - 1)], 1u);
      }
      __syncthreads();
      u64 above;
      const int d = select_desc(
          nb, [&](int b) { return static_cast<u64>(sm.cnt[b]); }, [&](u64) { return remaining; },
          sm, &above);
      remaining -= above;
      prefix |= static_cast<uint32_t>(d) << shift;
      mask |= static_cast<uint32_t>(nb - 1) << shift;
      ties = sm.cnt[d];
    }
    kc.key = prefix;
    if (remaining < ties) {  // only the first `remaining` equal logits, in index order
      const int i = find_first(
          V, [&](int v) -> u64 { return order_key(row[v]) == prefix ? 1ull : 0ull; },
          [&](u64) { return remaining - 1; }, sm);
      kc.idx = i < 0 ? V : i;
    }
  }

  // 3. top-p: the smallest most-probable prefix of the kept set whose mass reaches
  //    top_p * (kept mass).
  Cut pc{0u, V};
  if (tp < 1.0f) {
    uint32_t prefix = 0, mask = 0;
    u64 above = 0, target = 1;
    unsigned ties = 0;
    for (int p = 0; p < 3; ++p) {
      const int shift = pass_shift(p), nb = pass_buckets(p);
      __syncthreads();
      for (int b = tid; b < nb; b += kThreads) sm.mass[b] = 0, sm.cnt[b] = 0;
      __syncthreads();
#pragma unroll 4
      for (int v = tid; v < V; v += kThreads) {
        const float x = row[v];
        const uint32_t key = order_key(x);
        if ((key & mask) == prefix && kc.keeps(key, v)) {
          const int d = (key >> shift) & (nb - 1);
          atomicAdd(&sm.mass[d], q(x));
          atomicAdd(&sm.cnt[d], 1u);
        }
      }
      __syncthreads();
      u64 a;
      const int d = select_desc(
          nb, [&](int b) { return sm.mass[b]; },
          [&](u64 total) {
            if (p == 0) {  // total: the mass kept by top-k
              const double tt = ceil(static_cast<double>(tp) * static_cast<double>(total));
              target = tt <= 1.0                          ? 1ull
                       : tt >= static_cast<double>(total) ? total
                                                          : static_cast<u64>(tt);
              if (target < 1) target = 1;
            }
            return target - above;
          },
          sm, &a);
      above += a;
      prefix |= static_cast<uint32_t>(d) << shift;
      mask |= static_cast<uint32_t>(nb - 1) << shift;
      ties = sm.cnt[d];
    }
    pc.key = prefix;
    if (ties > 1) {  // equal logits: in index order until the mass reaches the target
      const u64 need = target - above;
      const int i = find_first(
          V,
          [&](int v) -> u64 {
            const float x = row[v];
            const uint32_t key = order_key(x);
            return key == prefix && kc.keeps(key, v) ? q(x) : 0ull;
          },
          [&](u64) { return need - 1; }, sm);
      pc.idx = i < 0 ? V : i;
    }
  }

  // 4. Inverse CDF over the kept set in vocabulary order. u > 0: the first kept token whose
  //    cumulative weight exceeds u * (kept mass). u == 0: the first kept token whose fp32
  //    probability is not zero, however small (below the fixed point's 2^-62). u < 0: the first
  //    kept token. NaN or u >= 1: none, so the last kept token (all as the CPU's loop does).
  const int mode = uu > 0.0f ? 0 : uu == 0.0f ? 1 : uu < 0.0f ? 2 : 3;
  const float Sf = static_cast<float>(S);
  int pick = find_first(
      V,
      [&](int v) -> u64 {
        const float x = row[v];
        const uint32_t key = order_key(x);
        if (!kc.keeps(key, v) || !pc.keeps(key, v)) return 0ull;
        if (mode == 0) return q(x);
        if (mode == 1)
          return __fdiv_rn(expf(__fdiv_rn(__fsub_rn(x, mx), temp)), Sf) > 0.0f ? 1ull : 0ull;
        return 1ull;
      },
      [&](u64 total) -> u64 {
        if (mode == 3) return total;
        if (mode != 0) return 0ull;
        const double tt = floor(static_cast<double>(uu) * static_cast<double>(total));
        return tt <= 0.0 ? 0ull : tt >= static_cast<double>(total) ? total : static_cast<u64>(tt);
      },
      sm);
  if (pick < 0) {  // nothing exceeded: the last kept token
    int last = -1;
#pragma unroll 4
    for (int v = tid; v < V; v += kThreads) {
      const uint32_t key = order_key(row[v]);
      if (kc.keeps(key, v) && pc.keeps(key, v)) last = v;
    }
    pick = max(block_max_i(last, sm.redi), 0);
  }
  if (tid == 0) out[row_id] = pick;
}

}  // namespace

void sample(const float* logits, int64_t ls, int64_t T, int64_t V, const float* temperature,
            const int32_t* top_k, const float* top_p, const float* u, int32_t* out,
            cudaStream_t s) {
  if (T == 0 || V == 0) return;
  launch(sample_kernel, static_cast<unsigned>(T), kThreads, 0, s, logits, ls, static_cast<int>(V),
         temperature, top_k, top_p, u, out);
}

}  // namespace tandem::cuda::k
