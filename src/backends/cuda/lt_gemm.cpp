#include "backends/cuda/lt_gemm.h"

#include <initializer_list>

#include "backends/cuda/cuda_check.h"

namespace tandem::cuda {

namespace {

#define TD_LT_CHECK(expr)                                                                      \
  do {                                                                                         \
    cublasStatus_t st_ = (expr);                                                               \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::tandem::fail("cuBLASLt error {} at {}:{}", static_cast<int>(st_), __FILE__, __LINE__); \
  } while (0)

// Largest power of two (<= 256) dividing the address and the row stride in bytes.
int alignment(const void* p, int64_t ld_bytes) {
  const uint64_t v = reinterpret_cast<uint64_t>(p) | static_cast<uint64_t>(ld_bytes) | 256u;
  return static_cast<int>(v & (~v + 1));
}

// The three layouts of D[M, N] = X[M, K] . W[N, K]^T in cuBLAS's column-major terms: A = W viewed
// as [K, N] (ld ldw), op T -> [N, K]; B = X viewed as [K, M] (ld ldx); D = out viewed as [N, M]
// (ld ldd). D(N x M) = op(A) . B, i.e. row-major out[M, N] = X . W^T.
void create_layouts(cudaDataType in_type, bool d_f32, int64_t M, int64_t N, int64_t K, int64_t ldx,
                    int64_t ldw, int64_t ldd, cublasLtMatrixLayout_t& a, cublasLtMatrixLayout_t& b,
                    cublasLtMatrixLayout_t& c) {
  TD_LT_CHECK(cublasLtMatrixLayoutCreate(&a, in_type, K, N, ldw));
  TD_LT_CHECK(cublasLtMatrixLayoutCreate(&b, in_type, K, M, ldx));
  TD_LT_CHECK(cublasLtMatrixLayoutCreate(&c, d_f32 ? CUDA_R_32F : CUDA_R_16BF, N, M, ldd));
}

// Pointer-array batch mode with `batch` instances, on each of the layouts.
void set_pointer_array(std::initializer_list<cublasLtMatrixLayout_t> layouts, int64_t batch) {
  const int32_t count = static_cast<int32_t>(batch);
  const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
  for (cublasLtMatrixLayout_t l : layouts) {
    TD_LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                 sizeof(count)));
    TD_LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode,
                                                 sizeof(mode)));
  }
}

}  // namespace

LtGemm::LtGemm() {
  TD_LT_CHECK(cublasLtCreate(&handle_));
  for (int i = 0; i < 2; ++i) TD_CUDA_CHECK(cudaMalloc(&workspace_[i], workspace_bytes_));
}

void LtGemm::use_workspace(int slot) {
  if (slot < 0 || slot >= kSlots) fail("cuBLASLt workspace slot {} out of range", slot);
  if (!workspace_[slot]) TD_CUDA_CHECK(cudaMalloc(&workspace_[slot], workspace_bytes_));
  slot_ = slot;
}

LtGemm::~LtGemm() {
  for (auto& [k, p] : plans_) {
    if (p.op) cublasLtMatmulDescDestroy(p.op);
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
  }
  for (void* w : workspace_)
    if (w) cudaFree(w);
  if (handle_) cublasLtDestroy(handle_);
}

LtGemm::Plan& LtGemm::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const auto [M, N, K, ldx, ldw, ldd, d_f32, al_x, al_w, al_d, batch, sx, sw, sd, in_f32,
              ptr_array] = key;
  const cudaDataType in_type = in_f32 ? CUDA_R_32F : CUDA_R_16BF;
  Plan p;
  TD_LT_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  TD_LT_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  TD_LT_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  create_layouts(in_type, d_f32, M, N, K, ldx, ldw, ldd, p.a, p.b, p.c);
  if (ptr_array) {
    set_pointer_array({p.a, p.b, p.c}, batch);
  } else if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    const int64_t strides[3] = {sw, sx, sd};
    cublasLtMatrixLayout_t layouts[3] = {p.a, p.b, p.c};
    for (int i = 0; i < 3; ++i) {
      TD_LT_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                   &count, sizeof(count)));
      TD_LT_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i],
                                                   CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &strides[i], sizeof(strides[i])));
    }
  }
  cublasLtMatmulPreference_t pref;
  TD_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspace_bytes_, sizeof(workspace_bytes_)));
  const uint32_t ax = al_x, aw = al_w, ad = al_d;
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                   &aw, sizeof(aw)));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                   &ax, sizeof(ax)));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                   &ad, sizeof(ad)));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                   &ad, sizeof(ad)));
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

