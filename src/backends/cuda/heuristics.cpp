#include "backends/cuda/heuristics.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/kernels.h"

namespace tandem::cuda::heuristics {

namespace {
int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}
}  // namespace

Switches read_switches() {
  Switches s;
  const char* simt = std::getenv("TANDEM_MLA_SIMT");
  s.mla_tensor_cores = !(simt && *simt && *simt != '0');
  // Switches for A/B measurements of one build (docs/cuda-backend.md, "Switches").
  auto off = [](const char* name) {
    const char* v = std::getenv(name);
    return v && std::strcmp(v, "0") == 0;
  };
  s.side_stream = !off("TANDEM_SIDE_STREAM");
  s.last_block_reduce = !off("TANDEM_SKINNY_LAST_BLOCK_REDUCE");
  s.moe_grouped = !off("TANDEM_MOE_GROUPED");
  s.moe_fused_prepare = !off("TANDEM_MOE_FUSED_PREPARE");
  if (const char* v = std::getenv("TANDEM_DET_TC_MAX_WEIGHTS"); v && *v)
    s.det_tc_max_weights = std::max<int64_t>(0, std::atoll(v));
  if (const char* v = std::getenv("TANDEM_MOE_TENSOR_CORES"); v && *v)
    s.moe_tc_mode = std::atoi(v) != 0;
  if (const char* v = std::getenv("TANDEM_MLA_MIN_SPLIT")) s.mla_min_split = std::atoll(v);
  if (const char* v = std::getenv("TANDEM_MLA_DET_SPLIT"); v && std::atoll(v) > 0)
    s.mla_det_split = std::atoll(v);
  if (const char* v = std::getenv("TANDEM_MLA_WIDE"); v && *v) s.mla_wide_mode = std::atoi(v) != 0;
  if (const char* v = std::getenv("TANDEM_MLA_CHAIN"); v && *v)
    s.mla_chain_mode = std::clamp(std::atoi(v), -1, 1);
  if (const char* v = std::getenv("TANDEM_MLA_COLUMN_PARTS"); v && *v)
    s.mla_column_parts = std::atoi(v);
  if (const char* v = std::getenv("TANDEM_MLA_CHAIN_VALUE_COLS"); v && *v)
    s.mla_chain_value_cols = chain_value_cols(std::atoi(v));
  if (const char* v = std::getenv("TANDEM_MOE_WGMMA"); v && *v)
    s.moe_wgmma_mode = std::atoi(v) != 0;
  if (const char* v = std::getenv("TANDEM_MOE_FP8_WGMMA"); v && *v)
    s.moe_fp8_wgmma_mode = std::clamp(std::atoi(v), -1, 1);
  if (const char* v = std::getenv("TANDEM_FP8_LINEAR_WGMMA"); v && *v)
    s.fp8_linear_wgmma_mode = std::clamp(std::atoi(v), -1, 1);
  if (const char* v = std::getenv("TANDEM_MOE_ROW_GROUPS"); v && *v)
    s.moe_row_groups = std::atoi(v);
  if (const char* v = std::getenv("TANDEM_QUANT_RING"); v && *v) s.quant_ring = std::atoi(v);
  if (const char* v = std::getenv("TANDEM_FP8_WGMMA_KSTAGE"); v && *v)
    s.fp8_wgmma_k_stage = std::atoi(v);
  if (const char* v = std::getenv("TANDEM_FP8_WGMMA_SMALL_BOX"); v && *v)
    s.fp8_wgmma_small_box = std::strcmp(v, "0") != 0;
  s.mla_wgmma = !off("TANDEM_MLA_WGMMA");
  if (const char* v = std::getenv("TANDEM_EXPERT_STREAMS"); v && *v)
    s.expert_streams = std::clamp(std::atoi(v), 1, 4);
  return s;
}

bool mla_wide(bool tensor_cores, bool applies, int mode, bool deterministic, int64_t tokens) {
  if (!tensor_cores || !applies) return false;
  if (mode >= 0) return mode == 1;
  return deterministic || tokens >= kMlaWideMinTokens;
}

