// The CUDA backend: every Backend op for bf16 activations and weights (fp32 accumulation; f32
// norms, biases, router and indexer-head weights as the loader keeps them; f32 outputs where the
// op's out tensor is f32). Checks dtypes, strides and alignment once per call with messages that
// name the op, then launches kernels from kernels.h on one stream.
//
// Graph-capturable: no allocation and no host synchronization inside an op, except the
// large-batch MoE path (cuBLASLt per expert), which is only taken when the stream is not being
// captured. Scratch is grow-only; a buffer that is outgrown stays alive (a captured graph may
// still point into it) until the backend is destroyed.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "backends/cuda/heuristics.h"
#include "ops/backend.h"

namespace tandem::cuda {

class LtGemm;
class LtFp8;

class CudaBackend final : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;

  void embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, bool shard,
                 Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                  Tensor& out) override;
  void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq,
            const RopeParams& p) override;
  void linear(const Tensor& x, const Weight& w, Tensor& out) override;
  void head_matmul(const Tensor& x, const Tensor& w, Tensor& out) override;
  void silu_mul(const Tensor& x, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float eps, Tensor& out) override;
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& out) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void kv_store(const Tensor& rows, const Tensor& slot_mapping, Tensor& pool) override;
  void mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                    const Tensor& inv_freq, const RopeParams& p, const Tensor& slot_mapping,
                    Tensor& pool) override;
  void kv_gather(const Tensor& pool, const AttentionMeta& meta, int64_t fp8_nope,
                 Tensor& out) override;
  void mla_decode(const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                  const Tensor& topk, float scale, Tensor& out) override;
  void mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& k_pe, const AttentionMeta& meta,
                   const Tensor& topk, float scale, Tensor& out) override;
  void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool, const AttentionMeta& meta,
                    Tensor& out) override;
  void moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& idx,
                 Tensor& weights) override;
  void moe_experts(const Tensor& x, const Weight& gate_up, const Weight& down, const Tensor& idx,
                   const Tensor& weights, Tensor& out) override;
  void argmax(const Tensor& logits, Tensor& out) override;
  void mask_logits(Tensor& logits, const Tensor& allowed) override;
  void sample(const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
              const Tensor& top_p, const Tensor& u, Tensor& out) override;
  void fill_random(Tensor& t, uint64_t seed, float scale) override;
  std::unique_ptr<Workspace> make_workspace(Device d, size_t bytes) override;
  std::unique_ptr<GraphRunner> make_graph_runner(Workspace& ws) override;

  // plan: split-KV partition for T query tokens of H heads over key lists of up to `range`
  // entries (dense: max_seq_len; sparse: top-k width) with Lc output columns.
  // wide: the 64-heads-per-block kernel (one block per token and split).
  // wgmma: the 64-head wgmma kernel applies (its one order, and the chain, in deterministic mode).
  MlaDecodePlan plan_mla_decode(int64_t T, int64_t H, int64_t range, int64_t Lc, bool wide = false,
                                bool wgmma = false) const;
  // Whether mla_decode runs the 64-heads-per-block kernel for T tokens of these dims
  // (heuristics::mla_wide): where it applies, from heuristics::kMlaWideMinTokens tokens, never in
  // deterministic mode (the kernel must not depend on the token count there, and the 16-head
  // kernel is the faster one at decode sizes);
  // TANDEM_MLA_WIDE=0 / 1 or set_mla_wide(0 / 1) force it off / on (where it applies, in either
  // mode), -1 restores the automatic choice.
  bool mla_wide(int64_t T, int64_t H, int64_t L, int64_t Lc) const;
  void set_mla_wide(int mode) { mla_wide_mode_ = mode; }
  // The 64-head kernel on warpgroup MMA (attention_wgmma.cu, bf16 pools) or on mma.sync
  // (attention_wide.cu, also FP8 pools). TANDEM_MLA_WGMMA=0 starts with mma.sync.
  void set_mla_wgmma(bool on) { mla_wgmma_ = on; }
  // Column parts of the wgmma kernel (1, 2, 4; 0: the plan's choice, which is 1 outside
  // deterministic mode). TANDEM_MLA_COLUMN_PARTS sets the starting value.
  void set_mla_column_parts(int parts) { mla_column_parts_ = parts; }
  // The chain's values kernel's columns per block (TANDEM_MLA_CHAIN_VALUE_COLS; the same bits;
  // 0: by the number of tokens).
  void set_mla_chain_value_cols(int cols) {
    mla_chain_value_cols_ = heuristics::chain_value_cols(cols);
  }
  // The chain of kernels that gives the one-block wgmma kernel's bits for few tokens
  // (attention_chain.cu): -1 the plan's choice (deterministic mode, up to
  // heuristics::kMlaChainMaxTokens tokens), 0 never, 1 wherever it fits (in either mode).
  // TANDEM_MLA_CHAIN sets the starting value.
  void set_mla_chain(int mode) { mla_chain_mode_ = mode; }

  // All launches go to this stream (the legacy default stream unless a graph capture set one).
  void set_stream(cudaStream_t s) { stream_ = s; }
  cudaStream_t stream() const { return stream_; }
  bool capturing() const;
  int num_sms() const { return num_sms_; }
  // mla_decode, mla_prefill and the indexer's scores on the tensor cores (default) or the SIMT
  // kernels (also: TANDEM_MLA_SIMT=1).
  void set_mla_tensor_cores(bool on) { mla_tensor_cores_ = on; }
  bool mla_tensor_cores() const { return mla_tensor_cores_; }
  // Which expert kernels moe_experts' device path runs (where the shapes allow the tensor-core
  // ones): mode 1 the tensor-core kernels, 0 the SIMT ones, -1 (default) the tensor-core
  // kernels from heuristics::kMoeTensorCoreRowsPerExpert rows per expert on average, and always
  // in deterministic mode (the choice must not depend on the token count there). Also
  // TANDEM_MOE_TENSOR_CORES=0 / 1.
  void set_moe_tensor_cores(int mode) { moe_tc_mode_ = mode; }
  // 16-row groups per pass of the tensor-core expert kernels (heuristics::moe_row_groups): 0
  // automatic, 1 or 4 forced. TANDEM_MOE_ROW_GROUPS sets the starting value.
  void set_moe_row_groups(int groups) { moe_row_groups_ = groups; }
  // The quantized decode kernels' stream shape (quant_mma.cuh, with_nt_ring): 2, 23 or 24 (two
  // chunks per warp in any, 170 or 128 registers); 0 (default) the format's own. The results do
  // not depend on it. TANDEM_QUANT_RING sets the starting value.
  void set_quant_ring(int depth) { quant_ring_ = depth; }
  // How many experts moe_experts' many-token path runs at a time (1-4; also
  // TANDEM_EXPERT_STREAMS).
  void set_expert_streams(int n) { expert_streams_used_ = n < 1 ? 1 : n > 4 ? 4 : n; }
  // Whether that path groups the experts into batched GEMMs (default; TANDEM_MOE_GROUPED=0 off).
  void set_moe_grouped(bool on) { moe_grouped_ = on; }
  // The grouped wgmma expert GEMM (moe_wgmma.cu): mode 1 at every size where the shapes allow
  // it (deterministic mode included), 0 never, -1 (default) from
  // heuristics::kMoeWgmmaRowsPerExpert rows per expert in default mode. Also TANDEM_MOE_WGMMA.
  void set_moe_wgmma(int mode) { moe_wgmma_mode_ = mode; }
  // Whether moe_prepare also lists the wgmma path's tiles and gathers its few rows (default on:
  // two launches fewer per MoE layer; off runs the separate kernels, for tests and timing).
  void set_moe_fused_prepare(bool on) { moe_fused_prepare_ = on; }
  // The grouped FP8 wgmma expert GEMM (moe_wgmma_fp8.cu) for FP8 block experts and MXFP4 W4A4
  // experts (heuristics::moe_fp8_wgmma): 1 at every size where the shapes allow it, 0 never, -1
  // where the cuBLASLt-per-expert host path would run and, for FP8 block experts, at every size
  // in deterministic mode. Also TANDEM_MOE_FP8_WGMMA.
  void set_moe_fp8_wgmma(int mode) { moe_fp8_wgmma_mode_ = mode; }
  int moe_fp8_wgmma() const { return moe_fp8_wgmma_mode_; }
  // The MXFP4 W4A4 experts take the same kernels on FP8 copies of their weights, converted a
  // group of experts at a time into at most this many bytes of scratch (tests set it small to
  // run several groups).
  void set_mxfp4_convert_bytes(int64_t bytes) { mxfp4_convert_bytes_ = bytes; }
  // FP8 block linears on the grouped FP8 wgmma kernel (heuristics::fp8_linear_wgmma): 1 at every
  // M, 0 never, -1 at every M in deterministic mode only. Also TANDEM_FP8_LINEAR_WGMMA.
  void set_fp8_linear_wgmma(int mode) { fp8_linear_wgmma_mode_ = mode; }
  int fp8_linear_wgmma() const { return fp8_linear_wgmma_mode_; }
  bool moe_tensor_cores(int64_t pairs, int64_t experts) const;

  // The side branch runs on a second stream, forked from and joined to the current one with
  // events (graph-capturable: the branch becomes a parallel path of the captured graph). Its
  // ops get their own scratch and cuBLASLt workspace.
  void begin_side() override;
  void end_side() override;
  void join_side() override;

  void set_deterministic(bool on) override;
  bool deterministic() const { return deterministic_; }
  // Deterministic mode's bf16 and f32 linears and head_matmul: cuBLASLt's batch-invariant
  // algorithms (default, true) or, with false, the tensor-core kernel of gemm_tc.cu and the
  // skinny kernel, the fallbacks (tests run both; kernel_bench compares them).
  void set_invariant_cublaslt(bool on) { invariant_cublaslt_ = on; }
  // Deterministic mode: bf16 projections of at most this many weights take the tensor-core
  // kernel at every row count (heuristics::det_linear_tc; TANDEM_DET_TC_MAX_WEIGHTS). 0: never.
  void set_det_tc_max_weights(int64_t n) { det_tc_max_weights_ = n; }

  // The kernel-choice thresholds live in heuristics.h, with the measurements behind them.
  static constexpr int64_t kSkinnyMaxRows = heuristics::kSkinnyMaxRows;

  // Quantized weights (cuda_quant.cpp; docs/quantization.md), each input quantized by its
  // weight's rule (Weight::act, Weight::ue8m0). linear on a kFp8Block or kMxfp4 weight: the
  // weight-streaming decode kernels up to heuristics::kQuantDecodeMaxRows rows and at every M in
  // deterministic mode (batch-invariant, graph-capturable); above, cuBLASLt (block-scaled FP8;
  // per-tensor FP8 + a scale epilogue for per-channel FP8; bf16 on the dequantized weight for
  // MXFP4).
  void quant_linear(const Tensor& x, const Weight& w, Tensor& out);
  // The routed experts of one token chunk on quantized gate_up [E, 2I, D] and down [E, D, I]
  // weights: moe_experts' device path, or with host_path the cuBLASLt-per-expert path.
  void quant_moe_chunk(const Tensor& x, const Weight& gate_up, const Weight& down,
                       const Tensor& idx, const Tensor& weights, Tensor& out, bool host_path);

 private:
  // Scratch for one op's intermediates, valid until the next op is enqueued.
  void* scratch(size_t bytes);
  void skinny(const void* x, int64_t x_rs, int64_t x_bs, const Tensor& w, int64_t w_bs, Tensor& out,
              int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K, int64_t batch);
  // The tensor-core kernel for bf16 weights; false (nothing done) where it does not apply.
  bool tc(const void* x, int64_t x_rs, int64_t x_bs, const Tensor& w, int64_t w_bs, Tensor& out,
          int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K, int64_t batch);
  // Deterministic mode, a shape cuBLASLt has no batch-invariant algorithm for: warns once.
  void invariant_fallback(const char* op, int64_t N, int64_t K);
  void fp8_linear(const Tensor& x, const Weight& w, Tensor& out);
  void mxfp4_linear(const Tensor& x, const Weight& w, Tensor& out);
  // The FP8 cuBLASLt GEMMs (created at first use), on this line's workspace.
  LtFp8& lt8();
  void moe_chunk(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& idx,
                 const Tensor& weights, Tensor& out, bool host_path, bool wgmma);
  // quant_moe_chunk on the grouped FP8 wgmma kernels (cuda_quant_moe_wgmma.cpp): FP8 block
  // experts, or MXFP4 W4A4 experts as exact FP8 blocks (mxfp4_fp8.cu).
  void grouped_fp8_moe_chunk(const Tensor& x, const Weight& gate_up, const Weight& down,
                             const Tensor& idx, const Tensor& weights, Tensor& out);
  // Whether moe_experts runs a chunk of `pairs` routed rows on the grouped wgmma kernels.
  bool moe_wgmma_path(int64_t pairs, int64_t E, int64_t I, int64_t D) const;

  cudaStream_t stream_ = nullptr;
  int num_sms_ = 132;
  bool mla_tensor_cores_ = true;
  int moe_tc_mode_ = -1;           // TANDEM_MOE_TENSOR_CORES: -1 automatic, 0 off, 1 on
  int moe_wgmma_mode_ = -1;        // TANDEM_MOE_WGMMA: -1 automatic, 0 off, 1 on
  bool moe_fused_prepare_ = true;  // TANDEM_MOE_FUSED_PREPARE
  int moe_fp8_wgmma_mode_ = -1;    // TANDEM_MOE_FP8_WGMMA: -1 automatic, 0 off, 1 on
  int64_t mxfp4_convert_bytes_ = int64_t{1} << 30;
  int fp8_linear_wgmma_mode_ = -1;  // TANDEM_FP8_LINEAR_WGMMA: -1 automatic, 0 off, 1 on
  bool deterministic_ = false;
  bool invariant_cublaslt_ = true;
  int64_t det_tc_max_weights_ = 0;
  std::unique_ptr<LtGemm> lt_;
  std::set<std::pair<int64_t, int64_t>> warned_fallback_;
  std::unique_ptr<LtFp8> lt8_;
  // Scratch of the main line [0] and of the side branch [1].
  void* scratch_[2] = {nullptr, nullptr};
  size_t scratch_bytes_[2] = {0, 0};
  std::vector<void*> retired_;  // outgrown scratch buffers, freed with the backend
  // Arrival counters of the skinny kernel's split tiles, main line [0] and side branch [1]
  // (kSplitCounters each, zeroed once; every launch leaves them zeroed).
  static constexpr int64_t kSplitCounters = 1 << 16;
  int* split_counters_[2] = {nullptr, nullptr};
  cudaStream_t side_stream_ = nullptr;
  cudaStream_t main_stream_ = nullptr;  // the stream a side branch forked from
  cudaEvent_t fork_event_ = nullptr, join_event_ = nullptr;
  // moe_experts' host path runs its per-expert GEMMs up to this many at a time
  // (expert_streams_used_, TANDEM_EXPERT_STREAMS), on these streams (created at first use) with
  // cuBLASLt workspace slots 2.. (cuda_moe.cpp says why).
  static constexpr int kExpertStreams = 4;
  int expert_streams_used_ = kExpertStreams;
  cudaStream_t expert_streams_[kExpertStreams] = {};
  cudaEvent_t expert_events_[kExpertStreams] = {};
  cudaEvent_t expert_fork_ = nullptr;
  void create_expert_streams();
  // moe_experts' host path with the experts grouped by padded row count, one pointer-array
  // batched GEMM per group (cuda_moe.cpp); false (nothing done) when no expert has rows.
  // TANDEM_MOE_GROUPED=0: the per-expert GEMMs on the expert streams instead.
  static constexpr int64_t kGroupRows = 16;
  bool moe_grouped_ = true;
  bool moe_host_grouped(const std::vector<int32_t>& cnt, const std::vector<int32_t>& off,
                        const std::vector<int32_t>& inv_h, const std::vector<int32_t>& idx_h,
                        const uint16_t* xs, const uint16_t* gu, const uint16_t* dn, uint16_t* g,
                        uint16_t* h, float* y, int32_t* inv_pad, void** ptrs, int64_t D, int64_t I);
  bool in_side_ = false;
  bool side_stream_on_ = true;     // TANDEM_SIDE_STREAM=0: side branches run in order
  bool last_block_reduce_ = true;  // TANDEM_SKINNY_LAST_BLOCK_REDUCE=0: a second reduce kernel
  int64_t mla_min_split_ = 64;     // TANDEM_MLA_MIN_SPLIT: fewest keys per mla_decode split
  int64_t mla_det_split_ = heuristics::kDeterministicMlaSplit;  // TANDEM_MLA_DET_SPLIT
  int mla_wide_mode_ = -1;    // TANDEM_MLA_WIDE: -1 automatic, 0 off, 1 on
  bool mla_wgmma_ = true;     // TANDEM_MLA_WGMMA
  int mla_column_parts_ = 0;  // TANDEM_MLA_COLUMN_PARTS: 1 / 2 / 4 forced, else the plan's choice
  int mla_chain_value_cols_ = 0;  // TANDEM_MLA_CHAIN_VALUE_COLS (0: by the number of tokens)
  int mla_chain_mode_ = -1;       // TANDEM_MLA_CHAIN: -1 the plan's, 0 never, 1 wherever it fits
  int moe_row_groups_ = 0;        // TANDEM_MOE_ROW_GROUPS: 0 automatic, 1 / 4 forced
  int quant_ring_ = 0;            // TANDEM_QUANT_RING: 0 per format, 2 / 23 / 24 forced
};

// The backend registered for DeviceType::CUDA (null before init_cuda_backend succeeds).
CudaBackend* cuda_backend();

}  // namespace tandem::cuda
