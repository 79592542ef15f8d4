// The routed experts' two GEMMs at prefill sizes on warpgroup MMA, fed by TMA: the grouped
// expert GEMM. No host sync: the tiles are listed on the device from the expert counts, so the
// path runs inside CUDA graphs.
//
// Why: a 4,096-token GLM-5.2 step gives each of 256 experts ~128 rows. At that size an expert's
// GEMMs are weight streams (128 rows x 2 flop per 2-byte weight is below the H200's ~183
// flop/byte ridge), so the time floor is one read of all the experts' weights (19.3 GB, 4.6 ms
// at the copy rate). cuBLASLt's pointer-array batches, grouped by padded row count, took ~10 ms.
//
// The tile: one expert's rows [row0, row0 + 256) (four 64-row chunks, only those with rows are
// loaded and multiplied) against 128 weight rows, over all of K. So each weight byte is read
// once whenever an expert has at most 256 rows, and the expert's activation rows (1.5 MB at 128
// rows) are re-read from L2 by the consecutive blocks of its other column tiles.
// - gate_up: the 128 weight rows are 64 gate rows [n0, n0 + 64) and the 64 up rows [I + n0, ...)
//   of the same outputs, so the block finishes h = silu(gate) * up in registers (no [rows, 2I]
//   intermediate, no silu_mul pass); gate and up stay fp32 into silu, as in moe_mma.cu.
// - down: 128 consecutive rows of the down weight, y in fp32 for moe_combine.
// Block: warpgroup 0 (one thread) issues the TMA copies of a 4-stage ring (stage = 4 activation
// chunks + 2 weight halves, 48 KB); warpgroups 1 and 2 own chunks {0, 2} and {1, 3} and issue
// m64n128k16 wgmmas from shared memory. full[s] completes when a stage's bytes have landed,
// empty[s] when the 8 consumer warps have finished the wgmmas that read it.
//
// Every output element is one fixed sequence of wgmmas over K in order, whatever the expert's
// row count or the row's position in its tile, so a row's bits do not depend on the batch
// (tested in ops_tests, MoeWgmmaBatchInvariant).
#include <algorithm>

#include "backends/cuda/common.cuh"
#include "backends/cuda/tma.cuh"
#include "backends/cuda/wgmma.cuh"