MlaDecodePlan plan_mla_decode(int64_t T, int64_t H, int64_t range, int64_t Lc, bool wide,
                              int64_t num_sms, bool deterministic, int64_t min_split_keys,
                              int64_t det_split, bool wgmma, int chain_mode) {
  constexpr int64_t NK = k::kMlaKeysPerChunk;
  range = std::max<int64_t>(range, 1);
  // Enough blocks for two per SM (the 16-head kernel) or about one (the wide kernel, 201 KB of
  // shared memory; a split costs a merge pass over [T, H, splits, Lc] f32 partials, 23 us at
  // 128 tokens, so 3/4 of the SMs busy is enough).
  const int64_t blocks = wide ? T : T * ((H + k::kMlaHeadsPerBlock - 1) / k::kMlaHeadsPerBlock);
  const int64_t sms = num_sms, target = wide ? 3 * sms / 4 : 2 * sms;
  MlaDecodePlan plan;
  const int64_t chain_blocks = (range + NK - 1) / NK;
  const bool chain_fits = wgmma && chain_blocks <= kMlaChainMaxBlocks &&
                          T * chain_blocks <= kMlaChainMaxBlocks * kMlaChainMaxTokens;
  if (chain_fits &&
      (chain_mode == 1 || (deterministic && chain_mode == -1 && T <= kMlaChainMaxTokens))) {
    plan.chain = true;
    plan.chain_blocks = chain_blocks;
    plan.scores_per_block = T * chain_blocks >= num_sms ? 2 : 1;
    plan.split_len = round_up(range, NK);
    plan.scratch_bytes = k::mla_chain_scratch_bytes(T, chain_blocks);
    return plan;
  }
  if (deterministic && wgmma) {
    // One split: the order of the chain above. Column parts (same bits) for fewer tokens.
    plan.split_len = round_up(range, NK);
    for (int parts : {4, 2})
      if (T * parts <= num_sms) {
        plan.column_parts = parts;
        break;
      }
    return plan;
  }
  if (deterministic) {
    // Split boundaries fixed by the key range alone: the same for 1 or S + 1 query tokens.
    plan.split_len = round_up(det_split, NK);
    plan.num_splits = (range + plan.split_len - 1) / plan.split_len;
    if (plan.num_splits > 1)
      plan.scratch_bytes = static_cast<size_t>(T * H * plan.num_splits) * (Lc + 1) * sizeof(float);
    // Few blocks (one per token and split): more of them, each on fewer value columns, up to one
    // wave. The splits stay as they are: their length is the reduction order.
    if (wide)
      for (int parts : {4, 2})
        if (T * plan.num_splits * parts <= num_sms) {
          plan.column_parts = parts;
          break;
        }
    return plan;
  }
  int64_t want = blocks >= target ? 1 : (target + blocks - 1) / blocks;
  want = std::min<int64_t>(want, 128);
  const int64_t min_split = std::max<int64_t>(min_split_keys, wide ? kMlaWideMinSplit : 1);
  plan.split_len = std::max(round_up(min_split, NK), round_up((range + want - 1) / want, NK));
  plan.num_splits = (range + plan.split_len - 1) / plan.split_len;
  if (plan.num_splits > 1)
    plan.scratch_bytes = static_cast<size_t>(T * H * plan.num_splits) * (Lc + 1) * sizeof(float);
  return plan;
}

int64_t indexer_token_chunk(int64_t T, int64_t max_len) {
  // Scores of up to 64M floats at a time: token chunks bound the scratch for long prefills.
  constexpr int64_t kMaxScores = int64_t{64} << 20;
  return std::clamp<int64_t>(kMaxScores / max_len, 1, T);
}

int64_t moe_token_chunk(int64_t T, int64_t D, int64_t I, int64_t slots) {
  // Token chunks bound the intermediates (48 KB per (token, slot) at GLM-5.2 sizes). Every
  // chunk streams all the experts' weights once (19.3 GB per bf16 GLM-5.2 layer, 4.6 ms at the
  // copy rate), so the bound is set high enough for a whole prefill step of the usual sizes:
  // 2 GiB is 5,461 tokens at GLM-5.2 sizes (512 MiB was 1,365: a 4,096-token prefill took three
  // passes over the weights, 26.0 ms for the routed experts).
  const int64_t per_pair = 2 * I * 2 + I * 2 + D * 4 + D * 2;
  return std::clamp<int64_t>((int64_t{2048} << 20) / std::max<int64_t>(1, per_pair * slots), 1, T);
}

}  // namespace tandem::cuda::heuristics
