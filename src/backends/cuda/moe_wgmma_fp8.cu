// The routed experts' two GEMMs at prefill sizes on FP8 block weights (128 x 128 e4m3 blocks with
// f32 scales, activations e4m3 with one f32 scale per token and 128 channels): the grouped expert
// GEMM of moe_wgmma.cu on 8-bit warpgroup MMA. No host sync (the tiles are listed on the device
// from the expert counts), so, unlike one block-scaled cuBLASLt GEMM per expert behind a copy of
// the counts to the host, it runs inside CUDA graphs and launches two kernels for all experts.
//
// What differs from the bf16 kernel, and why:
// - A stage is one 128-wide K block (one 128-byte swizzle atom of e4m3, as 64 bf16 were): the
//   weight halves (2 x 64 rows), the tile's token chunks (64 rows each) and a strip of the tile's
//   128 token scales of that K block (from a 16-byte boundary: 132 of them), which the producer
//   copies by TMA from the transposed scales [K blocks, tokens].
// - The scales change with every K block, so each consumer warpgroup multiplies a K block into a
//   fresh accumulator (four m64nNk32, the products summed in the tensor core's accumulator,
//   coarser than fp32 on Hopper: docs/quantization.md) and adds it into the running one scaled
//   by weight scale x token scale: acc += part * (sw * sx). That needs two accumulators, so a
//   tile takes at most 128 tokens (N <= 128: 64 + 64 registers), where the bf16 kernel takes
//   256. An expert with more rows has several token tiles; the
//   blocks of one (expert, weight tile) over its token tiles are consecutive, so the second
//   read of the weights comes from L2.
// - The weight scale is looked up per weight row (two rows per thread), so any block height and
//   any expert size work, including a 64-row half that straddles two 128-row blocks.
// - gate_up writes h = silu(gate) * up in f32, which act_quant_fp8 quantizes from its f32 value
//   for the down GEMM (the contract's order, as on the decode path).
//
// Every output element is one fixed sequence over K whatever the expert's row count or the
// row's place in its tile, so a row's bits do not depend on the batch.
#include <algorithm>

#include "backends/cuda/common.cuh"
#include "backends/cuda/expert_tiles.h"
#include "backends/cuda/grouped_wgmma.cuh"
#include "backends/cuda/quant_kernels.h"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kThreads = 384;             // warpgroup 0 loads, 1 and 2 multiply
constexpr int kTileRows = 128;            // expert rows (tokens) per tile: N <= 128
constexpr int kTileCols = 128;            // weight rows per tile: two 64-row halves
constexpr int kKStep = 128;               // k per stage: one FP8 scale block, 128 bytes
constexpr int kChunkBytes = 64 * kKStep;  // 8 KB: 64 rows x 128 bytes
constexpr int kWBytes = 2 * kChunkBytes;  // the weight halves of a stage
// The tile's token scales of the stage's K block. A TMA box must start on a 16-byte boundary of
// the row (a start between them is an illegal instruction), so the strip starts at the tile's
// first row rounded down to a multiple of 4 and holds 4 more scales than the tile's rows.
constexpr int kStripLead = 4;
constexpr int kStripCols = kTileRows + kStripLead;
constexpr int kStripBytes = kStripCols * 4;
constexpr int kStripSlot = 1024;        // keeps the next stage 1024-byte aligned
constexpr int kRingBytes = 192 * 1024;  // stages of 25 or 33 KB: 7 or 5 of them
constexpr int kMaxStages = 12;          // 19 KB stages with 16-row token boxes: 10 of them
constexpr int kConsumerWarps = 8;
constexpr size_t kSmem = kRingBytes + 1024 + 2 * kMaxStages * sizeof(uint64_t);

// The stage shape of every launch (set_fp8_wgmma_shape).
int g_k_stage = 1;
bool g_small_token_box = false;

