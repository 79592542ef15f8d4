#include "backends/cuda/lt_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "core/log.h"

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
  if (flush_) cudaFree(flush_);
  if (handle_) cublasLtDestroy(handle_);
}

LtGemm::Plan& LtGemm::plan(const Key& key) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  const auto t0 = std::chrono::steady_clock::now();
  const auto [M, N, K, ldx, ldw, ldd, d_f32, al_x, al_w, al_d, batch, sx, sw, sd, in_f32, ptr_array,
              invariant] = key;
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
  if (invariant) {
    invariant_candidates(p, key);
  } else if (const int64_t top = heuristics::lt_row_bucket(M); top != M) {
    // The row bucket's algorithm (heuristics::lt_row_bucket): the heuristic's pick at its top.
    Key top_key = key;
    std::get<0>(top_key) = top;
    const Plan& tp = plan(top_key);
    p.algo = tp.algo;
    p.ok = tp.ok;
    p.borrowed = tp.ok;
    if (!tp.ok) exact_algorithm(p, key);
  } else {
    exact_algorithm(p, key);
  }
  // A new shape's host cost (the heuristic's search is most of it): TANDEM_LOG=debug shows
  // whether a slow step met shapes no earlier step had.
  log_debug(
      "cuBLASLt plan M {} N {} K {} batch {}{}: {} us on the host", M, N, K, batch,
      p.borrowed ? " (its bucket's algorithm)" : "",
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return plans_.emplace(key, std::move(p)).first->second;
}

void LtGemm::exact_algorithm(Plan& p, const Key& key) {
  const std::vector<cublasLtMatmulAlgo_t> found = heuristic(p, key, 1);
  p.borrowed = false;
  p.ok = !found.empty();
  if (p.ok) p.algo = found[0];
}

std::vector<cublasLtMatmulAlgo_t> LtGemm::heuristic(const Plan& p, const Key& key, int count) {
  cublasLtMatmulPreference_t pref;
  TD_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &workspace_bytes_, sizeof(workspace_bytes_)));
  const uint32_t ax = std::get<7>(key), aw = std::get<8>(key), ad = std::get<9>(key);
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                   &aw, sizeof(aw)));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                   &ax, sizeof(ax)));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                   &ad, sizeof(ad)));
  TD_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                   &ad, sizeof(ad)));
  std::vector<cublasLtMatmulHeuristicResult_t> res(static_cast<size_t>(count));
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref,
                                                           count, res.data(), &found);
  cublasLtMatmulPreferenceDestroy(pref);
  std::vector<cublasLtMatmulAlgo_t> out;
  if (st != CUBLAS_STATUS_SUCCESS) return out;
  for (int i = 0; i < found; ++i)
    if (res[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS)
      out.push_back(res[static_cast<size_t>(i)].algo);
  return out;
}

namespace {

template <class T>
T config(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  TD_LT_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &written));
  return v;
}

int32_t algo_id(const cublasLtMatmulAlgo_t& a) {
  return config<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID);
}

// The algorithm with `like`'s K splits: their count and how the partial sums are added.
cublasLtMatmulAlgo_t with_splits_of(cublasLtMatmulAlgo_t a, const cublasLtMatmulAlgo_t& like) {
  const auto splits = config<int32_t>(like, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  const auto scheme = config<uint32_t>(like, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  TD_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                   sizeof(splits)));
  TD_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                   &scheme, sizeof(scheme)));
  return a;
}

// The algorithm with its K splits turned off (one pass over K per output tile).
cublasLtMatmulAlgo_t without_split_k(cublasLtMatmulAlgo_t a) {
  const int32_t one = 1;
  const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
  TD_LT_CHECK(
      cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof(one)));
  TD_LT_CHECK(cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none,
                                                   sizeof(none)));
  return a;
}

bool same_algo(const cublasLtMatmulAlgo_t& a, const cublasLtMatmulAlgo_t& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// The key with M rounded up to a power of two: plans in one bucket share their timed choice.
template <class Key>
Key bucket_of(Key key) {
  int64_t b = 1;
  while (b < std::get<0>(key)) b *= 2;
  std::get<0>(key) = b;
  return key;
}

}  // namespace

