// Which cuBLASLt algorithms compute a row of D = X . W^T with the same bits whatever the number of
// rows M, and how fast the fastest of such a family is against cuBLASLt's own pick at each M.
//
// Lossless speculation needs batch-invariant linears: a token's row must come out bit-identical in
// a verify of B x (S + 1) rows and in a plain decode of B rows. cuBLASLt's heuristic picks a
// different kernel (tile, split-K, reduction) at different M, so its results are not invariant;
// but a kernel whose reduction along K does not depend on M may be, and several kernels may share
// one reduction order. This tool measures that on the machine it runs on:
//   1. for each shape (N, K), the union of the heuristic's candidates over a sweep of M, each also
//      with split-K 1, 2, 4, 8 (reduction in the compute type); bf16 operands, or fp32 ones in
//      fp32 arithmetic for the shapes marked f32 (the router and the indexer's head weights);
//   2. every candidate run at every M it accepts on the same random X and W, every output row
//      hashed on the device;
//   3. a candidate is self-invariant when row r hashes the same at every M > r; self-invariant
//      candidates with equal rows form a family (same bits, interchangeable);
//   4. per family and M: the fastest member's time against the fastest candidate overall and the
//      heuristic's first pick (L2 flushed before every timed run, median of 5).
// Usage: lt_algo_survey [--quick] [--shape NAME:N:K[:f32] ...]
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
#define LK(x)                                                                          \
  do {                                                                                 \
    cublasStatus_t s_ = (x);                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d cublasLt status %d\n", __FILE__, __LINE__, int(s_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

// Device helpers (lt_algo_survey_kernels.cu): random fill and per-row hashes.
void survey_fill(void* p, bool f32, size_t n, uint64_t seed);
void survey_hash_rows(const void* d, bool f32, int64_t M, int64_t N, uint64_t* out);

namespace {

struct Config {
  int32_t id = 0, splitk = 1;
  uint32_t tile = 0, stages = 0, reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;
  auto key() const {
    return std::tie(id, tile, stages, splitk, reduction, swizzle, custom, inner, cluster);
  }
  bool operator<(const Config& o) const { return key() < o.key(); }
};

template <class T>
T get_cfg(const cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t w = 0;
  LK(cublasLtMatmulAlgoConfigGetAttribute(&a, attr, &v, sizeof(v), &w));
  return v;
}

Config read_config(const cublasLtMatmulAlgo_t& a) {
  Config c;
  c.id = get_cfg<int32_t>(a, CUBLASLT_ALGO_CONFIG_ID);
  c.tile = get_cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_TILE_ID);
  c.stages = get_cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_STAGES_ID);
  c.splitk = get_cfg<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
  c.reduction = get_cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
  c.swizzle = get_cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING);
  c.custom = get_cfg<uint32_t>(a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION);
  c.inner = get_cfg<uint16_t>(a, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID);
  c.cluster = get_cfg<uint16_t>(a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return c;
}

template <class T>
void set_cfg(cublasLtMatmulAlgo_t& a, cublasLtMatmulAlgoConfigAttributes_t attr, T v) {
  LK(cublasLtMatmulAlgoConfigSetAttribute(&a, attr, &v, sizeof(v)));
}

struct Result {
  Config cfg;
  std::vector<double> us;                   // per M, -1 where unsupported
  std::vector<std::vector<uint64_t>> rows;  // per M, a hash per row
  bool invariant = true;
  int family = -1;
};

struct Shape {
  std::string name;
  int64_t N, K;
  bool f32 = false;  // fp32 x, w and d in fp32 arithmetic (the router, the indexer's head weights)
};