struct Fp8ExpertGemm {
  const int32_t* counts;     // [E] rows per expert
  const int32_t* offsets;    // [E + 1] first sorted row of each expert
  const int4* tiles;         // [num_tiles] (expert, its first tile, its tile count, 0)
  const int32_t* num_tiles;  // [1]
  int col_tiles;             // weight-row tiles per expert
  int64_t N;                 // output columns: I (gate_up) or D (down)
  int64_t K;                 // D (gate_up) or I (down)
  int64_t w_rows;            // weight rows per expert: 2I (gate_up) or D (down)
  int e_base;                // the weights hold experts e_base, e_base + 1, ..
  const float* w_scale;      // [E][w_rows / bn][s_rs] f32
  int64_t s_es, s_rs, bn;
  // A dense linear (> 0: its row count): one "expert" of dense_rows rows whose tiles follow from
  // the block index, so counts, offsets and the tile list are not read (no kernel writes them).
  int dense_rows;
  // The stage shape (set_fp8_wgmma_shape; the same bits whatever it is): K blocks per stage (1, 2
  // or 4: each weight row's 128-byte pieces of consecutive K blocks requested together), and the
  // token boxes' rows (64, or 16 where no tile has more than 16 rows).
  int k_stage;
  int tok_box_rows;
  void* out;       // h [rows, I] f32 (gate_up); y [rows, D] f32 or bf16 (out_bf16)
  int64_t out_rs;  // elements between output rows
  bool out_bf16;
};

// A stage is ks sub-stages of one K block each, sub_bytes apart: the two weight halves, the
// token boxes and the token-scale strip (at `strip` within the sub-stage). One full and one
// empty barrier per stage.
struct Ring {
  uint8_t* base;
  int stage_bytes;
  int stages;
  int strip;      // byte offset of the token-scale strip in a sub-stage
  int sub_bytes;  // bytes of a sub-stage (a multiple of 1024)
  int ks;         // K blocks per stage
};

// One consumer warpgroup: weight half `half` of the tile against its `rows` tokens (N = rows
// rounded up to 16). acc[i] and part[i] are (weight row 16 warp + lane / 4 + 8 ((i / 2) % 2) of
// the half, token 8 (i / 4) + 2 (lane % 4) + i % 2), the wgmma accumulator layout.
template <int N, bool GATE_UP>
__device__ __forceinline__ void consume(const Ring& ring, uint64_t* full, uint64_t* empty, int nk,
                                        int half, int e, int rows, int64_t orow0, int64_t n0,
                                        const Fp8ExpertGemm& p) {
  const int lead = static_cast<int>(orow0 % kStripLead);  // the strip's scales before the tile's
  const int tid = threadIdx.x & 127, warp = tid / 32, lane = tid & 31;
  const int t_lane = 2 * (lane % 4), m_lane = 16 * warp + lane / 4;
  // This thread's two weight rows within the expert (clamped: rows past the expert's own are
  // another expert's or zeros, and their outputs are never stored).
  const int64_t wr = (GATE_UP ? (half ? p.N : 0) + n0 : n0 + 64 * half) + m_lane;
  const float* es = p.w_scale + (e - p.e_base) * p.s_es;
  const float* sa = es + (min(wr, p.w_rows - 1) / p.bn) * p.s_rs;
  const float* sb = es + (min(wr + 8, p.w_rows - 1) / p.bn) * p.s_rs;
  float acc[N / 2], part[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc[i] = 0.0f;
  int s = 0;
  uint32_t phase = 0;
  for (int kb0 = 0; kb0 < nk; kb0 += ring.ks) {
    // Issued before the wait (L2 latency under it); a later K block's of the stage under the
    // wgmmas of the one before it.
    float wa = sa[kb0], wb = sb[kb0];
    mbar_wait(&full[s], phase);
    const int n_sub = min(ring.ks, nk - kb0);
    for (int j = 0; j < n_sub; ++j) {
      const uint8_t* st = ring.base + s * ring.stage_bytes + j * ring.sub_bytes;
      const uint64_t w = wgmma_desc(st + half * kChunkBytes, 16, 1024);
      const uint64_t tk = wgmma_desc(st + kWBytes, 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKStep / 32; ++ks)  // 32-element k-steps: 32 bytes into the atom
        wgmma_ss_e4m3<N>(part, wgmma_desc_add(w, 2 * ks), wgmma_desc_add(tk, 2 * ks), ks > 0);
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_fence_operands(part);
      // Promote with the token scales of this K block, tokens 8 c8 + t_lane and + 1, read from the
      // stage's strip (not held in registers across the wait: 32 more at N = 128 spill).
      // The pair is 8-byte aligned only when lead is even: two 4-byte reads.
      const float* strip = reinterpret_cast<const float*>(st + ring.strip) + lead;
#pragma unroll
      for (int c8 = 0; c8 < N / 8; ++c8) {
        const float sx0 = strip[8 * c8 + t_lane], sx1 = strip[8 * c8 + t_lane + 1];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int i = 4 * c8 + q;
          acc[i] = fmaf(part[i], (q / 2 ? wb : wa) * (q % 2 ? sx1 : sx0), acc[i]);
        }
      }
      if (j + 1 < n_sub) wa = sa[kb0 + j + 1], wb = sb[kb0 + j + 1];
    }
    __syncwarp();  // every lane has read the strips before the stage is given back
    if (lane == 0) mbar_arrive(&empty[s]);
    if (++s == ring.stages) {
      s = 0;
      phase ^= 1;
    }
  }
  grouped::consumers_sync();  // both warpgroups' wgmmas have read the ring for the last time

  // The tile's outputs as [token][column] rows in the ring, then 16-byte stores along each row
  // (columns past N never leave: N is a multiple of 4, so a vector is all in or all out).
  if constexpr (GATE_UP)
    grouped::gate_up_epilogue<N>(acc, half, ring.base, tid, t_lane, m_lane, rows, orow0, n0, p.N,
                                 static_cast<float*>(p.out), p.out_rs);
  else if (p.out_bf16)
    grouped::down_epilogue<N>(acc, half, ring.base, t_lane, m_lane, rows, orow0, n0, p.N,
                              static_cast<bf16*>(p.out), p.out_rs);
  else
    grouped::down_epilogue<N>(acc, half, ring.base, t_lane, m_lane, rows, orow0, n0, p.N,
                              static_cast<float*>(p.out), p.out_rs);
}

