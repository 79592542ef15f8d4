// The CUDA backend's host-side kernel choices that deterministic mode relies on (heuristics.h is
// host-only, so CI checks these without a GPU): in deterministic mode nothing a token's row goes
// through may change with the number of query tokens in the step, or greedy speculation (a
// verify of S + 1 tokens per sequence against a decode of one) stops being lossless.
#ifdef TANDEM_WITH_CUDA
#include "backends/cuda/expert_tiles.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "runtime/model_runner.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tandem::cuda {
namespace {

constexpr int64_t kSms = 132;  // the H200's

TEST(CudaHeuristics, DeterministicMlaDecodeChoiceIgnoresTheTokenCount) {
  // GLM-5.2's 64 heads (the 64-head kernel applies), dense and top-2048 key ranges.
  for (int64_t range : {700, 2048, 32768}) {
    MlaDecodePlan first;
    for (int64_t T : {1, 2, 4, 15, 16, 17, 64, 128, 512, 4096}) {
      const bool wide = heuristics::mla_wide(true, true, -1, true, T);
      EXPECT_TRUE(wide) << "T=" << T << ": the 64-head kernel at every token count";
      const MlaDecodePlan p = heuristics::plan_mla_decode(T, 64, range, 512, wide, kSms, true, 64);
      EXPECT_EQ(p.split_len, heuristics::kDeterministicMlaSplit) << "T=" << T;
      if (T == 1) first = p;
      EXPECT_EQ(p.num_splits, first.num_splits) << "T=" << T << " range " << range;
      // Column parts may follow T (they do not change the bits): more for fewer blocks, never
      // past one wave.
      EXPECT_TRUE(p.column_parts == 1 || p.column_parts == 2 || p.column_parts == 4);
      if (p.column_parts > 1) {
        EXPECT_LE(T * p.num_splits * p.column_parts, kSms) << "T=" << T;
      }
    }
  }
  // Batch-1 decode over top-2048: four 512-key splits, each on four blocks of 128 columns.
  EXPECT_EQ(heuristics::plan_mla_decode(1, 64, 2048, 512, true, kSms, true, 64).column_parts, 4);
  EXPECT_EQ(heuristics::plan_mla_decode(128, 64, 2048, 512, true, kSms, true, 64).column_parts, 1);
  // Where the 64-head kernel does not apply (other head counts), never, whatever T.
  for (int64_t T : {1, 16, 128}) EXPECT_FALSE(heuristics::mla_wide(true, false, -1, true, T));
}

TEST(CudaHeuristics, DeterministicWgmmaMlaDecodeKeepsOneOrderAtEveryTokenCount) {
  // Where the 64-head wgmma kernel applies: never a split (the keys in 64-key blocks, first to
  // last), the chain of kernels for few tokens where its limits allow, the one-block kernel
  // otherwise; both give the same bits.
  for (int64_t range : {1, 700, 2048, 4096, 4097, 32768})
    for (int64_t T : {1, 2, 4, 15, 16, 17, 60, 64, 65, 128, 512, 4096}) {
      const MlaDecodePlan p =
          heuristics::plan_mla_decode(T, 64, range, 512, true, kSms, true, 64, 512, true, -1);
      const std::string what = "T=" + std::to_string(T) + " range " + std::to_string(range);
      EXPECT_EQ(p.num_splits, 1) << what;
      EXPECT_GE(p.split_len, range) << what;
      const int64_t blocks = (range + 63) / 64;
      const bool fits =
          blocks <= heuristics::kMlaChainMaxBlocks &&
          T * blocks <= heuristics::kMlaChainMaxBlocks * heuristics::kMlaChainMaxTokens;
      EXPECT_EQ(p.chain, fits && T <= heuristics::kMlaChainMaxTokens) << what;
      if (p.chain) {
        EXPECT_EQ(p.chain_blocks, blocks) << what;
        EXPECT_EQ(p.scratch_bytes, static_cast<size_t>(T * blocks) * k::kMlaChainBytesPerBlock);
        EXPECT_TRUE(p.scores_per_block == 1 || p.scores_per_block == 2) << what;
      } else {
        EXPECT_EQ(p.scratch_bytes, 0u) << what;
      }
      // Forced off: the one-block kernel; forced on: the chain wherever it fits.
      EXPECT_FALSE(
          heuristics::plan_mla_decode(T, 64, range, 512, true, kSms, true, 64, 512, true, 0).chain);
      EXPECT_EQ(
          heuristics::plan_mla_decode(T, 64, range, 512, true, kSms, true, 64, 512, true, 1).chain,
          fits)
          << what;
    }
  // Batch 1 over top-2048: 32 blocks of the scores kernel, one key block each.
  const MlaDecodePlan one =
      heuristics::plan_mla_decode(1, 64, 2048, 512, true, kSms, true, 64, 512, true, -1);
  EXPECT_EQ(one.chain_blocks, 32);
  EXPECT_EQ(one.scores_per_block, 1);
  // Default mode takes the chain only when told to.
  EXPECT_FALSE(
      heuristics::plan_mla_decode(1, 64, 2048, 512, true, kSms, false, 64, 512, true, -1).chain);
  EXPECT_TRUE(
      heuristics::plan_mla_decode(1, 64, 2048, 512, true, kSms, false, 64, 512, true, 1).chain);
  // Where the wgmma kernel does not apply, deterministic mode keeps its fixed splits.
  EXPECT_FALSE(
      heuristics::plan_mla_decode(1, 64, 2048, 512, true, kSms, true, 64, 512, false, 1).chain);
}

TEST(CudaHeuristics, DefaultModeMlaDecodeFollowsTheTokenCount) {
  // Default mode may change kernel and splits with T (and does): the 16-head kernel below
  // kMlaWideMinTokens, more splits for fewer tokens.
  EXPECT_FALSE(heuristics::mla_wide(true, true, -1, false, heuristics::kMlaWideMinTokens - 1));
  EXPECT_TRUE(heuristics::mla_wide(true, true, -1, false, heuristics::kMlaWideMinTokens));
  const auto one = heuristics::plan_mla_decode(1, 64, 2048, 512, false, kSms, false, 64);
  const auto many = heuristics::plan_mla_decode(128, 64, 2048, 512, true, kSms, false, 64);
  EXPECT_GT(one.num_splits, many.num_splits);
  EXPECT_EQ(many.column_parts, 1);  // default mode shortens splits instead
}

TEST(CudaHeuristics, DeterministicLinearsTakeOnePathAtEveryRowCount) {
  // bf16 weights: cuBLASLt's batch-invariant algorithms at every M, one row included; fp32
  // weights the skinny family at every M in deterministic mode (default mode: the skinny kernel
  // at one row for bf16, the exact bf16 split of fp32 weights from 128 rows for wide ones and
  // from 512 for narrow ones).
  for (int64_t M : {1, 2, 64, 127, 128, 255, 256, 511, 512, 4096}) {
    EXPECT_TRUE(heuristics::linear_lt_path(M, true)) << M;
    EXPECT_FALSE(heuristics::linear_f32_split_path(M, 256, true)) << M;
    EXPECT_FALSE(heuristics::linear_f32_split_path(M, 32, true)) << M;
    EXPECT_EQ(heuristics::linear_f32_split_path(M, 256, false), M >= 128) << M;
    EXPECT_EQ(heuristics::linear_f32_split_path(M, 32, false), M >= 512) << M;
  }
  EXPECT_FALSE(heuristics::linear_lt_path(1, false));
  // TANDEM_DET_TC_MAX_WEIGHTS: the tensor-core kernel for shapes of at most that many weights,
  // decided by the shape alone (no row count goes in); 0, the default, never.
  EXPECT_FALSE(heuristics::det_linear_tc(256, 768, 0));
  EXPECT_TRUE(heuristics::det_linear_tc(256, 768, 256 * 768));
  EXPECT_FALSE(heuristics::det_linear_tc(256, 769, 256 * 768));
  EXPECT_FALSE(heuristics::det_linear_tc(6144, 2048, 1100000));
}

// Default-mode cuBLASLt GEMMs run their row bucket's algorithm: the bucket must hold the rows,
// be a ladder value (2^k or 3 * 2^(k-1)), be the smallest such, stay under 1.5x the rows, and
// map every count in it to itself, so the kernels one pass can pick are few.
TEST(CudaHeuristics, LtRowBucketsAreTheSmallestLadderValueAtOrAboveTheRows) {
  const auto on_ladder = [](int64_t v) {
    while (v % 2 == 0) v /= 2;
    return v == 1 || v == 3;
  };
  EXPECT_EQ(heuristics::lt_row_bucket(1), 1);
  EXPECT_EQ(heuristics::lt_row_bucket(2), 2);
  EXPECT_EQ(heuristics::lt_row_bucket(3), 3);
  EXPECT_EQ(heuristics::lt_row_bucket(5), 6);
  EXPECT_EQ(heuristics::lt_row_bucket(7), 8);
  EXPECT_EQ(heuristics::lt_row_bucket(1136), 1536);
  EXPECT_EQ(heuristics::lt_row_bucket(2048), 2048);
  EXPECT_EQ(heuristics::lt_row_bucket(2049), 3072);
  std::set<int64_t> buckets;
  for (int64_t rows = 1; rows <= 20000; ++rows) {
    const int64_t b = heuristics::lt_row_bucket(rows);
    ASSERT_GE(b, rows);
    ASSERT_TRUE(on_ladder(b)) << rows << " -> " << b;
    for (int64_t v = rows; v < b; ++v) {
      ASSERT_FALSE(on_ladder(v)) << rows << " skips " << v;
    }
    if (rows > 1) {
      ASSERT_LT(static_cast<double>(b), 1.5 * static_cast<double>(rows)) << rows;
    }
    ASSERT_EQ(heuristics::lt_row_bucket(b), b);
    buckets.insert(b);
  }
  EXPECT_EQ(buckets.size(), 29u);  // 1, 2, 3, 4, 6, ..., 16384, 24576: 15 + 14
}

// The engine's start-up warm-up (ModelRunner::warm_up) runs the row counts of warm_up_rows:
// between them they must meet every cuBLASLt row bucket a step of at most `limit` rows can run
// in, and never more rows than the limit.
TEST(CudaHeuristics, WarmUpRowsMeetEveryRowBucketUpToTheLimit) {
  for (int64_t limit : {1, 2, 3, 5, 40, 64, 100, 2048, 3000, 8192}) {
    const std::vector<int64_t> rows = warm_up_rows(limit);
    ASSERT_FALSE(rows.empty());
    EXPECT_EQ(rows.back(), limit);
    std::set<int64_t> met;
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_LE(rows[i], limit);
      if (i > 0) EXPECT_LT(rows[i - 1], rows[i]) << "limit " << limit;
      met.insert(heuristics::lt_row_bucket(rows[i]));
    }
    for (int64_t m = 1; m <= limit; ++m)
      ASSERT_TRUE(met.count(heuristics::lt_row_bucket(m))) << "limit " << limit << " rows " << m;
    EXPECT_EQ(met.size(), rows.size()) << "limit " << limit << ": a bucket met twice";
  }
  EXPECT_EQ(warm_up_rows(40), (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40}));
}

