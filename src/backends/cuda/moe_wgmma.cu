// The routed experts' two GEMMs at prefill sizes on warpgroup MMA, fed by TMA: the grouped
// expert GEMM. No host sync: the tiles are listed on the device from the expert counts, so the
// path runs inside CUDA graphs.
//
// Why: a 4,096-token GLM-5.2 step gives each of 256 experts ~128 rows. At that size an expert's
// GEMMs are weight streams (128 rows x 2 flop per 2-byte weight is below the H200's ~183
// flop/byte ridge), so the time floor is one read of all the experts' weights (19.3 GB, 4.6 ms
// at the copy rate). cuBLASLt's pointer-array batches, grouped by padded row count, took 6.0 ms
// of kernels (ncu) behind a host sync for the counts, which also kept the path out of graphs.
//
// The tile: one expert's rows [row0, row0 + 256) against 128 weight rows, over all of K. So each
// weight byte is read once whenever an expert has at most 256 rows, and the expert's activation
// rows (1.5 MB at 128 rows) are re-read from L2 by the consecutive blocks of its other column
// tiles: as many bytes as the weights at ~128 rows per expert, so at 4,096 tokens L2, not DRAM,
// sets the pace (ncu: L2 90%, DRAM 74%). Copying only the N rows in 16-row boxes, and sharing
// each copy between two column tiles by TMA multicast, were both measured slower.
// - gate_up: the 128 weight rows are 64 gate rows [n0, n0 + 64) and the 64 up rows [I + n0, ...)
//   of the same outputs, so the block finishes h = silu(gate) * up in registers (no [rows, 2I]
//   intermediate, no silu_mul pass); gate and up stay fp32 into silu, as in moe_mma.cu.
// - down: 128 consecutive rows of the down weight, y in fp32 for moe_combine.
// The products are computed transposed: a consumer warpgroup's 64 weight rows are the wgmma's A
// and the tile's tokens its B of N columns, N = the row count rounded up to 16 (at most 15 padded
// columns, where 64-row token chunks as A padded an expert's 129 rows to 192). Warpgroup 1 takes
// weight half 0 (the gate rows, or down rows n0..), warpgroup 2 half 1 (the up rows, or n0 +
// 64..): each reads its 2 KB of weights and the shared tokens once per k-step, m64nNk16 from
// shared memory at N up to 256 (a warpgroup per token half with both weight halves, N = 64
// each at ~128 rows, measured slower: docs/benchmarks.md).
// Block: warpgroup 0 (one thread) issues the TMA copies of a ring in 192 KB (stage = the two
// 64-row weight halves + the tile's 64-row token chunks, 24 to 48 KB, so 8 to 4 stages: more
// copies in flight when an expert has few rows). full[s] completes when a stage's bytes have
// landed, empty[s] when the 8 consumer warps have finished the wgmmas that read it. Epilogue
// through the drained ring: gate_up passes the up accumulators to warpgroup 1, which writes
// h = silu(gate) * up; both products land as [token][column] rows in shared memory and leave in
// 16-byte stores along each token's row.
//
// Every output element is one fixed sequence of wgmmas over K in order, whatever the expert's
// row count or the row's place in its tile, so a row's bits do not depend on the batch (tested
// in ops_tests, MoeWgmmaRowsAreBatchInvariant).
#include <algorithm>

#include "backends/cuda/common.cuh"
#include "backends/cuda/grouped_wgmma.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kWThreads = 384;                // warpgroup 0 loads, 1 and 2 multiply
constexpr int kTileRows = kMoeWgmmaTileRows;  // expert rows (tokens) per tile
constexpr int kTileCols = 128;                // weight rows per tile: two 64-row halves
constexpr int kKStep = 64;                    // k per stage: one 128-byte swizzle atom of bf16
constexpr int kChunkBytes = 64 * kKStep * 2;  // 8 KB: 64 rows x 128 bytes
constexpr int kWBytes = 2 * kChunkBytes;      // the weight halves of a stage
constexpr int kRingBytes = 192 * 1024;        // stages of 24 to 48 KB: 8 to 4 of them
constexpr int kMaxStages = 8;
constexpr int kConsumerWarps = 8;
// The ring, 1024 bytes of alignment slack (swizzled tiles start on 1024-byte boundaries), and
// the full / empty barriers.
constexpr size_t kWSmem = kRingBytes + 1024 + 2 * kMaxStages * sizeof(uint64_t);

struct ExpertGemm {
  const int32_t* counts;     // [E] rows per expert
  const int32_t* offsets;    // [E + 1] first sorted row of each expert
  const int2* tiles;         // [num_tiles] (expert, first row within the expert)
  const int32_t* num_tiles;  // [1]
  int col_tiles;             // weight-row tiles per expert
  int64_t N;                 // output columns: I (gate_up) or D (down)
  int64_t K;                 // D (gate_up) or I (down)
  void* out;                 // h [rows, I] bf16 or y [rows, D] f32
};