template <bool GATE_UP>
__device__ __forceinline__ void consume_n(int N, const Ring& ring, uint64_t* full, uint64_t* empty,
                                          int nk, int half, int e, int rows, int64_t orow0,
                                          int64_t n0, const Fp8ExpertGemm& p) {
  // One instantiation per width so no wgmma sits under a condition (ptxas serializes those).
#define TD_MOE_FP8_WIDTH(n)                                                  \
  case n:                                                                    \
    consume<n, GATE_UP>(ring, full, empty, nk, half, e, rows, orow0, n0, p); \
    break
  switch (N) {
    TD_MOE_FP8_WIDTH(16);
    TD_MOE_FP8_WIDTH(32);
    TD_MOE_FP8_WIDTH(48);
    TD_MOE_FP8_WIDTH(64);
    TD_MOE_FP8_WIDTH(80);
    TD_MOE_FP8_WIDTH(96);
    TD_MOE_FP8_WIDTH(112);
    TD_MOE_FP8_WIDTH(128);
    default:
      break;
  }
#undef TD_MOE_FP8_WIDTH
}

template <bool GATE_UP>
__global__ void __launch_bounds__(kThreads, 1)
    moe_wgmma_fp8_kernel(const __grid_constant__ CUtensorMap x_map,
                         const __grid_constant__ CUtensorMap s_map,
                         const __grid_constant__ CUtensorMap w_map, Fp8ExpertGemm p) {
  extern __shared__ uint8_t smem_raw[];
  pdl_wait();
  const int tile = static_cast<int>(blockIdx.x / p.col_tiles);
  const int dense_tiles = (p.dense_rows + kTileRows - 1) / kTileRows;
  // Uniform over the block: the grid is sized for the worst case (exactly, for a dense linear).
  if (tile >= (p.dense_rows > 0 ? dense_tiles : *p.num_tiles)) return;
  // The blocks of an expert are ordered (weight tile, token tile): those that read the same
  // weight rows run side by side, the first brings them into L2 for the others.
  const int4 tl = p.dense_rows > 0 ? make_int4(0, 0, dense_tiles, 0) : p.tiles[tile];
  const ExpertBlock eb = expert_block(static_cast<int>(blockIdx.x), p.col_tiles, tl.x, tl.y, tl.z);
  const int e = eb.expert, nt = eb.col_tile, row0 = eb.row_tile * kTileRows;
  const int rows = min(kTileRows, (p.dense_rows > 0 ? p.dense_rows : p.counts[e]) - row0);
  const int width = ((rows + 15) / 16) * 16;  // the wgmmas' N: token rows read, padding unstored
  // Token boxes: 64-row chunks, or one 16-row box (the host chose it: no tile above 16 rows).
  const int chunks = p.tok_box_rows == 16 ? 1 : (width + 63) / 64;
  const int chunk_bytes = p.tok_box_rows * kKStep;
  // First sorted activation / output row.
  const int64_t orow0 = (p.dense_rows > 0 ? 0 : p.offsets[e]) + row0;
  // This tile's output columns and weight rows: gate_up takes 64 gate rows and their 64 up rows.
  const int64_t n0 = GATE_UP ? int64_t{nt} * 64 : int64_t{nt} * kTileCols;
  const int64_t w_base = int64_t{e - p.e_base} * p.w_rows;
  const int w_row0 = static_cast<int>(w_base + n0);
  const int w_row1 = static_cast<int>(GATE_UP ? w_base + p.N + n0 : w_base + n0 + 64);
  const int nk = static_cast<int>((p.K + kKStep - 1) / kKStep);

  Ring ring;
  ring.base = grouped::ring_base(smem_raw);
  ring.strip = kWBytes + chunks * chunk_bytes;
  ring.sub_bytes = ring.strip + kStripSlot;
  // K blocks per stage, as asked while the ring still holds two stages.
  ring.ks = p.k_stage;
  while (ring.ks > 1 && kRingBytes / (ring.ks * ring.sub_bytes) < 2) ring.ks /= 2;
  ring.stage_bytes = ring.ks * ring.sub_bytes;
  ring.stages = min(kMaxStages, kRingBytes / ring.stage_bytes);
  auto* full = reinterpret_cast<uint64_t*>(ring.base + kRingBytes);
  uint64_t* empty = full + kMaxStages;
  grouped::init_ring_barriers(full, empty, ring.stages, kConsumerWarps);

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    // Every box counts its whole size, rows past the tensor arriving as zeros. A stage's K blocks
    // are requested back to back, so each weight row's pieces of them reach DRAM together.
    if (threadIdx.x == 0)
      grouped::produce(ring.base, ring.stage_bytes, ring.stages, full, empty, nk, ring.ks,
                       static_cast<uint32_t>(ring.strip + kStripBytes),
                       [&](uint8_t* st, uint64_t* bar, int kb) {
                         grouped::load_weights_and_tokens<kChunkBytes>(
                             st, &w_map, &x_map, bar, kb * kKStep, w_row0, w_row1, chunks,
                             static_cast<int>(orow0));
                         tma_load_2d(st + ring.strip, &s_map, bar,
                                     static_cast<int>(orow0 - orow0 % kStripLead), kb);
                       });
    return;
  }
  consume_n<GATE_UP>(width, ring, full, empty, nk, wg - 1, e, rows, orow0, n0, p);
}