TEST(CudaHeuristics, ForcedMlaColumnPartsAreOneTwoOrFour) {
  EXPECT_EQ(heuristics::mla_column_parts(2, 4), 2);
  EXPECT_EQ(heuristics::mla_column_parts(0, 4), 4);
  EXPECT_EQ(heuristics::mla_column_parts(3, 1), 1);  // not 1, 2 or 4: the plan's
}

TEST(CudaHeuristics, ChainValueColumnsAreSixtyFourThirtyTwoOrSixteen) {
  EXPECT_EQ(heuristics::Switches{}.mla_chain_value_cols, 0);  // automatic
  EXPECT_EQ(heuristics::chain_value_cols(64), 64);
  EXPECT_EQ(heuristics::chain_value_cols(32), 32);
  EXPECT_EQ(heuristics::chain_value_cols(16), 16);
  EXPECT_EQ(heuristics::chain_value_cols(8), 0);  // not a kernel's: automatic
}

TEST(CudaHeuristics, ChainValueColumnsNarrowWhileTheTokensLeaveSmsIdle) {
  // 132 SMs: 16 columns (32 blocks a token) up to 4 tokens, 32 (16 a token) up to 8, then 64.
  EXPECT_EQ(heuristics::chain_value_cols_for(0, 1, 132), 16);
  EXPECT_EQ(heuristics::chain_value_cols_for(0, 4, 132), 16);
  EXPECT_EQ(heuristics::chain_value_cols_for(0, 5, 132), 32);
  EXPECT_EQ(heuristics::chain_value_cols_for(0, 8, 132), 32);
  EXPECT_EQ(heuristics::chain_value_cols_for(0, 9, 132), 64);
  EXPECT_EQ(heuristics::chain_value_cols_for(0, 32, 132), 64);
  // A forced width wins at every token count.
  EXPECT_EQ(heuristics::chain_value_cols_for(64, 1, 132), 64);
  EXPECT_EQ(heuristics::chain_value_cols_for(16, 32, 132), 16);
}