struct Problem {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  void* ws;
  size_t ws_bytes;
  int64_t N, K;
  cudaDataType type;
  // Layouts of D[M, N] = X[M, K] . W[N, K]^T in column-major terms (as LtGemm builds them).
  void layouts(int64_t M, cublasLtMatrixLayout_t l[3]) const {
    LK(cublasLtMatrixLayoutCreate(&l[0], type, K, N, K));
    LK(cublasLtMatrixLayoutCreate(&l[1], type, K, M, K));
    LK(cublasLtMatrixLayoutCreate(&l[2], type, N, M, N));
  }
  std::vector<cublasLtMatmulAlgo_t> heuristic(int64_t M, int count) const {
    cublasLtMatrixLayout_t l[3];
    layouts(M, l);
    cublasLtMatmulPreference_t pref;
    LK(cublasLtMatmulPreferenceCreate(&pref));
    LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &ws_bytes, sizeof(ws_bytes)));
    const uint32_t al = 16;
    for (auto attr :
         {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      LK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &al, sizeof(al)));
    std::vector<cublasLtMatmulHeuristicResult_t> res(count);
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, l[0], l[1], l[2], l[2], pref, count, res.data(), &found);
    cublasLtMatmulPreferenceDestroy(pref);
    for (auto& li : l) cublasLtMatrixLayoutDestroy(li);
    std::vector<cublasLtMatmulAlgo_t> out;
    for (int i = 0; i < found; ++i)
      if (res[i].state == CUBLAS_STATUS_SUCCESS) out.push_back(res[i].algo);
    return out;
  }
  bool supports(const cublasLtMatmulAlgo_t& a, int64_t M) const {
    cublasLtMatrixLayout_t l[3];
    layouts(M, l);
    cublasLtMatmulHeuristicResult_t r{};
    const bool ok =
        cublasLtMatmulAlgoCheck(lt, op, l[0], l[1], l[2], l[2], &a, &r) == CUBLAS_STATUS_SUCCESS &&
        r.workspaceSize <= ws_bytes;
    for (auto& li : l) cublasLtMatrixLayoutDestroy(li);
    return ok;
  }
  void run(const cublasLtMatmulAlgo_t& a, int64_t M, const void* x, const void* w, void* d,
           cudaStream_t s) const {
    cublasLtMatrixLayout_t l[3];
    layouts(M, l);
    const float one = 1, zero = 0;
    LK(cublasLtMatmul(lt, op, &one, w, l[0], x, l[1], &zero, d, l[2], d, l[2], &a, ws, ws_bytes,
                      s));
    for (auto& li : l) cublasLtMatrixLayoutDestroy(li);
  }
};

std::string describe(const Config& c) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "algo %2d tile %3u st %3u sk %d red %u sw %u cu %2u in %u cl %u",
                c.id, c.tile, c.stages, c.splitk, c.reduction, c.swizzle, c.custom, c.inner,
                c.cluster);
  return buf;
}