bool LtGemm::gemm(const void* x, int64_t ldx, const void* w, int64_t ldw, void* d, int64_t ldd,
                  bool d_f32, int64_t M, int64_t N, int64_t K, cudaStream_t s, int64_t batch,
                  int64_t stride_x, int64_t stride_w, int64_t stride_d) {
  return run(x, ldx, w, ldw, d, ldd, d_f32, false, M, N, K, s, batch, stride_x, stride_w, stride_d);
}

bool LtGemm::gemm_ptr_array(const void* const* x, int64_t ldx, const void* const* w, int64_t ldw,
                            void* const* d, int64_t ldd, bool d_f32, int64_t M, int64_t N,
                            int64_t K, int64_t batch, cudaStream_t s) {
  // The algorithm is searched once per shape, for a representative batch count, and reused for
  // every count: moe_experts' groups come with new counts at every step, and a search per count
  // costs milliseconds of host time (~80 ms for the first 4,096-token GLM-5.2 MoE layer when
  // every (rows, count) pair had its own). The layouts with the real count are made per call
  // (host-only, microseconds). A count the algorithm refuses gets its own search.
  constexpr int64_t kPlanBatch = 16;
  const float alpha = 1.0f, beta = 0.0f;
  void* darr = const_cast<void**>(d);  // in pointer-array mode the operands are the arrays
  const auto run_with = [&](const Plan& p, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                            cublasLtMatrixLayout_t c) {
    return cublasLtMatmul(handle_, p.op, &alpha, w, a, x, b, &beta, darr, c, darr, c, &p.algo,
                          workspace_[slot_], workspace_bytes_, s);
  };
  Key key{M, N, K, ldx, ldw, ldd, d_f32, 16, 16, 16, kPlanBatch, 0, 0, 0, false, true};
  Plan& p = plan(key);
  if (!p.ok) return false;
  if (batch == kPlanBatch) {
    TD_LT_CHECK(run_with(p, p.a, p.b, p.c));
    return true;
  }
  cublasLtMatrixLayout_t l[3] = {};
  create_layouts(CUDA_R_16BF, d_f32, M, N, K, ldx, ldw, ldd, l[0], l[1], l[2]);
  set_pointer_array({l[0], l[1], l[2]}, batch);
  const cublasStatus_t st = run_with(p, l[0], l[1], l[2]);
  for (cublasLtMatrixLayout_t li : l) cublasLtMatrixLayoutDestroy(li);
  if (st == CUBLAS_STATUS_SUCCESS) return true;
  std::get<10>(key) = batch;  // this count's own search
  Plan& q = plan(key);
  if (!q.ok) return false;
  TD_LT_CHECK(run_with(q, q.a, q.b, q.c));
  return true;
}

bool LtGemm::gemm_f32(const float* x, int64_t ldx, const float* w, int64_t ldw, float* d,
                      int64_t ldd, int64_t M, int64_t N, int64_t K, cudaStream_t s) {
  return run(x, ldx, w, ldw, d, ldd, true, true, M, N, K, s, 1, 0, 0, 0);
}

bool LtGemm::run(const void* x, int64_t ldx, const void* w, int64_t ldw, void* d, int64_t ldd,
                 bool d_f32, bool in_f32, int64_t M, int64_t N, int64_t K, cudaStream_t s,
                 int64_t batch, int64_t stride_x, int64_t stride_w, int64_t stride_d) {
  const int64_t de = d_f32 ? 4 : 2, ie = in_f32 ? 4 : 2;
  // Every batch's operands must meet the alignment the algorithm is chosen for.
  const Key key{M,
                N,
                K,
                ldx,
                ldw,
                ldd,
                d_f32,
                alignment(x, ldx * ie | stride_x * ie),
                alignment(w, ldw * ie | stride_w * ie),
                alignment(d, ldd * de | stride_d * de),
                batch,
                stride_x,
                stride_w,
                stride_d,
                in_f32,
                false};
  Plan& p = plan(key);
  if (!p.ok) return false;
  const float alpha = 1.0f, beta = 0.0f;
  TD_LT_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, d, p.c, d, p.c, &p.algo,
                             workspace_[slot_], workspace_bytes_, s));
  return true;
}

}  // namespace tandem::cuda