// tiles: for each expert of [e_base, e_base + ne) with rows, its token tiles (e, first, count, 0)
// * count; *num_tiles the total. One block.
__global__ void moe_fp8_tiles_kernel(const int32_t* counts, int e_base, int ne, int4* tiles,
                                     int32_t* num_tiles) {
  pdl_wait();
  __shared__ int red[32];
  int base = 0;
  for (int j0 = 0; j0 < ne; j0 += blockDim.x) {
    const int j = j0 + static_cast<int>(threadIdx.x), e = e_base + j;
    const int n = j < ne ? (counts[e] + kTileRows - 1) / kTileRows : 0;
    int total = 0;
    const int off = block_exclusive_scan(n, red, &total);
    for (int j = 0; j < n; ++j) tiles[base + off + j] = make_int4(e, base + off, n, 0);
    base += total;
  }
  if (threadIdx.x == 0) *num_tiles = base;
}

// Sorted row r < *valid: q_sorted[r] = q[perm[r] / k] (K bytes, 16 at a time) and
// scale_t[b][r] = scale[perm[r] / k][b].
__global__ void moe_gather_fp8_kernel(const uint8_t* q, const float* scale, int64_t K, int64_t kb,
                                      int k, const int32_t* perm, const int32_t* valid,
                                      uint8_t* q_sorted, float* scale_t, int64_t ld_t) {
  pdl_wait();
  const int64_t r = blockIdx.x;
  if (r >= *valid) return;
  const int64_t tok = perm[r] / k;
  const uint8_t* src = q + tok * K;
  uint8_t* dst = q_sorted + r * K;
  for (int64_t d = 16 * threadIdx.x; d < K; d += 16 * blockDim.x)
    *reinterpret_cast<uint4*>(dst + d) = *reinterpret_cast<const uint4*>(src + d);
  for (int64_t b = threadIdx.x; b < kb; b += blockDim.x)
    scale_t[b * ld_t + r] = scale[tok * kb + b];
}

