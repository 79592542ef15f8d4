// cuBLASLt bf16 GEMM in the engine's row-major convention: D[M, N] = X[M, K] . W[N, K]^T, fp32
// accumulation, D bf16 or f32. Descriptors are cached per shape, stride and alignment, so a call
// after the first does no host-side work (and is capturable into a CUDA graph: one preallocated
// workspace, no allocation); the algorithm is the heuristic's pick at the top of M's row bucket
// (heuristics::lt_row_bucket), searched once per bucket.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "backends/cuda/heuristics.h"

namespace tandem::cuda {

class LtGemm {
 public:
  LtGemm();
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // x: bf16 rows strided by ldx; w: bf16 [N, K] rows strided by ldw; d: rows strided by ldd.
  // Returns false when cuBLASLt offers no algorithm for the shape (the caller falls back).
  // batch > 1: `batch` independent GEMMs whose operands start stride_x / stride_w / stride_d
  // elements apart (head_matmul: one per head).
  bool gemm(const void* x, int64_t ldx, const void* w, int64_t ldw, void* d, int64_t ldd,
            bool d_f32, int64_t M, int64_t N, int64_t K, cudaStream_t s, int64_t batch = 1,
            int64_t stride_x = 0, int64_t stride_w = 0, int64_t stride_d = 0);
  // `batch` GEMMs D_i[M, N] = X_i[M, K] . W_i[N, K]^T in one call, their operands' addresses
  // read from device arrays of pointers (cuBLASLt's pointer-array batch mode). Every pointer
  // and row must be 16-byte aligned (the caller's guarantee: the plan is chosen for that).
  bool gemm_ptr_array(const void* const* x, int64_t ldx, const void* const* w, int64_t ldw,
                      void* const* d, int64_t ldd, bool d_f32, int64_t M, int64_t N, int64_t K,
                      int64_t batch, cudaStream_t s);
  // f32 x and w, f32 d, in IEEE fp32 arithmetic (CUBLAS_COMPUTE_32F: no TF32). The backend's
  // fp32-weight linears no longer use it (the exact bf16 split on tensor cores is 2-5x faster at
  // prefill sizes, heuristics::linear_f32_split_path): kernel_bench --f32-only's library baseline.
  bool gemm_f32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* d, int64_t ldd,
                int64_t M, int64_t N, int64_t K, cudaStream_t s);
  // Which workspace the next calls use: GEMMs that may run concurrently (the main stream, the
  // backend's side branch, moe_experts' expert streams) must not share one. Slots 0 and 1 exist
  // from the start; the others are allocated at their first use (never during a capture: only
  // moe_experts' host path uses them).
  static constexpr int kSlots = 6;
  void use_workspace(int slot);
  int workspace() const { return slot_; }

  // Batch-invariant mode (deterministic inference): gemm and gemm_f32 then only run algorithms
  // without split-K whose output equals the shape's anchor bit for bit: the anchor is the
  // heuristic's first pick at kReferenceRows rows with split-K turned off, one kernel
  // configuration for every M (its K loop does not depend on M, so neither do a row's bits).
  // Measured on the H200 (bench/kernels/lt_algo_survey.cpp): on the GLM-5.2 projections every
  // algorithm of the anchor's id without split-K gives the same bits whatever its tile, at every
  // M from 1 to 256 (only the split count changes the sums), and the fastest of them is within
  // 3% of the fastest algorithm at every M. So per row-count bucket the candidates (the
  // heuristic's algorithms of the anchor's id, split-K off) are run once on the call's own
  // operands (not while capturing: then the anchor runs), those whose rows differ from the
  // anchor's are dropped (kernels that split K inside a block would), and the fastest of the
  // rest runs from then on. gemm_f32 (fp32 weights with one or two output tiles) keeps the
  // reference pick's K splits instead of turning them off, the same count at every M. An M the
  // anchor does not accept (a split workspace grows with M) runs in row chunks.
  void set_batch_invariant(bool on) { invariant_ = on; }
  bool batch_invariant() const { return invariant_; }
  static constexpr int64_t kReferenceRows = 64;
  static constexpr int kInvariantAlignment = 16;

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
    // Batch-invariant plans: the anchor, then the other candidates (checked against it when
    // timed).
    std::vector<cublasLtMatmulAlgo_t> candidates;
    bool timed = false;
    bool launched = false;  // its first launch is logged (TANDEM_LOG=debug)
    bool borrowed = false;  // algo is its row bucket's (lt_row_bucket), not this M's own pick
  };
  // M, N, K, ldx, ldw, ldd, d_f32, alignments of x, w, d, batch, strides, f32 x and w,
  // pointer-array batch mode, batch-invariant mode.
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int, int, int,
                         int64_t, int64_t, int64_t, int64_t, bool, bool, bool>;
  Plan& plan(const Key& key);
  // p's algorithm: the heuristic's first pick at p's own M (p.ok false when there is none).
  void exact_algorithm(Plan& p, const Key& key);
  // The heuristic's algorithms for the key's shape, best first.
  std::vector<cublasLtMatmulAlgo_t> heuristic(const Plan& p, const Key& key, int count);
  // Batch-invariant mode: the anchor and the candidates for p (split-K forced off, the anchor's
  // algorithm id); no plan where this M does not accept the anchor.
  void invariant_candidates(Plan& p, const Key& key);
  // Runs p's candidates on this call's operands (the output is rewritten by the real run), keeps
  // those whose rows equal the anchor's and picks the fastest; the choice is shared by every M of
  // the same power-of-two bucket.
  void time_candidates(Plan& p, const Key& key, const void* x, const void* w, void* d,
                       cudaStream_t s);
  bool run(const void* x, int64_t ldx, const void* w, int64_t ldw, void* d, int64_t ldd, bool d_f32,
           bool in_f32, int64_t M, int64_t N, int64_t K, cudaStream_t s, int64_t batch,
           int64_t stride_x, int64_t stride_w, int64_t stride_d);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_[kSlots] = {};
  int slot_ = 0;
  size_t workspace_bytes_ = 32u << 20;
  std::map<Key, Plan> plans_;
  bool invariant_ = false;
  std::map<Key, std::optional<cublasLtMatmulAlgo_t>> anchor_;  // M zeroed: the shape's anchor
  std::map<Key, cublasLtMatmulAlgo_t> bucket_best_;            // M rounded up to a power of two
  void* flush_ = nullptr;                                      // evicts the L2 between timed runs
};

}  // namespace tandem::cuda