void LtGemm::invariant_candidates(Plan& p, const Key& key) {
  // The shape's anchor: the heuristic's first pick at a reference row count with split-K turned
  // off, one fixed kernel configuration for every M. Other algorithms of its id join as
  // candidates; timing admits only those whose output equals the anchor's bit for bit (kernels
  // that split K inside a block, as some small tiles of other ids do, would not).
  Key shape_key = key;
  std::get<0>(shape_key) = 0;
  auto ref = anchor_.find(shape_key);
  if (ref == anchor_.end()) {
    Key ref_key = key;
    std::get<0>(ref_key) = kReferenceRows;
    std::get<16>(ref_key) = false;
    const Plan& rp = plan(ref_key);
    // bf16: split-K off (the survey's split-free family is within 3% of the fastest algorithm
    // at every M). fp32 weights (the router, 256 x 6144, and the indexer's head weights,
    // 32 x 6144) have two or one output tiles: without the reference pick's K splits a row
    // took 458 and 251 us (the skinny kernel: ~5), so they keep that pick's split count and
    // reduction, fixed for every M as well (a split count is a family of its own).
    std::optional<cublasLtMatmulAlgo_t> anchor;
    if (rp.ok) anchor = std::get<14>(key) ? rp.algo : without_split_k(rp.algo);
    ref = anchor_.emplace(shape_key, anchor).first;
  }
  if (!ref->second) return;
  const cublasLtMatmulAlgo_t& anchor = *ref->second;
  const auto accepted = [&](const cublasLtMatmulAlgo_t& a) {
    cublasLtMatmulHeuristicResult_t r{};
    return cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &a, &r) ==
               CUBLAS_STATUS_SUCCESS &&
           r.workspaceSize <= workspace_bytes_;
  };
  // Without the anchor at this M there is nothing to check the others against: no plan (the
  // caller's invariant fallback then runs at this M, and warns).
  if (!accepted(anchor)) return;
  p.candidates.push_back(anchor);
  const int32_t id = algo_id(anchor);
  for (const cublasLtMatmulAlgo_t& h : heuristic(p, key, 16)) {
    if (algo_id(h) != id) continue;
    const cublasLtMatmulAlgo_t a = with_splits_of(h, anchor);
    bool seen = false;
    for (const auto& c : p.candidates) seen = seen || same_algo(c, a);
    if (!seen && accepted(a)) p.candidates.push_back(a);
  }
  // A bucket already timed: its (checked) winner, if this M accepts it.
  if (auto b = bucket_best_.find(bucket_of(key)); b != bucket_best_.end() && accepted(b->second)) {
    p.algo = b->second;
    p.timed = true;
  } else {
    p.algo = anchor;
  }
  p.ok = true;
}