TEST(CudaHeuristics, MoeRowGroupsFollowTheRowsPerExpert) {
  // Four 16-row groups per pass from 32 rows per expert on average (a 4,096-token GLM-5.2
  // prefill: 128), one below (decode: a handful); forced values win; the bits are the same
  // either way (CudaOps.MoeExpertRowGroupsGiveTheSameBits), so deterministic mode may choose.
  const int64_t E = 256;
  EXPECT_EQ(heuristics::moe_row_groups(0, 4096 * 8, E), 4);
  EXPECT_EQ(heuristics::moe_row_groups(0, 32 * E, E), 4);
  EXPECT_EQ(heuristics::moe_row_groups(0, 32 * E - 1, E), 1);
  EXPECT_EQ(heuristics::moe_row_groups(0, 128 * 8, E), 1);
  EXPECT_EQ(heuristics::moe_row_groups(1, 4096 * 8, E), 1);
  EXPECT_EQ(heuristics::moe_row_groups(4, 8, E), 4);
  EXPECT_EQ(heuristics::moe_row_groups(3, 4096 * 8, E), 4);  // not 1 or 4: automatic
}

TEST(CudaHeuristics, MoeWgmmaFromOneRowPerExpertAndAlwaysWhenDeterministic) {
  // Default mode: the grouped wgmma kernels from kMoeWgmmaRowsPerExpert rows per expert on
  // average (the SIMT kernels below); deterministic mode at every size; forced values win.
  const int64_t E = 256, at = heuristics::kMoeWgmmaRowsPerExpert * E;
  EXPECT_TRUE(heuristics::moe_wgmma(-1, false, 4096 * 8, E));
  EXPECT_TRUE(heuristics::moe_wgmma(-1, false, at, E));
  EXPECT_FALSE(heuristics::moe_wgmma(-1, false, at - 1, E));
  EXPECT_TRUE(heuristics::moe_wgmma(-1, true, 8, E));
  EXPECT_TRUE(heuristics::moe_wgmma(-1, true, 4096 * 8, E));
  EXPECT_TRUE(heuristics::moe_wgmma(1, false, 8, E));
  EXPECT_FALSE(heuristics::moe_wgmma(0, true, 4096 * 8, E));
}

