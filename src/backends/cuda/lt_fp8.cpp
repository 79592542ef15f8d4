#include "backends/cuda/lt_fp8.h"

#include "backends/cuda/cuda_check.h"

namespace tandem::cuda {

namespace {

#define TD_LT8_CHECK(expr)                                                                     \
  do {                                                                                         \
    cublasStatus_t st_ = (expr);                                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::tandem::fail("cuBLASLt error {} at {}:{}", static_cast<int>(st_), __FILE__, __LINE__); \
  } while (0)

template <typename T>
void set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const T& v) {
  TD_LT8_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof(v)));
}

}  // namespace

LtFp8::LtFp8() {
  TD_LT8_CHECK(cublasLtCreate(&handle_));
  for (void*& w : workspace_) TD_CUDA_CHECK(cudaMalloc(&w, workspace_bytes_));
  const float one = 1.0f;
  TD_CUDA_CHECK(cudaMalloc(&one_, sizeof(float)));
  TD_CUDA_CHECK(cudaMemcpy(one_, &one, sizeof(float), cudaMemcpyHostToDevice));
}

LtFp8::~LtFp8() {
  for (auto& [k, p] : plans_) {
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  }
  for (void* w : workspace_)
    if (w) cudaFree(w);
  if (one_) cudaFree(one_);
  if (handle_) cublasLtDestroy(handle_);
}

LtFp8::Plan& LtFp8::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const auto [mode, d_f32, M, N, K, ldd] = key;
  Plan p;
  TD_LT8_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set(p.op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set(p.op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  cublasLtMatmulMatrixScale_t am = CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, bm = am;
  if (mode == static_cast<int>(Scales::kBlock128)) {
    am = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    bm = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  } else if (mode == static_cast<int>(Scales::kOuterVec)) {
    am = bm = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  }
  set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, am);
  set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, bm);
  // The heuristic needs scale pointers of the right kind set; any non-null
  // device address does (each call sets the real ones).
  const void* any = workspace_[0];
  set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, any);
  set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, any);
  TD_LT8_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, K, N, K));
  TD_LT8_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, K, M, K));
  TD_LT8_CHECK(cublasLtMatrixLayoutCreate(&p.c, d_f32 ? CUDA_R_32F : CUDA_R_16BF, N, M, ldd));
  cublasLtMatmulPreference_t pref;
  TD_LT8_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TD_LT8_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    p.algo = res.algo;
    p.ok = true;
  }
  return plans_.emplace(key, p).first->second;
}

bool LtFp8::supported(Scales mode, bool d_f32, int64_t M, int64_t N, int64_t K, int64_t ldd) {
  if (mode == Scales::kBlock128 && M % 4 != 0) return false;
  return plan(Key{static_cast<int>(mode), d_f32, M, N, K, ldd}).ok;
}

bool LtFp8::gemm(Scales mode, const void* xq, const float* x_scale, const void* w,
                 const float* w_scale, void* d, int64_t ldd, bool d_f32, int64_t M, int64_t N,
                 int64_t K, cudaStream_t s) {
  if (mode == Scales::kBlock128 && M % 4 != 0) return false;
  Plan& p = plan(Key{static_cast<int>(mode), d_f32, M, N, K, ldd});
  if (!p.ok) return false;
  set(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(w_scale));
  set(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(x_scale));
  const float alpha = 1.0f, beta = 0.0f;
  TD_LT8_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, xq, p.b, &beta, d, p.c, d, p.c,
                              &p.algo, workspace_[slot_], workspace_bytes_, s));
  return true;
}

}  // namespace tandem::cuda