namespace tandem::cuda::k {

namespace {

constexpr int kWThreads = 384;                // warpgroup 0 loads, 1 and 2 multiply
constexpr int kTileRows = 256;                // expert rows per tile: four 64-row chunks
constexpr int kTileCols = 128;                // weight rows per tile
constexpr int kKStep = 64;                    // k per stage: one 128-byte swizzle atom of bf16
constexpr int kStages = 4;                    // ring depth
constexpr int kChunkBytes = 64 * kKStep * 2;  // 8 KB: 64 rows x 128 bytes
constexpr int kABytes = 4 * kChunkBytes;      // activation chunks of a stage
constexpr int kBBytes = 2 * kChunkBytes;      // weight halves of a stage
constexpr int kStageBytes = kABytes + kBBytes;
constexpr int kConsumerWarps = 8;
// The ring, 1024 bytes of alignment slack (swizzled tiles start on 1024-byte boundaries), and
// the full / empty barriers.
constexpr size_t kWSmem = kStages * kStageBytes + 1024 + 2 * kStages * sizeof(uint64_t);

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

// The consumer warpgroup's k-loop over NC of its chunks (cw, then cw + 2): wait for each stage,
// issue its wgmmas, and release the previous stage once the wgmmas that read it have finished.
template <int NC>
__device__ __forceinline__ void consume(float (&acc)[2][64], const uint8_t* ring, uint64_t* full,
                                        uint64_t* empty, int nk, int cw, int lane) {
  for (int kb = 0; kb < nk; ++kb) {
    const int s = kb % kStages;
    mbar_wait(&full[s], (kb / kStages) & 1);
    if constexpr (NC > 0) {
      const uint8_t* st = ring + s * kStageBytes;
      const uint64_t bd = wgmma_desc(st + kABytes, 16, 1024);
      const uint64_t ad0 = wgmma_desc(st + cw * kChunkBytes, 16, 1024);
      const uint64_t ad1 = wgmma_desc(st + (cw + 2) * kChunkBytes, 16, 1024);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < kKStep / 16; ++ks) {  // 16-element k-steps: 32 bytes into the atom
        const int accumulate = kb > 0 || ks > 0;
        wgmma_m64n128k16_ss(acc[0], wgmma_desc_add(ad0, 2 * ks), wgmma_desc_add(bd, 2 * ks),
                            accumulate);
        if constexpr (NC > 1)
          wgmma_m64n128k16_ss(acc[1], wgmma_desc_add(ad1, 2 * ks), wgmma_desc_add(bd, 2 * ks),
                              accumulate);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous stage's wgmmas are done: release it
    }
    if (kb > 0 && lane == 0) mbar_arrive(&empty[(kb - 1) % kStages]);
  }
  if constexpr (NC > 0) {
    wgmma_wait<0>();
    wgmma_fence_operands(acc[0]);
    wgmma_fence_operands(acc[1]);
  }
}

template <bool GATE_UP>
__global__ void __launch_bounds__(kWThreads, 1)
    moe_wgmma_kernel(const __grid_constant__ CUtensorMap a_map,
                     const __grid_constant__ CUtensorMap b_map, ExpertGemm p) {
  extern __shared__ uint8_t smem_raw[];
  pdl_wait();
  const int tile = static_cast<int>(blockIdx.x / p.col_tiles);
  if (tile >= *p.num_tiles) return;  // uniform over the block: the grid is sized for the worst case
  const int nt = static_cast<int>(blockIdx.x % p.col_tiles);
  const int2 tl = p.tiles[tile];
  const int e = tl.x, row0 = tl.y;
  const int rows = min(kTileRows, p.counts[e] - row0);
  const int chunks = (rows + 63) / 64;
  const int a_row = p.offsets[e] + row0;  // first sorted activation / output row
  // This tile's output columns and weight rows: gate_up takes 64 gate rows and their 64 up rows.
  const int64_t n0 = GATE_UP ? int64_t{nt} * 64 : int64_t{nt} * kTileCols;
  const int64_t w_base = GATE_UP ? int64_t{e} * 2 * p.N : int64_t{e} * p.N;
  const int b_row0 = static_cast<int>(w_base + n0);
  const int b_row1 = static_cast<int>(GATE_UP ? w_base + p.N + n0 : w_base + n0 + 64);
  const int nk = static_cast<int>((p.K + kKStep - 1) / kKStep);

  uint8_t* ring =
      reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  auto* full = reinterpret_cast<uint64_t*>(ring + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], 1);
      mbar_init(&empty[s], kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    if (threadIdx.x == 0) {
      const uint32_t bytes = static_cast<uint32_t>(chunks * kChunkBytes + kBBytes);
      for (int kb = 0; kb < nk; ++kb) {
        const int s = kb % kStages;
        if (kb >= kStages) mbar_wait(&empty[s], ((kb / kStages) - 1) & 1);
        uint8_t* st = ring + s * kStageBytes;
        mbar_arrive_expect_tx(&full[s], bytes);
        for (int c = 0; c < chunks; ++c)
          tma_load_2d(st + c * kChunkBytes, &a_map, &full[s], kb * kKStep, a_row + 64 * c);
        tma_load_2d(st + kABytes, &b_map, &full[s], kb * kKStep, b_row0);
        tma_load_2d(st + kABytes + kChunkBytes, &b_map, &full[s], kb * kKStep, b_row1);
      }
    }
    return;
  }