TEST(CudaHeuristics, MoeFp8WgmmaReplacesTheHostPathByDefault) {
  // (mode, host_path, deterministic, fp8_block). 0 never; 1 everywhere; -1 (the default) where
  // the host path would run, and for FP8 block experts (not MXFP4) in deterministic mode.
  for (bool det : {false, true})
    for (bool fp8 : {false, true}) {
      EXPECT_FALSE(heuristics::moe_fp8_wgmma(0, true, det, fp8));
      EXPECT_FALSE(heuristics::moe_fp8_wgmma(0, false, det, fp8));
      EXPECT_TRUE(heuristics::moe_fp8_wgmma(1, false, det, fp8));
      EXPECT_TRUE(heuristics::moe_fp8_wgmma(-1, true, det, fp8));
    }
  EXPECT_FALSE(heuristics::moe_fp8_wgmma(-1, false, false, true));
  EXPECT_TRUE(heuristics::moe_fp8_wgmma(-1, false, true, true));
  EXPECT_FALSE(heuristics::moe_fp8_wgmma(-1, false, true, false));
  EXPECT_EQ(heuristics::Switches{}.moe_fp8_wgmma_mode, -1);
}

TEST(CudaHeuristics, Fp8LinearWgmmaInDeterministicModeByDefault) {
  EXPECT_FALSE(heuristics::fp8_linear_wgmma(-1, false));
  EXPECT_TRUE(heuristics::fp8_linear_wgmma(-1, true));
  for (bool det : {false, true}) {
    EXPECT_FALSE(heuristics::fp8_linear_wgmma(0, det));
    EXPECT_TRUE(heuristics::fp8_linear_wgmma(1, det));
  }
  EXPECT_EQ(heuristics::Switches{}.fp8_linear_wgmma_mode, -1);
}

