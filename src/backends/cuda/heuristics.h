// Every host-side kernel choice of the CUDA backend in one place: which GEMM path by row count,
// when the tensor-core expert kernels and the 64-head mla_decode run, mla_decode's split plan,
// token chunking, what deterministic mode pins, and the TANDEM_* switches that override them.
// Host-only (g++); functions of shapes, modes and switches only (no device state), so a choice
// made for a capture is the same on replay.
//
// Choices made inside the launchers (kernels.h) stay next to their kernels: the skinny and
// tensor-core GEMMs' K-split counts (k::skinny_splits, k::tc_gemm_splits), the register /
// vectorized RMSNorm variant by row width (norm.cu), the number of key buffers of the 16-head
// mla_decode (attention_mma.cu), programmatic dependent launch (TANDEM_PDL, common.cuh).
//
// Figures are H200 measurements quoted from docs/benchmarks.md ("linear paths" table, from the
// results file docs/results/gpu_suite_2026-12-01_c80ff6bcb66a.txt) and docs/cuda-backend.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace tandem::cuda {

// How mla_decode splits each token's key list across blocks (decided on the host from shapes
// and the batch's max length; the kernels read each token's real length on the device, so a
// plan made for a longer max length stays correct).
struct MlaDecodePlan {
  int64_t split_len = 0;   // key-list entries per split (a multiple of 64)
  int64_t num_splits = 1;  // 1: no merge pass, no scratch
  size_t scratch_bytes = 0;
  // The 64-head kernel on warpgroup MMA: blocks per (token, split), each owning 512 / parts of
  // the value columns (1, 2 or 4). The output does not depend on it (attention_wgmma.cu), so
  // deterministic mode may choose it from the token count.
  int column_parts = 1;
  // The chain of three kernels (attention_chain.cu) instead: the one-block wgmma kernel's bits
  // with a token's key blocks spread over many SMs; chain_blocks = 64-key blocks per token,
  // scores_per_block = key blocks per block of its scores kernel (1 or 2).
  bool chain = false;
  int64_t chain_blocks = 0;
  int scores_per_block = 1;
};