// The ring of a tile: its stage size (by the tile's token chunks) and stage count.
struct Ring {
  uint8_t* base;
  int stage_bytes;
  int stages;
};

// One consumer warpgroup: weight half `half` of the tile against its `rows` tokens (N = rows
// rounded up to 16). The k-loop waits for each stage, issues one m64nNk16 per k-step, and
// releases the previous stage once the wgmmas that read it have finished. acc[i] is (weight row
// 16 warp + lane / 4 + 8 ((i / 2) % 2) of the half, token 8 (i / 4) + 2 (lane % 4) + i % 2).
template <int N, bool GATE_UP>
__device__ __forceinline__ void consume(const Ring& ring, uint64_t* full, uint64_t* empty, int nk,
                                        int half, int rows, int64_t orow0, int64_t n0,
                                        const ExpertGemm& p) {
  const int tid = threadIdx.x & 127, warp = tid / 32, lane = tid & 31;
  float acc[N / 2];
  int s = 0, prev = 0;
  uint32_t phase = 0;
  for (int kb = 0; kb < nk; ++kb) {
    mbar_wait(&full[s], phase);
    const uint8_t* st = ring.base + s * ring.stage_bytes;
    const uint64_t w = wgmma_desc(st + half * kChunkBytes, 16, 1024);
    const uint64_t tk = wgmma_desc(st + kWBytes, 16, 1024);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kKStep / 16; ++ks)  // 16-element k-steps: 32 bytes into the atom
      wgmma_ss_kk<N>(acc, wgmma_desc_add(w, 2 * ks), wgmma_desc_add(tk, 2 * ks), kb > 0 || ks > 0);
    wgmma_commit();
    wgmma_wait<1>();  // the previous stage's wgmmas are done: release it
    if (kb > 0 && lane == 0) mbar_arrive(&empty[prev]);
    prev = s;
    if (++s == ring.stages) {
      s = 0;
      phase ^= 1;
    }
  }
  wgmma_wait<0>();
  wgmma_fence_operands(acc);
  grouped::consumers_sync();  // both warpgroups' wgmmas have read the ring for the last time

  // The tile's outputs as [token][column] rows in the ring, then 16-byte stores along each row
  // (columns past N never leave: N is a multiple of 8, so a vector is all in or all out).
  const int t_lane = 2 * (lane % 4), m_lane = 16 * warp + lane / 4;
  if constexpr (GATE_UP)
    grouped::gate_up_epilogue<N>(acc, half, ring.base, tid, t_lane, m_lane, rows, orow0, n0, p.N,
                                 static_cast<bf16*>(p.out), p.N);
  else
    grouped::down_epilogue<N>(acc, half, ring.base, t_lane, m_lane, rows, orow0, n0, p.N,
                              static_cast<float*>(p.out), p.N);
}

template <bool GATE_UP>
__device__ __forceinline__ void consume_n(int N, const Ring& ring, uint64_t* full, uint64_t* empty,
                                          int nk, int half, int rows, int64_t orow0, int64_t n0,
                                          const ExpertGemm& p) {
  // One instantiation per width so no wgmma sits under a condition (ptxas serializes those).
#define TD_MOE_WIDTH(n)                                                   \
  case n:                                                                 \
    consume<n, GATE_UP>(ring, full, empty, nk, half, rows, orow0, n0, p); \
    break
  switch (N) {
    TD_MOE_WIDTH(16);
    TD_MOE_WIDTH(32);
    TD_MOE_WIDTH(48);
    TD_MOE_WIDTH(64);
    TD_MOE_WIDTH(80);
    TD_MOE_WIDTH(96);
    TD_MOE_WIDTH(112);
    TD_MOE_WIDTH(128);
    TD_MOE_WIDTH(144);
    TD_MOE_WIDTH(160);
    TD_MOE_WIDTH(176);
    TD_MOE_WIDTH(192);
    TD_MOE_WIDTH(208);
    TD_MOE_WIDTH(224);
    TD_MOE_WIDTH(240);
    TD_MOE_WIDTH(256);
    default:
      break;
  }
#undef TD_MOE_WIDTH
}

