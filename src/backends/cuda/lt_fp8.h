// cuBLASLt FP8 GEMM (prefill-sized M) in the engine's row-major convention:
// D[M, N] = dequant(Xq)[M, K] . dequant(W)[N, K]^T, fp32 accumulation, D bf16 or f32.
// The layout is the one measured on the H200 (/work/shared/reference/dependencies.md,
// "cuBLASLt on the H200, measured"): cuBLAS A = the weights (e4m3, rows = K, cols = N, ld = K,
// TRANSA = T), B = the activations (e4m3, rows = K, cols = M, ld = K, TRANSB = N), D = (rows = N,
// cols = M, ld = ldd). The swapped operand order is accepted at M = 1 and returns wrong results:
// never use it. Descriptors and the heuristic's algorithm are cached per shape, so a call after
// the first does no search (graph-capturable; the scale pointers are set on the cached
// descriptor at each call).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace tandem::cuda {

class LtFp8 {
 public:
  enum class Scales : int {
    // w_scale: BLK128x128 f32 [ceil(N/128)][roundup(ceil(K/128), 4)] (K-block index contiguous);
    // x_scale: VEC128 f32, element (m, kb) at kb * M + m. M must be a multiple of 4.
    kBlock128 = 0,
    // w_scale: [N] f32 (per output channel); x_scale: [M] f32 (per token). cuBLASLt's
    // OUTER_VEC_32F mode; whether the H200 build offers an algorithm for it is not measured yet
    // (gemm returns false where it does not: the caller runs kTensor into f32 and scales).
    kOuterVec = 1,
    // One f32 each (device pointers): per-tensor FP8, the rate the block-scaled modes are
    // measured against.
    kTensor = 2,
  };

  LtFp8();
  ~LtFp8();
  LtFp8(const LtFp8&) = delete;
  LtFp8& operator=(const LtFp8&) = delete;

  // xq: e4m3 [M, K] contiguous rows (ld K); w: e4m3 [N, K] contiguous; d: rows strided by ldd.
  // Returns false when cuBLASLt offers no algorithm (the caller falls back).
  bool gemm(Scales mode, const void* xq, const float* x_scale, const void* w, const float* w_scale,
            void* d, int64_t ldd, bool d_f32, int64_t M, int64_t N, int64_t K, cudaStream_t s);
  // Whether gemm has an algorithm for this shape (runs the heuristic once, caches the answer).
  bool supported(Scales mode, bool d_f32, int64_t M, int64_t N, int64_t K, int64_t ldd);
  // A device 1.0f: the scale pointers of kTensor for a GEMM whose scales are applied elsewhere.
  const float* unit_scale() const { return one_; }
  // As LtGemm::use_workspace: concurrent GEMMs (main stream, side branch) use different slots.
  void use_workspace(int slot) { slot_ = slot; }

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
    bool ok = false;
  };
  using Key = std::tuple<int, bool, int64_t, int64_t, int64_t, int64_t>;
  Plan& plan(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_[2] = {nullptr, nullptr};
  float* one_ = nullptr;
  int slot_ = 0;
  size_t workspace_bytes_ = 32u << 20;
  std::map<Key, Plan> plans_;
};

}  // namespace tandem::cuda