void LtGemm::time_candidates(Plan& p, const Key& key, const void* x, const void* w, void* d,
                             cudaStream_t s) {
  p.timed = true;
  if (p.candidates.size() < 2) return;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TD_CUDA_CHECK(cudaStreamIsCapturing(s, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) {
    p.timed = false;  // the anchor runs; timed at the next eager call
    return;
  }
  const int64_t M = std::get<0>(key), N = std::get<1>(key), ldd = std::get<5>(key);
  const bool d_f32 = std::get<6>(key);
  // Weights are read cold in a real step: evict the L2 (63 MB on the H200) before each run.
  constexpr size_t kFlushBytes = size_t{96} << 20;
  if (!flush_) TD_CUDA_CHECK(cudaMalloc(&flush_, kFlushBytes));
  cudaEvent_t e0, e1;
  TD_CUDA_CHECK(cudaEventCreate(&e0));
  TD_CUDA_CHECK(cudaEventCreate(&e1));
  const float alpha = 1.0f, beta = 0.0f;
  // The rows compared against the anchor's: the first 64 of the first batch.
  const size_t row_bytes = static_cast<size_t>(N) * (d_f32 ? 4 : 2);
  const size_t rows = static_cast<size_t>(std::min<int64_t>(M, 64));
  std::vector<uint8_t> want(rows * row_bytes), got(rows * row_bytes);
  float best = 0;
  size_t best_i = 0;
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    const auto run_once = [&] {
      TD_LT_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, d, p.c, d, p.c,
                                 &p.candidates[i], workspace_[slot_], workspace_bytes_, s));
    };
    run_once();
    TD_CUDA_CHECK(cudaMemcpy2DAsync(i == 0 ? want.data() : got.data(), row_bytes, d,
                                    static_cast<size_t>(ldd) * (d_f32 ? 4 : 2), row_bytes, rows,
                                    cudaMemcpyDeviceToHost, s));
    TD_CUDA_CHECK(cudaStreamSynchronize(s));
    if (i > 0 && got != want) continue;  // other bits: not interchangeable with the anchor
    float times[3];
    for (float& t : times) {
      TD_CUDA_CHECK(cudaMemsetAsync(flush_, static_cast<int>(i), kFlushBytes, s));
      TD_CUDA_CHECK(cudaEventRecord(e0, s));
      run_once();
      TD_CUDA_CHECK(cudaEventRecord(e1, s));
      TD_CUDA_CHECK(cudaEventSynchronize(e1));
      TD_CUDA_CHECK(cudaEventElapsedTime(&t, e0, e1));
    }
    std::sort(times, times + 3);
    if (i == 0 || times[1] < best) best = times[1], best_i = i;
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  p.algo = p.candidates[best_i];
  bucket_best_[bucket_of(key)] = p.algo;
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
  Key key{M, N, K, ldx, ldw, ldd, d_f32, 16, 16, 16, kPlanBatch, 0, 0, 0, false, true, false};
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
  cublasStatus_t st_q = run_with(q, q.a, q.b, q.c);
  if (st_q != CUBLAS_STATUS_SUCCESS && q.borrowed) {
    exact_algorithm(q, key);
    if (!q.ok) return false;
    st_q = run_with(q, q.a, q.b, q.c);
  }
  TD_LT_CHECK(st_q);
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
  // Every batch's operands must meet the alignment the algorithm is chosen for. Batch-invariant
  // mode plans every call for 16 bytes, so that a better-aligned view never gets another anchor
  // (narrower views have no plan: the caller's fallback runs).
  int al_x = alignment(x, ldx * ie | stride_x * ie), al_w = alignment(w, ldw * ie | stride_w * ie),
      al_d = alignment(d, ldd * de | stride_d * de);
  if (invariant_) {
    if (std::min({al_x, al_w, al_d}) < kInvariantAlignment) return false;
    al_x = al_w = al_d = kInvariantAlignment;
  }
  const Key key{M,    N,     K,        ldx,      ldw,      ldd,    d_f32, al_x,      al_w,
                al_d, batch, stride_x, stride_w, stride_d, in_f32, false, invariant_};
  Plan& p = plan(key);
  if (!p.ok) {
    // Batch-invariant mode: an anchor the reference row count accepted but this M does not
    // (a split-K workspace grows with M) runs in row chunks; a row's bits do not depend on the
    // chunk it is in.
    if (!invariant_ || M <= kReferenceRows) return false;
    int64_t m1 = kReferenceRows;
    while (2 * m1 < M) m1 *= 2;
    const auto* xb = static_cast<const char*>(x);
    auto* db = static_cast<char*>(d);
    return run(x, ldx, w, ldw, d, ldd, d_f32, in_f32, m1, N, K, s, batch, stride_x, stride_w,
               stride_d) &&
           run(xb + m1 * ldx * ie, ldx, w, ldw, db + m1 * ldd * de, ldd, d_f32, in_f32, M - m1, N,
               K, s, batch, stride_x, stride_w, stride_d);
  }
  if (invariant_ && !p.timed) time_candidates(p, key, x, w, d, s);
  const float alpha = 1.0f, beta = 0.0f;
  // Timed on a plan's first launch only (TANDEM_LOG=debug): no clock read on the hot path.
  const auto t0 =
      p.launched ? std::chrono::steady_clock::time_point{} : std::chrono::steady_clock::now();
  const auto launch = [&] {
    return cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, d, p.c, d, p.c, &p.algo,
                          workspace_[slot_], workspace_bytes_, s);
  };
  cublasStatus_t st = launch();
  if (st != CUBLAS_STATUS_SUCCESS && p.borrowed) {
    // The bucket's algorithm refused this M: the heuristic's own pick for it from now on.
    exact_algorithm(p, key);
    if (!p.ok) return false;
    st = launch();
  }
  TD_LT_CHECK(st);
  if (!p.launched) {
    p.launched = true;
    log_debug(
        "cuBLASLt first launch M {} N {} K {}: {} us on the host", M, N, K,
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
            .count());
  }
  return true;
}

}  // namespace tandem::cuda