// The grouped FP8 expert kernels' block order (expert_tiles.h) on tile lists built as their tiles
// kernel builds them: every (expert, weight tile, token tile) exactly once, and within an expert
// the token tile varying fastest (blocks reading the same weight rows side by side).
TEST(CudaHeuristics, ExpertBlocksCoverEveryTileOnceWeightTileMajor) {
  constexpr int kRowsPerTile = 128;
  const std::vector<std::vector<int>> cases = {
      {0, 1, 128, 129, 0, 300, 512, 7}, {4096}, {0, 0, 5}, {256, 257, 383, 384, 385}};
  for (const std::vector<int>& counts : cases)
    for (int col_tiles : {1, 3, 32, 48}) {
      std::vector<std::array<int, 3>> entries;  // (expert, first, count)
      for (int e = 0; e < static_cast<int>(counts.size()); ++e) {
        const int n = (counts[e] + kRowsPerTile - 1) / kRowsPerTile;
        const int first = static_cast<int>(entries.size());
        for (int j = 0; j < n; ++j) entries.push_back({e, first, n});
      }
      std::set<std::tuple<int, int, int>> seen;
      const int blocks = static_cast<int>(entries.size()) * col_tiles;
      for (int b = 0; b < blocks; ++b) {
        const auto& en = entries[b / col_tiles];
        const k::ExpertBlock eb = k::expert_block(b, col_tiles, en[0], en[1], en[2]);
        EXPECT_EQ(eb.expert, en[0]);
        ASSERT_GE(eb.col_tile, 0);
        ASSERT_LT(eb.col_tile, col_tiles);
        ASSERT_GE(eb.row_tile, 0);
        ASSERT_LT(eb.row_tile, en[2]);
        EXPECT_TRUE(seen.insert({eb.expert, eb.col_tile, eb.row_tile}).second)
            << "block " << b << " repeats a tile";
        if (b > 0 && entries[(b - 1) / col_tiles][0] == eb.expert) {
          const auto& pe = entries[(b - 1) / col_tiles];
          const k::ExpertBlock prev = k::expert_block(b - 1, col_tiles, pe[0], pe[1], pe[2]);
          // The token tile advances first; the weight tile only when it wraps.
          if (eb.row_tile > 0)
            EXPECT_TRUE(prev.col_tile == eb.col_tile && prev.row_tile == eb.row_tile - 1);
          else
            EXPECT_TRUE(prev.col_tile == eb.col_tile - 1 && prev.row_tile == en[2] - 1);
        }
      }
      EXPECT_EQ(static_cast<int>(seen.size()), blocks);
    }
}

}  // namespace
}  // namespace tandem::cuda
#endif  // TANDEM_WITH_CUDA