void survey(cublasLtHandle_t lt, const Shape& shape, const std::vector<int64_t>& ms) {
  const int64_t N = shape.N, K = shape.K, Mmax = ms.back();
  const int64_t eb = shape.f32 ? 4 : 2;  // element bytes
  void *w, *x, *d;
  uint64_t* hashes;
  CK(cudaMalloc(&w, N * K * eb));
  CK(cudaMalloc(&x, Mmax * K * eb));
  CK(cudaMalloc(&d, Mmax * N * eb));
  CK(cudaMalloc(&hashes, Mmax * 8));
  survey_fill(w, shape.f32, N * K, 7);
  survey_fill(x, shape.f32, Mmax * K, 11);
  const size_t flush_bytes = size_t{256} << 20;
  void* flush;
  CK(cudaMalloc(&flush, flush_bytes));
  Problem p{lt, nullptr, nullptr, size_t{64} << 20, N, K, shape.f32 ? CUDA_R_32F : CUDA_R_16BF};
  CK(cudaMalloc(&p.ws, p.ws_bytes));
  LK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  LK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));

  // Candidates: the heuristic's list at every M, each also with split-K 1, 2, 4, 8.
  std::map<Config, cublasLtMatmulAlgo_t> cands;
  std::vector<Config> first_pick(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    const auto hs = p.heuristic(ms[i], 32);
    for (size_t j = 0; j < hs.size(); ++j) {
      const Config c = read_config(hs[j]);
      if (j == 0) first_pick[i] = c;
      cands.emplace(c, hs[j]);
      for (int32_t sk : {1, 2, 4, 8}) {
        cublasLtMatmulAlgo_t a = hs[j];
        set_cfg<int32_t>(a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, sk);
        set_cfg<uint32_t>(
            a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
            sk == 1 ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
        bool any = false;
        for (int64_t m : ms) any = any || p.supports(a, m);
        if (any) cands.emplace(read_config(a), a);
      }
    }
  }

  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<Result> results;
  for (auto& [cfg, algo] : cands) {
    Result r;
    r.cfg = cfg;
    r.us.assign(ms.size(), -1);
    r.rows.resize(ms.size());
    for (size_t i = 0; i < ms.size(); ++i) {
      const int64_t M = ms[i];
      if (!p.supports(algo, M)) continue;
      CK(cudaMemset(d, 0xff, M * N * eb));
      p.run(algo, M, x, w, d, nullptr);
      survey_hash_rows(d, shape.f32, M, N, hashes);
      r.rows[i].resize(M);
      CK(cudaMemcpy(r.rows[i].data(), hashes, M * 8, cudaMemcpyDeviceToHost));
      std::vector<float> t;
      for (int rep = 0; rep < 5; ++rep) {
        CK(cudaMemsetAsync(flush, rep, flush_bytes));
        cudaEventRecord(e0);
        p.run(algo, M, x, w, d, nullptr);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        float ms_ = 0;
        cudaEventElapsedTime(&ms_, e0, e1);
        t.push_back(ms_ * 1e3f);
      }
      std::sort(t.begin(), t.end());
      r.us[i] = t[t.size() / 2];
    }
    // Self-invariance: row q at every M that has it equals row q at the largest such M.
    for (size_t i = 0; i < ms.size(); ++i)
      for (size_t j = i + 1; j < ms.size(); ++j)
        if (!r.rows[i].empty() && !r.rows[j].empty())
          for (int64_t q = 0; q < ms[i]; ++q)
            if (r.rows[i][q] != r.rows[j][q]) r.invariant = false;
    results.push_back(std::move(r));
  }

  // Families: self-invariant candidates whose rows agree wherever both ran.
  std::vector<std::vector<int>> families;
  for (size_t a = 0; a < results.size(); ++a) {
    if (!results[a].invariant) continue;
    for (size_t f = 0; f < families.size() && results[a].family < 0; ++f) {
      const Result& b = results[families[f][0]];
      bool same = true, overlap = false;
      for (size_t i = 0; i < ms.size() && same; ++i)
        if (!results[a].rows[i].empty() && !b.rows[i].empty()) {
          overlap = true;
          same = results[a].rows[i] == b.rows[i];
        }
      if (same && overlap) {
        results[a].family = static_cast<int>(f);
        families[f].push_back(static_cast<int>(a));
      }
    }
    if (results[a].family < 0) {
      results[a].family = static_cast<int>(families.size());
      families.push_back({static_cast<int>(a)});
    }
  }

  std::printf("\n== %s  N=%lld K=%lld  (%zu candidates, %zu self-invariant families)\n",
              shape.name.c_str(), (long long)N, (long long)K, results.size(), families.size());
  std::printf("%-78s inv fam", "candidate");
  for (int64_t m : ms) std::printf(" %7lld", (long long)m);
  std::printf("\n");
  for (const Result& r : results) {
    std::printf("%-78s %3s %3d", describe(r.cfg).c_str(), r.invariant ? "yes" : "no", r.family);
    for (double u : r.us) u < 0 ? std::printf("       -") : std::printf(" %7.1f", u);
    std::printf("\n");
  }
  // The heuristic's first pick per M and the fastest candidate per M.
  std::vector<double> best(ms.size(), 1e30), pick(ms.size(), -1);
  for (const Result& r : results)
    for (size_t i = 0; i < ms.size(); ++i) {
      if (r.us[i] >= 0) best[i] = std::min(best[i], r.us[i]);
      if (!(r.cfg < first_pick[i]) && !(first_pick[i] < r.cfg)) pick[i] = r.us[i];
    }
  std::printf("%-86s", "heuristic's first pick (us)");
  for (double u : pick) std::printf(" %7.1f", u);
  std::printf("\n%-86s", "fastest candidate (us)");
  for (double u : best) std::printf(" %7.1f", u);
  std::printf("\n%-86s", "  weight GB/s of the fastest");
  for (double u : best) std::printf(" %7.0f", N * K * eb / (u * 1e-6) / 1e9);
  std::printf("\n");
  // Per family: its fastest member per M as a ratio of the fastest candidate (>= 1).
  for (size_t f = 0; f < families.size(); ++f) {
    std::vector<double> fb(ms.size(), 1e30);
    std::string members;
    for (int a : families[f]) {
      for (size_t i = 0; i < ms.size(); ++i)
        if (results[a].us[i] >= 0) fb[i] = std::min(fb[i], results[a].us[i]);
      char m[48];
      std::snprintf(m, sizeof m, "%s%d/t%u/sk%d", members.empty() ? "" : " ", results[a].cfg.id,
                    results[a].cfg.tile, results[a].cfg.splitk);
      members += m;
    }
    double worst = 0;
    char head[64];
    std::snprintf(head, sizeof head, "family %zu (%zu members) time / fastest", f,
                  families[f].size());
    std::printf("%-86s", head);
    for (size_t i = 0; i < ms.size(); ++i) {
      if (fb[i] >= 1e30) {
        std::printf("       -");
        worst = 1e30;
        continue;
      }
      std::printf(" %7.3f", fb[i] / best[i]);
      worst = std::max(worst, fb[i] / best[i]);
    }
    std::printf("   worst %.3f\n    members: %s\n", worst >= 1e30 ? -1.0 : worst, members.c_str());
  }
  cudaFree(w);
  cudaFree(x);
  cudaFree(d);
  cudaFree(hashes);
  cudaFree(flush);
  cudaFree(p.ws);
  cublasLtMatmulDescDestroy(p.op);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) {
      char name[64], kind[8] = "";
      long long n, k;
      if (std::sscanf(argv[++i], "%63[^:]:%lld:%lld:%7s", name, &n, &k, kind) < 3) {
        std::fprintf(stderr, "--shape NAME:N:K[:f32]\n");
        return 2;
      }
      shapes.push_back({name, n, k, std::strcmp(kind, "f32") == 0});
    } else {
      std::fprintf(stderr, "usage: lt_algo_survey [--quick] [--shape NAME:N:K[:f32] ...]\n");
      return 2;
    }
  }
  if (shapes.empty())
    shapes = {{"q_b", 16384, 2048},
              {"o_proj", 6144, 16384},
              {"dense_gate_up", 24576, 6144},
              {"dense_down", 6144, 12288},
              {"q_a_kv_a_wk", 2752, 6144},
              {"shared_gate_up", 4096, 6144},
              {"shared_down", 6144, 2048},
              {"lm_head", 154880, 6144},
              {"router_f32", 256, 6144, true},
              {"indexer_weights_f32", 32, 6144, true}};
  const std::vector<int64_t> ms =
      quick ? std::vector<int64_t>{1, 4, 16, 64, 256}
            : std::vector<int64_t>{1, 2, 3, 4, 5, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256};
  int dev = 0;
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  std::printf("device %s, cuBLASLt %zu\n", prop.name, cublasLtGetVersion());
  cublasLtHandle_t lt;
  LK(cublasLtCreate(&lt));
  for (const Shape& s : shapes) survey(lt, s, ms);
  cublasLtDestroy(lt);
  return 0;
}