  // Consumers: warpgroup cw owns chunks cw and cw + 2 of the tile. The k-loop is instantiated
  // per chunk count so no wgmma sits under a condition (ptxas serializes those).
  const int cw = wg - 1;
  const bool has0 = cw < chunks, has1 = cw + 2 < chunks;
  const int warp = (threadIdx.x / 32) & 3, lane = threadIdx.x & 31;
  float acc[2][64];
  if (has1)
    consume<2>(acc, ring, full, empty, nk, cw, lane);
  else if (has0)
    consume<1>(acc, ring, full, empty, nk, cw, lane);
  else
    consume<0>(acc, ring, full, empty, nk, cw, lane);

    // Accumulator element i of a thread: row 16 warp + lane / 4 + 8 ((i / 2) % 2) of its chunk,
    // column 8 (i / 4) + 2 (lane % 4) + i % 2.
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    if (!(j == 0 ? has0 : has1)) continue;
    const int chunk_row = 64 * (cw + 2 * j) + 16 * warp + lane / 4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = chunk_row + 8 * h;
      if (r >= rows) continue;
      const int64_t orow = a_row + r;
      if constexpr (GATE_UP) {
        auto* hp = static_cast<bf16*>(p.out) + orow * p.N + n0;
#pragma unroll
        for (int q = 0; q < 8; ++q) {  // gate columns 8q..; their up columns 64 further
          const int col = 8 * q + 2 * (lane & 3);
          if (n0 + col >= p.N) continue;
          const float g0 = acc[j][4 * q + 2 * h], g1 = acc[j][4 * q + 2 * h + 1];
          const float u0 = acc[j][32 + 4 * q + 2 * h], u1 = acc[j][32 + 4 * q + 2 * h + 1];
          *reinterpret_cast<__nv_bfloat162*>(hp + col) =
              __floats2bfloat162_rn(g0 / (1.0f + expf(-g0)) * u0, g1 / (1.0f + expf(-g1)) * u1);
        }
      } else {
        float* yp = static_cast<float*>(p.out) + orow * p.N + n0;
#pragma unroll
        for (int q = 0; q < 16; ++q) {
          const int col = 8 * q + 2 * (lane & 3);
          if (n0 + col >= p.N) continue;
          *reinterpret_cast<float2*>(yp + col) =
              make_float2(acc[j][4 * q + 2 * h], acc[j][4 * q + 2 * h + 1]);
        }
      }
    }
  }
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
void launch_gemm(const CUtensorMap& a, const CUtensorMap& b, const ExpertGemm& p, int64_t max_tiles,
                 cudaStream_t s) {
  opt_in_smem<moe_wgmma_kernel<GATE_UP>>(kWSmem);
  launch(moe_wgmma_kernel<GATE_UP>, dim3(static_cast<unsigned>(max_tiles * p.col_tiles)), kWThreads,
         kWSmem, s, a, b, p);
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
                       cudaStream_t s) {
  if (pairs == 0) return;
  const int64_t max_tiles = moe_wgmma_max_tiles(pairs, E);
  auto* tl = reinterpret_cast<int2*>(tiles);
  launch(moe_tiles_kernel, 1, 1024, 0, s, counts, static_cast<int>(E), tl, num_tiles);
  // A maps: the sorted rows [pairs, K]; B maps: every expert's weight rows stacked [E * N', K].
  const CUtensorMap a1 = tma_map_bf16_2d(x_sorted, pairs, D, D, 64);
  const CUtensorMap b1 = tma_map_bf16_2d(gate_up, E * 2 * I, D, D, 64);
  launch_gemm<true>(
      a1, b1, ExpertGemm{counts, offsets, tl, num_tiles, static_cast<int>(cdiv(I, 64)), I, D, h},
      max_tiles, s);
  const CUtensorMap a2 = tma_map_bf16_2d(h, pairs, I, I, 64);
  const CUtensorMap b2 = tma_map_bf16_2d(down, E * D, I, I, 64);
  launch_gemm<false>(
      a2, b2,
      ExpertGemm{counts, offsets, tl, num_tiles, static_cast<int>(cdiv(D, kTileCols)), D, I, y},
      max_tiles, s);
}

}  // namespace tandem::cuda::k
