// The order in which the grouped FP8 expert kernels (moe_wgmma_fp8.cu) give their blocks the
// (expert, weight tile, token tile) triples, callable on the host too so that CI checks it
// without a GPU (tests/unit/cuda_heuristics_test.cpp).
//
// The tile list holds one entry per token tile of every expert with rows: (expert, the index of
// the expert's first entry, the expert's token-tile count). The grid is entries x col_tiles
// blocks; block b reads entry b / col_tiles, which lies in its expert's run of entries, so the
// expert's count * col_tiles blocks are [first * col_tiles, (first + count) * col_tiles). Within
// that run the token tile varies fastest: the blocks that read the same weight rows are
// launched side by side, the first bringing the rows into L2 for the others.
#pragma once

#ifdef __CUDACC__
#define TD_HOST_DEVICE __host__ __device__
#else
#define TD_HOST_DEVICE
#endif

namespace tandem::cuda::k {

struct ExpertBlock {
  int expert;
  int col_tile;  // which weight-row tile
  int row_tile;  // which token tile of the expert
};

// Block b's triple, from the entry at b / col_tiles: (expert, first, count).
TD_HOST_DEVICE inline ExpertBlock expert_block(int b, int col_tiles, int expert, int first,
                                               int count) {
  const int local = b - first * col_tiles;
  return ExpertBlock{expert, local / count, local % count};
}

}  // namespace tandem::cuda::k

#undef TD_HOST_DEVICE