template <bool GATE_UP>
void launch_fp8_gemm(const CUtensorMap& x, const CUtensorMap& sc, const CUtensorMap& w,
                     const Fp8ExpertGemm& p, int64_t max_tiles, cudaStream_t s) {
  opt_in_smem<moe_wgmma_fp8_kernel<GATE_UP>>(kSmem);
  launch(moe_wgmma_fp8_kernel<GATE_UP>, dim3(static_cast<unsigned>(max_tiles * p.col_tiles)),
         kThreads, kSmem, s, x, sc, w, p);
}

}  // namespace

bool fp8_moe_wgmma_applies(const Fp8W& gate_up, const Fp8W& down, int64_t E) {
  const int64_t I = down.K, D = down.N;
  auto fits = [&](const Fp8W& w, int64_t rows, int64_t K) {
    // 128-wide K blocks (one per stage), 16-byte TMA strides and bases, experts stacked densely,
    // row coordinates within int.
    return w.bk == 128 && w.bn >= 1 && w.N == rows && w.K == K && K % 16 == 0 &&
           w.w_es == rows * K && reinterpret_cast<uintptr_t>(w.w) % 16 == 0 &&
           E * rows < (int64_t{1} << 31);
  };
  return I % 16 == 0 && D % 16 == 0 && fits(gate_up, 2 * I, D) && fits(down, D, I);
}

int64_t fp8_moe_wgmma_max_tiles(int64_t pairs, int64_t E) {
  return (pairs + kTileRows - 1) / kTileRows + std::min<int64_t>(E, pairs);
}

void moe_gather_fp8(const void* q, const float* scale, int64_t K, int64_t kb, int64_t k,
                    const int32_t* perm, const int32_t* valid, int64_t pairs, void* q_sorted,
                    float* scale_t, int64_t ld_t, cudaStream_t s) {
  if (pairs == 0) return;
  launch(moe_gather_fp8_kernel, static_cast<unsigned>(pairs), 128, 0, s,
         static_cast<const uint8_t*>(q), scale, K, kb, static_cast<int>(k), perm, valid,
         static_cast<uint8_t*>(q_sorted), scale_t, ld_t);
}

void fp8_moe_wgmma_tiles(const int32_t* counts, int64_t e_base, int64_t ne, int32_t* tiles,
                         int32_t* num_tiles, cudaStream_t s) {
  launch(moe_fp8_tiles_kernel, 1, 1024, 0, s, counts, static_cast<int>(e_base),
         static_cast<int>(ne), reinterpret_cast<int4*>(tiles), num_tiles);
}