namespace heuristics {

// ---- environment switches (read once, when the backend is constructed) ------------------------
// The table of every TANDEM_* switch is in docs/cuda-backend.md ("Switches").
struct Switches {
  bool mla_tensor_cores = true;   // TANDEM_MLA_SIMT=1 (any value not starting with '0'): false
  bool side_stream = true;        // TANDEM_SIDE_STREAM=0: side branches run in order
  bool last_block_reduce = true;  // TANDEM_SKINNY_LAST_BLOCK_REDUCE=0: a second reduce kernel
  int moe_tc_mode = -1;           // TANDEM_MOE_TENSOR_CORES: -1 automatic, 0 off, 1 on
  int64_t mla_min_split = 64;     // TANDEM_MLA_MIN_SPLIT: fewest keys per mla_decode split
  int64_t mla_det_split = 512;    // TANDEM_MLA_DET_SPLIT: keys per split in deterministic mode
  int mla_column_parts = 0;       // TANDEM_MLA_COLUMN_PARTS: 1 / 2 / 4 forced, else automatic
  int moe_row_groups = 0;         // TANDEM_MOE_ROW_GROUPS: 1 / 4 forced, else automatic
  int quant_ring = 0;             // TANDEM_QUANT_RING: 2 / 23 / 24 forced, else per format
  int mla_wide_mode = -1;         // TANDEM_MLA_WIDE: -1 automatic, 0 off, 1 on
  int mla_chain_mode = -1;        // TANDEM_MLA_CHAIN: -1 automatic, 0 off, 1 on (where it applies)
  // The chain's values kernel: value columns per block, 64 (8 blocks a token), 32 or 16 (the same
  // bits; more blocks for a batch-1 token's sequential pass over its key blocks); 0: by the
  // number of tokens (chain_value_cols_for).
  int mla_chain_value_cols = 0;    // TANDEM_MLA_CHAIN_VALUE_COLS: 64, 32 or 16 forced
  bool mla_wgmma = true;           // TANDEM_MLA_WGMMA=0: the 64-head kernel on mma.sync
  int expert_streams = 4;          // TANDEM_EXPERT_STREAMS: 1-4 (moe_experts' host path)
  int64_t det_tc_max_weights = 0;  // TANDEM_DET_TC_MAX_WEIGHTS (det_linear_tc)
  bool moe_grouped = true;         // TANDEM_MOE_GROUPED=0: per-expert GEMMs on that path
  bool moe_fused_prepare = true;   // TANDEM_MOE_FUSED_PREPARE=0: tile list and gather separately
  int moe_wgmma_mode = -1;         // TANDEM_MOE_WGMMA: -1 automatic, 0 off, 1 on
  int moe_fp8_wgmma_mode = -1;     // TANDEM_MOE_FP8_WGMMA: -1 automatic (default), 0 off, 1 on
  int fp8_linear_wgmma_mode = -1;  // TANDEM_FP8_LINEAR_WGMMA: -1 automatic (default), 0 off, 1 on
  // The grouped FP8 wgmma kernels' stage shape (the same bits whatever it is): four K blocks of
  // a weight row per ring stage, and 16-row token boxes where at most 16 rows are multiplied.
  // On the H200 (c8d6242, kernel_bench --quant-only, one run each) every row was as fast or
  // faster than with (1, off): dense linears at one row 7-15% (o_proj 52.7 -> 47.1 us), routed
  // experts at batch 1 119.2 -> 111.2 us, the 4,096-token prefill 4020 -> 3986 us.
  int fp8_wgmma_k_stage = 4;        // TANDEM_FP8_WGMMA_KSTAGE: K blocks per stage (1, 2, 4)
  bool fp8_wgmma_small_box = true;  // TANDEM_FP8_WGMMA_SMALL_BOX=0: token boxes of 64 rows
};
Switches read_switches();
// A requested value-column count of the chain's values kernel: 16, 32 or 64 as given, else 0
// (automatic).
inline int chain_value_cols(int requested) {
  return requested == 16 || requested == 32 || requested == 64 ? requested : 0;
}
// The values kernel's columns per block for `tokens` query tokens: a forced width, else the
// narrowest whose blocks (tokens x 512 / width) still fit one per SM, else 64. Each block walks
// its token's key blocks in order, so a few tokens are latency-bound on few SMs and narrower
// blocks spread them; every block rereads its key block's 64 x 64 probabilities, so once the
// SMs are full the narrow widths only add traffic. H100, 8k context, session 33: batch 1
// 16.8 / 13.7 / 11.9 us at 64 / 32 / 16 columns, batch 32 36.0 / 45.5 / 57.4 us.
inline int chain_value_cols_for(int requested, int64_t tokens, int64_t num_sms) {
  if (requested != 0) return requested;
  for (int cols : {16, 32})
    if (tokens * (512 / cols) <= num_sms) return cols;
  return 64;
}

// ---- linear / head_matmul ----------------------------------------------------------------------
// Default mode, bf16 weights: linear runs cuBLASLt above this many rows, the skinny kernel at or
// below it. At one row they read the weights about equally (q_b 16384x2048: skinny 29.7 us,
// cuBLASLt 26.3; lm_head 154880x6144: 443.0 against 444.7); from 2 rows cuBLASLt wins: at 4-16
// rows it reads 59-103% of the copy rate where the skinny kernel, FP32-FMA bound, reads 16-74%
// (docs/benchmarks.md). Not batch-invariant across the switch (hence deterministic mode below).
constexpr int64_t kSkinnyMaxRows = 1;

// Deterministic mode: every bf16 linear and head_matmul, and the wide fp32 linears, run cuBLASLt in
// its batch-invariant mode (LtGemm::set_batch_invariant: one anchor configuration per shape, bf16
// without split-K, the fastest bit-identical member timed per row bucket) at every M, one row
// included. On the H200 the
// fastest such algorithm is within 0-3% of the fastest cuBLASLt algorithm at every M from 1 to
// 256 on the GLM-5.2 projections (bench/kernels/lt_algo_survey.cpp; docs/benchmarks.md), where
// the tensor-core kernel of gemm_tc.cu read 49-68% of copy at one row and was 3-12x slower from
// 64 rows. That kernel (one reduction order at every M, but not cuBLASLt's) is the fallback for
// a shape cuBLASLt has no invariant algorithm for, decided per shape (never per M).
inline bool linear_lt_path(int64_t rows, bool deterministic) {
  return deterministic || rows > kSkinnyMaxRows;
}
// Deterministic mode: bf16 weights of at most `max_weights` elements (N * K per head) take the
// tensor-core kernel of gemm_tc.cu at every row count instead of cuBLASLt's invariant algorithm.
// Chosen by shape alone, so a row's bits stay the same at every M. For a small model's
// projections (the default model: 256 x 768 and below) a step is launch-bound and the choice is
// about which kernel starts and ends sooner, not bandwidth. 0: never (measuring).
inline bool det_linear_tc(int64_t N, int64_t K, int64_t max_weights) {
  return max_weights > 0 && N * K <= max_weights;
}
// Default mode: the row count whose cuBLASLt heuristic pick a GEMM of `rows` rows runs (LtGemm),
// the smallest of 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (2^k and 3 * 2^(k-1)) not below it, so a
// bucket's top is under 1.5x the rows it serves. A prefill meets a new row count at almost every
// step; searched per count, each cost ~0.2 ms of host time and each new kernel it picked ~3 ms
// at its first launch (H100, cuBLASLt 13, CUDA_MODULE_LOADING=EAGER as well): a 2,048-token step
// of the default model took 35 ms instead of 1.5. With buckets a pass meets few kernels, the
// warm-up meets them, and a row count's algorithm depends on the count alone.
inline int64_t lt_row_bucket(int64_t rows) {
  int64_t p = 1;
  while (p < rows) p *= 2;
  const int64_t three_quarters = p / 4 * 3;  // 3 * 2^(k-2): on the ladder from p = 4
  return (p >= 4 && three_quarters >= rows) ? three_quarters : p;
}
// linear on fp32 weights (the router, the indexer's head weights; bf16 x, f32 out): the skinny
// family (skinny_gemm: one reduction order at every M, so batch-invariant; the tiled kernel of
// skinny_f32_tiles.cu), or at prefill sizes in default mode the weight split exactly into three
// bf16 pieces (split_f32_bf16x3) and one bf16 cuBLASLt GEMM into [M, 3N] f32 whose thirds are
// summed (every product exact in fp32 and the sums fp32, as in the skinny kernel; its algorithm
// depends on M, so not batch-invariant). Measured on the H200 (kernel_bench --f32-only, L2
// flushed, 2026-12-04; docs/benchmarks.md), skinny against the split:
// - the router's 256: 15.7 / 26.4 / 44.1 / 552 us against 18.8 / 19.6 / 22.4 / 68.3 at 64 / 128
//   / 256 / 4,096 rows (the fp32 cuBLASLt GEMM it replaces from 256 rows: 42.0 / 339);
// - the indexer's 32: 14.1 / 15.9 / 27.5 / 84.2 against 13.6 / 14.4 / 17.2 / 31.2 at 256 / 512 /
//   1,024 / 4,096 rows.
// Deterministic mode takes the skinny family at every M (the router's 9 us at one row against
// invariant cuBLASLt's fp32 GEMM's 20; 552 against 607 at 4,096 rows). With it a deterministic MoE
// step at batch 32 first measured 7-16% slower: the routed experts' kernel started beside the
// shared expert's last GEMM, which moe_block now prevents from 8 tokens.
constexpr int64_t kF32SkinnyMaxFeatures = 64;    // narrower: the indexer's head weights
constexpr int64_t kF32SplitMinRows = 128;        // the split from here (wider weights)
constexpr int64_t kF32SplitMinRowsNarrow = 512;  // and from here (narrow ones)
inline bool linear_f32_split_path(int64_t rows, int64_t features, bool deterministic) {
  if (deterministic) return false;
  return rows >= (features <= kF32SkinnyMaxFeatures ? kF32SplitMinRowsNarrow : kF32SplitMinRows);
}
// head_matmul: one strided-batched cuBLASLt GEMM (a batch per head) at every token count: W_UK
// 64 x 512x128 8.4 us at 1 token and 8.2 at 4, where the skinny kernel takes 13.3 and 28.4 (its
// warps mostly idle on rows of K = 128 or 512). Batch-invariant mode in deterministic mode.

// Skinny split-K: the partials are summed by each output tile's last block to arrive (an arrival
// counter per tile, no second kernel) when that is switched on and the counters suffice;
// TANDEM_SKINNY_LAST_BLOCK_REDUCE=0 measured within noise of it on whole layers.
inline bool skinny_last_block_reduce(bool on, int64_t tiles, int64_t counters) {
  return on && tiles <= counters;
}

// ---- mla_decode --------------------------------------------------------------------------------
// Keys per split in deterministic mode: a fixed split length makes the split boundaries (and so
// the merge's rounding) independent of the number of query tokens (TANDEM_MLA_DET_SPLIT; the
// choice among 256, 512 and 1024 is measured at mla_wide below).
constexpr int64_t kDeterministicMlaSplit = 512;
// Default mode: the 64-heads-per-block kernel from this many query tokens (dense GLM-5.2 layer
// at ctx 1k: 18 / 11 us slower per layer at 1 / 4 tokens, 1 / 10 / 14 / 160 us faster at 16 /
// 32 / 64 / 128 when the rule was set; mla_decode at 128 tokens x 1k is 160 us with it,
// docs/cuda-backend.md "Performance").
constexpr int64_t kMlaWideMinTokens = 16;
// Fewest keys per split of the 64-heads-per-block kernel: each block stages its token's 64 query
// rows (74 KB at L = 576), as many bytes as 64 keys.
constexpr int64_t kMlaWideMinSplit = 128;

// Whether mla_decode runs the 64-heads-per-block kernel: only on the tensor cores and where its
// shapes apply; `mode` (TANDEM_MLA_WIDE / set_mla_wide: 0 / 1) forces it off / on in either
// mode; automatically (-1) from kMlaWideMinTokens tokens, and at every token count in
// deterministic mode (the kernel must not depend on the token count there). Measured on one
// GLM-5.2 layer, deterministic over default decode step time, geometric mean of the 24
// kernel_bench steps (batch 1-128, ctx 1k-32k): 1.040 with the 64-head kernel and splits of
// 512 keys, 1.130 with the 16-head kernel (worst step 1.195 against 1.732: dense b=128; 256-key
// splits 1.041 / 1.349, 1024-key 1.072 / 1.212; docs/benchmarks.md).
bool mla_wide(bool tensor_cores, bool applies, int mode, bool deterministic, int64_t tokens);

// The split plan: enough splits of the key list (multiples of 64 entries, at most 128 splits)
// for about two blocks per SM with the 16-head kernel, or three quarters of the SMs with the
// 64-head one (201 KB of shared memory, one block per SM; a split costs a merge pass over
// [T, H, splits, Lc] f32 partials, 23 us at 128 tokens); splits of at least min_split keys
// (TANDEM_MLA_MIN_SPLIT, default 64: 128 measured the same on whole layers, 512 about 30 us
// slower per layer, 1024 60-70 us).
//
// Deterministic mode: where the 64-head wgmma kernel applies (`wgmma`: 64 heads, bf16 keys), one
// order at every token count, the keys of a token in 64-key blocks from the first to the last
// (no split, no merge): the one-block kernel, or for few tokens the chain of kernels that gives
// its bits (attention_chain.cu; `chain_mode` -1 automatic, 0 never, 1 wherever it fits).
// Elsewhere kDeterministicMlaSplit-key splits whatever T is. Default mode takes the chain only
// when chain_mode is 1.
MlaDecodePlan plan_mla_decode(int64_t T, int64_t H, int64_t range, int64_t Lc, bool wide,
                              int64_t num_sms, bool deterministic, int64_t min_split,
                              int64_t det_split = kDeterministicMlaSplit, bool wgmma = false,
                              int chain_mode = -1);
// The chain's limits: at most this many 64-key blocks per token (its values kernel keeps a
// token's slot table in shared memory), and its scratch (25 KB per token and block) at most
// kMlaChainMaxBlocks x 64 blocks; automatically up to kMlaChainMaxTokens query tokens.
constexpr int64_t kMlaChainMaxBlocks = 64;
constexpr int64_t kMlaChainMaxTokens = 64;
// The wgmma kernel's column parts: `forced` (TANDEM_MLA_COLUMN_PARTS / set_mla_column_parts) when
// it is 1, 2 or 4, else the plan's.
inline int mla_column_parts(int forced, int planned) {
  return forced == 1 || forced == 2 || forced == 4 ? forced : planned;
}

// ---- indexer_topk ------------------------------------------------------------------------------
// Query tokens per launch: the scores scratch [tokens, max_len] f32 stays within 64M floats.
int64_t indexer_token_chunk(int64_t T, int64_t max_len);

// ---- moe_experts -------------------------------------------------------------------------------
// Rows per expert (on average) from which moe_experts runs cuBLASLt per expert on gathered rows
// (one host sync for the counts).
constexpr int64_t kMoeHostPathRowsPerExpert = 32;
// Rows per expert (on average) from which the device path runs the tensor-core expert kernels in
// default mode. Below it the SIMT kernels read the weights faster (GLM-5.2 MoE layer: 740 against
// 774 us at 4 tokens, 1266 against 1335 at 8), from it the tensor-core ones (3306 against 3373
// us at 32 tokens, 5226 against 7473 at 128; docs/benchmarks.md: the MoE layer at 128 tokens
// went from 60% to 89% of copy with them).
constexpr int64_t kMoeTensorCoreRowsPerExpert = 1;

// Tokens per moe_experts chunk: the intermediates (48 KB per (token, slot) at GLM-5.2 sizes)
// stay within 2 GiB, so a prefill step of up to 5,461 tokens reads the expert weights once.
int64_t moe_token_chunk(int64_t T, int64_t D, int64_t I, int64_t slots);

// The device path's expert kernels: `mode` (TANDEM_MOE_TENSOR_CORES / set_moe_tensor_cores)
// 1 tensor cores, 0 SIMT; automatic (-1): tensor cores from kMoeTensorCoreRowsPerExpert rows per
// expert, and always in deterministic mode (the choice must not depend on the token count).
inline bool moe_tensor_cores(int mode, bool deterministic, int64_t pairs, int64_t experts) {
  if (mode >= 0) return mode == 1;
  return deterministic || pairs >= kMoeTensorCoreRowsPerExpert * experts;
}

// Row groups per pass of the tensor-core expert kernels (moe_mma.cu): four 16-row groups share
// each weight fragment from this many rows per expert on average (a quarter of the weight
// traffic; the same bits as one group, so deterministic mode may choose by row count too).
// `forced` (TANDEM_MOE_ROW_GROUPS / set_moe_row_groups): 1 or 4; 0 automatic.
constexpr int64_t kMoeGroupedPassRowsPerExpert = 32;
inline int moe_row_groups(int forced, int64_t pairs, int64_t experts) {
  if (forced == 1 || forced == 4) return forced;
  return pairs >= kMoeGroupedPassRowsPerExpert * experts ? 4 : 1;
}

// The grouped wgmma expert GEMM (moe_wgmma.cu) from this many rows per expert on average in
// default mode (below it, the SIMT kernels of moe.cu), and at every size in deterministic mode:
// one kernel at every token count keeps a row's bits independent of the batch. It replaces the
// tensor-core kernels of moe_mma.cu and the host path below, which remain for `mode` = 0
// (TANDEM_MOE_WGMMA / set_moe_wgmma; 1 forces the wgmma kernels at every size).
constexpr int64_t kMoeWgmmaRowsPerExpert = 1;
inline bool moe_wgmma(int mode, bool deterministic, int64_t pairs, int64_t experts) {
  if (mode >= 0) return mode == 1;
  return deterministic || pairs >= kMoeWgmmaRowsPerExpert * experts;
}

// The host path (cuBLASLt per expert): many rows per expert, never while capturing (it syncs),
// never in deterministic mode (cuBLASLt picks algorithms by row count). `capturing` is called
// only when the size test passes, as the backend always did.
template <typename Capturing>
bool moe_host_path(int64_t pairs, int64_t experts, bool deterministic, Capturing&& capturing) {
  return pairs >= kMoeHostPathRowsPerExpert * experts && !capturing() && !deterministic;
}

// The grouped FP8 wgmma expert GEMM (moe_wgmma_fp8.cu) for FP8 block experts: `mode` 1 at every
// size where the shapes allow it, 0 never, -1 (automatic) in place of the host path (one
// block-scaled cuBLASLt GEMM per expert behind a host sync), at the sizes where that runs, and
// for FP8 block experts (fp8_block) at every size in deterministic mode. On an H200 the grouped
// kernels take 0.74x the host path's time for FP8 block experts and 0.72x for MXFP4 W4A4
// (GLM-5.2's routed experts, 4096 tokens); in deterministic mode, where the grouped decode
// kernels ran at every size, they cut FP8 prefill time and match decode at one token
// (docs/benchmarks.md). MXFP4 experts stay on their own kernels there: converting their weights
// to FP8 at every decode step would cost 4x per token.
inline bool moe_fp8_wgmma(int mode, bool host_path, bool deterministic, bool fp8_block) {
  if (mode >= 0) return mode == 1;
  return host_path || (deterministic && fp8_block);
}

// FP8 block linears on the grouped FP8 wgmma kernel at every M (fp8_linear_wgmma: one kernel, so
// batch-invariant) in place of the weight stream and cuBLASLt: `mode` 1 always, 0 never, -1
// (automatic) in deterministic mode only. There it replaces the weight stream at every M (1.5-2x
// cuBLASLt's time above 64 rows, where the stream took 3-30x; 1.1-1.7x the stream's time at one
// row); in default mode the stream (decode) and cuBLASLt (prefill) are faster.
inline bool fp8_linear_wgmma(int mode, bool deterministic) {
  return mode >= 0 ? mode == 1 : deterministic;
}

// ---- quantized weights (FP8 block, MXFP4) -------------------------------------------------------
// Rows up to which linear on quantized weights runs the weight-streaming decode kernels
// (quant_kernels.h); above it FP8 block weights (128 x 128) go to cuBLASLt's block-scaled FP8
// GEMM, per-channel FP8 to a per-tensor FP8 GEMM plus a scale epilogue, MXFP4 to a bf16
// dequantization of the weight and the bf16 cuBLASLt GEMM. cuBLASLt's FP8 paths sit at 10-15 us
// per 6144x2048 GEMM whatever M is up to ~128 rows (dependencies.md, "cuBLASLt on the H200,
// measured"), so the decode kernels keep the small batches. Not measured on the kernels yet:
// kernel_bench --quant-only prints both sides.
constexpr int64_t kQuantDecodeMaxRows = 64;
// Deterministic mode keeps the decode kernels at every M: their reduction order is fixed by N, K
// and the SM count (batch-invariant); cuBLASLt picks algorithms by row count.
inline bool quant_lt_path(int64_t rows, bool deterministic) {
  return rows > kQuantDecodeMaxRows && !deterministic;
}

}  // namespace heuristics
}  // namespace tandem::cuda