template <bool GATE_UP>
__global__ void __launch_bounds__(kWThreads, 1)
    moe_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                     const __grid_constant__ CUtensorMap w_map, ExpertGemm p) {
  extern __shared__ uint8_t smem_raw[];
  pdl_wait();
  const int tile = static_cast<int>(blockIdx.x / p.col_tiles);
  if (tile >= *p.num_tiles) return;  // uniform over the block: the grid is sized for the worst case
  const int nt = static_cast<int>(blockIdx.x % p.col_tiles);
  const int2 tl = p.tiles[tile];
  const int e = tl.x, row0 = tl.y;
  const int rows = min(kTileRows, p.counts[e] - row0);
  const int width = ((rows + 15) / 16) * 16;  // the wgmmas' N: token rows read, padding unstored
  const int chunks = (width + 63) / 64;
  const int64_t orow0 = p.offsets[e] + row0;  // first sorted activation / output row
  // This tile's output columns and weight rows: gate_up takes 64 gate rows and their 64 up rows.
  const int64_t n0 = GATE_UP ? int64_t{nt} * 64 : int64_t{nt} * kTileCols;
  const int64_t w_base = GATE_UP ? int64_t{e} * 2 * p.N : int64_t{e} * p.N;
  const int w_row0 = static_cast<int>(w_base + n0);
  const int w_row1 = static_cast<int>(GATE_UP ? w_base + p.N + n0 : w_base + n0 + 64);
  const int nk = static_cast<int>((p.K + kKStep - 1) / kKStep);

  Ring ring;
  ring.base = grouped::ring_base(smem_raw);
  ring.stage_bytes = kWBytes + chunks * kChunkBytes;
  ring.stages = min(kMaxStages, kRingBytes / ring.stage_bytes);
  auto* full = reinterpret_cast<uint64_t*>(ring.base + kRingBytes);
  uint64_t* empty = full + kMaxStages;
  grouped::init_ring_barriers(full, empty, ring.stages, kConsumerWarps);

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (threadIdx.x == 0)
      grouped::produce(ring.base, ring.stage_bytes, ring.stages, full, empty, nk, 1,
                       static_cast<uint32_t>(ring.stage_bytes),
                       [&](uint8_t* st, uint64_t* bar, int kb) {
                         grouped::load_weights_and_tokens<kChunkBytes>(
                             st, &w_map, &x_map, bar, kb * kKStep, w_row0, w_row1, chunks,
                             static_cast<int>(orow0));
                       });
    return;
  }
  consume_n<GATE_UP>(width, ring, full, empty, nk, wg - 1, rows, orow0, n0, p);
}

// tiles: for each expert in order, (e, 0), (e, 256), ... below its count; *num_tiles the total.
// One block.
__global__ void moe_tiles_kernel(const int32_t* counts, int E, int2* tiles, int32_t* num_tiles) {
  pdl_wait();
  __shared__ int red[32];
  int base = 0;
  for (int e0 = 0; e0 < E; e0 += blockDim.x) {
    const int e = e0 + static_cast<int>(threadIdx.x);
    const int n = e < E ? (counts[e] + kTileRows - 1) / kTileRows : 0;
    int total = 0;
    const int off = block_exclusive_scan(n, red, &total);
    for (int j = 0; j < n; ++j) tiles[base + off + j] = make_int2(e, j * kTileRows);
    base += total;
  }
  if (threadIdx.x == 0) *num_tiles = base;
}

template <bool GATE_UP>
void launch_gemm(const CUtensorMap& x, const CUtensorMap& w, const ExpertGemm& p, int64_t max_tiles,
                 cudaStream_t s) {
  opt_in_smem<moe_wgmma_kernel<GATE_UP>>(kWSmem);
  launch(moe_wgmma_kernel<GATE_UP>, dim3(static_cast<unsigned>(max_tiles * p.col_tiles)), kWThreads,
         kWSmem, s, x, w, p);
}

}  // namespace

bool moe_wgmma_applies(int64_t I, int64_t D) {
  return I % 8 == 0 && D % 8 == 0;  // 16-byte TMA row strides and paired column stores
}

int64_t moe_wgmma_max_tiles(int64_t pairs, int64_t E) {
  return (pairs + kTileRows - 1) / kTileRows + std::min<int64_t>(E, pairs);
}

void moe_experts_wgmma(const void* gate_up, const void* down, const int32_t* counts,
                       const int32_t* offsets, int64_t pairs, int64_t E, int64_t I, int64_t D,
                       const void* x_sorted, int32_t* tiles, int32_t* num_tiles, void* h, float* y,
                       cudaStream_t s, bool tiles_listed) {
  if (pairs == 0) return;
  const int64_t max_tiles = moe_wgmma_max_tiles(pairs, E);
  auto* tl = reinterpret_cast<int2*>(tiles);
  if (!tiles_listed)
    launch(moe_tiles_kernel, 1, 1024, 0, s, counts, static_cast<int>(E), tl, num_tiles);
  // Token maps: the sorted rows [pairs, K]; weight maps: every expert's rows stacked [E * N', K].
  const CUtensorMap x1 = tma_map_bf16_2d(x_sorted, pairs, D, D, 64);
  const CUtensorMap w1 = tma_map_bf16_2d(gate_up, E * 2 * I, D, D, 64);
  launch_gemm<true>(
      x1, w1, ExpertGemm{counts, offsets, tl, num_tiles, static_cast<int>(cdiv(I, 64)), I, D, h},
      max_tiles, s);
  const CUtensorMap x2 = tma_map_bf16_2d(h, pairs, I, I, 64);
  const CUtensorMap w2 = tma_map_bf16_2d(down, E * D, I, I, 64);
  launch_gemm<false>(
      x2, w2,
      ExpertGemm{counts, offsets, tl, num_tiles, static_cast<int>(cdiv(D, kTileCols)), D, I, y},
      max_tiles, s);
}

}  // namespace tandem::cuda::k