namespace {

// Either product over the listed tiles (rows_total token rows; the weight's E experts stacked).
// dense: rows_total rows of a dense linear (counts, offsets and tiles unused, null).
void run_gemm(bool gate_up, const void* xq, const float* xs_t, int64_t ld_t, int64_t rows_total,
              const int32_t* counts, const int32_t* offsets, const Fp8W& w, int64_t e_base,
              int64_t E, const int32_t* tiles, const int32_t* num_tiles, int64_t max_tiles,
              void* out, int64_t out_rs, bool out_bf16, bool dense, cudaStream_t s) {
  const int64_t N = gate_up ? w.N / 2 : w.N, K = w.K;
  // 16-row token boxes only where no tile can have more rows: every row of a dense linear's, or
  // every sorted row of the experts'.
  const int tok_rows = g_small_token_box && rows_total <= 16 ? 16 : 64;
  // Token maps: the rows [rows_total, K] and their scales [K blocks, ld_t]; the weight map:
  // every expert's rows stacked [E * rows, K].
  const CUtensorMap x = tma_map_u8_2d(xq, rows_total, K, K, tok_rows);
  const CUtensorMap sc = tma_map_f32_strip(xs_t, (K + 127) / 128, rows_total, ld_t, kStripCols);
  const CUtensorMap wm = tma_map_u8_2d(w.w, E * w.N, K, K, 64);
  Fp8ExpertGemm p{};
  p.counts = counts, p.offsets = offsets, p.tiles = reinterpret_cast<const int4*>(tiles);
  p.num_tiles = num_tiles;
  p.col_tiles = static_cast<int>(gate_up ? cdiv(N, 64) : cdiv(N, kTileCols));
  p.N = N, p.K = K, p.w_rows = w.N, p.e_base = static_cast<int>(e_base);
  p.w_scale = w.s, p.s_es = w.s_es, p.s_rs = w.s_rs, p.bn = w.bn;
  p.out = out, p.out_rs = out_rs, p.out_bf16 = out_bf16;
  p.dense_rows = dense ? static_cast<int>(rows_total) : 0;
  p.k_stage = g_k_stage;
  p.tok_box_rows = tok_rows;
  if (gate_up)
    launch_fp8_gemm<true>(x, sc, wm, p, max_tiles, s);
  else
    launch_fp8_gemm<false>(x, sc, wm, p, max_tiles, s);
}

}  // namespace

void fp8_moe_wgmma_gemm(bool gate_up, const void* xq, const float* xs_t, int64_t ld_t,
                        int64_t pairs, const int32_t* counts, const int32_t* offsets, const Fp8W& w,
                        int64_t e_base, int64_t ne, const int32_t* tiles, const int32_t* num_tiles,
                        float* out, cudaStream_t s) {
  if (pairs == 0) return;
  run_gemm(gate_up, xq, xs_t, ld_t, pairs, counts, offsets, w, e_base, ne, tiles, num_tiles,
           fp8_moe_wgmma_max_tiles(pairs, ne), out, gate_up ? w.N / 2 : w.N, false, false, s);
}

void set_fp8_wgmma_shape(int k_stage, bool small_token_box) {
  g_k_stage = k_stage == 2 || k_stage == 4 ? k_stage : 1;
  g_small_token_box = small_token_box;
}

bool fp8_linear_wgmma_applies(const Fp8W& w) {
  return w.bk == 128 && w.bn >= 1 && w.K % 16 == 0 && w.N % 4 == 0 && w.N < (int64_t{1} << 31) &&
         reinterpret_cast<uintptr_t>(w.w) % 16 == 0;
}

void fp8_linear_wgmma(const void* xq, const float* xs_t, int64_t ld_t, int64_t M, const Fp8W& w,
                      void* out, int64_t out_rs, DT out_dt, cudaStream_t s) {
  if (M == 0) return;
  // One kernel: the tiles follow from the block index (a kernel that wrote a tile list first
  // cost a launch per linear, a few us at one row).
  run_gemm(false, xq, xs_t, ld_t, M, nullptr, nullptr, w, 0, 1, nullptr, nullptr,
           (M + kTileRows - 1) / kTileRows, out, out_rs, out_dt == DT::BF16, true, s);
}

}  // namespace tandem::cuda::k
