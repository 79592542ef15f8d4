// The ceilings every GPU benchmark reports against, and the linear-path table: one GLM-5.2
// projection at decode-shaped row counts through each GEMM path.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_gemm.h"
#include "bench_util.h"
#include "core/tensor.h"

namespace tandem::bench {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// ---- ceilings --------------------------------------------------------------------------------

double measure_copy_gbps() {
  const size_t bytes = size_t{2} << 30;
  void *a = nullptr, *b = nullptr;
  CK(cudaMalloc(&a, bytes));
  CK(cudaMalloc(&b, bytes));
  CK(cudaMemset(a, 1, bytes));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    CK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (i >= 2) ms.push_back(t);
  }
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes / (median(ms) * 1e-3) / 1e9;  // read + write
}

double measure_gemm_tflops() {
  const int64_t n = 8192;
  Tensor x = Tensor::empty({n, n}, DType::BF16, Device::cuda()),
         w = Tensor::empty({n, n}, DType::BF16, Device::cuda()),
         d = Tensor::empty({n, n}, DType::BF16, Device::cuda());
  cuda::fill_random(x, 1, 1.0f);
  cuda::fill_random(w, 2, 1.0f);
  cuda::LtGemm lt, lt_inv;
  lt_inv.set_batch_invariant(true);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(e0);
    TD_CHECK(lt.gemm(x.raw(), n, w.raw(), n, d.raw(), n, false, n, n, n, nullptr),
             "no cuBLASLt algorithm");
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float t = 0;
    cudaEventElapsedTime(&t, e0, e1);
    if (i >= 2) ms.push_back(t);
  }
  return 2.0 * n * n * n / (median(ms) * 1e-3) / 1e12;
}

// ---- linear kernels at decode-shaped M ---------------------------------------------------------

namespace {
// Times a call on the default stream with the L2 evicted (a 256 MB write) before each run: the
// median of runs - 1 timed runs after an untimed first, in microseconds.
class FlushedTimer {
 public:
  explicit FlushedTimer(int runs)
      : flush_(Tensor::empty({int64_t{256} << 20}, DType::U8, Device::cuda())), runs_(runs) {
    cudaEventCreate(&e0_);
    cudaEventCreate(&e1_);
  }
  ~FlushedTimer() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
  }
  FlushedTimer(const FlushedTimer&) = delete;
  FlushedTimer& operator=(const FlushedTimer&) = delete;
  double operator()(const std::function<void()>& fn) {
    std::vector<double> us;
    for (int i = 0; i < runs_; ++i) {
      CK(cudaMemsetAsync(flush_.raw(), i & 0xff, flush_.nbytes()));
      cudaEventRecord(e0_);
      fn();
      cudaEventRecord(e1_);
      cudaEventSynchronize(e1_);
      float t = 0;
      cudaEventElapsedTime(&t, e0_, e1_);
      if (i > 0) us.push_back(t * 1e3);
    }
    CK(cudaGetLastError());
    return median(us);
  }

 private:
  Tensor flush_;  // [256 MiB] bytes
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
  int runs_;
};
}  // namespace

// One GLM-5.2 projection at M rows through each GEMM path: cuBLASLt in its batch-invariant mode
// (every bf16 product in deterministic mode: no split-K, one algorithm id per shape, the fastest
// member timed on the first call), the batch-invariant tensor-core kernel (its fallback), the
// SIMT skinny kernel and cuBLASLt's own pick. Weight bytes / time against the copy bandwidth; the
// L2 is flushed before every timed run. "inv/best": the invariant path's time over the faster of
// the default paths (the skinny kernel at one row, cuBLASLt above).
void bench_linear_paths(double copy_gbps, double gemm_tf, bool quick) {
  struct Shape2 {
    const char* name;
    int64_t N, K, H = 1;  // H > 1: head_matmul, one [N, K] weight per head
  };
  const std::vector<Shape2> shapes = {
      {"q_b 16384x2048", 16384, 2048},           {"o_proj 6144x16384", 6144, 16384},
      {"dense gate_up 24576x6144", 24576, 6144}, {"lm_head 154880x6144", 154880, 6144},
      {"W_UK 64 x 512x128", 512, 128, 64},       {"W_UV 64 x 128x512", 128, 512, 64},
      {"dense down 6144x12288", 6144, 12288},    {"q_a|kv_a|wk 2752x6144", 2752, 6144},
      {"shared gate_up 4096x6144", 4096, 6144},  {"shared down 6144x2048", 6144, 2048}};
  const std::vector<int64_t> ms =
      quick ? std::vector<int64_t>{1, 16, 64} : std::vector<int64_t>{1, 4, 8, 16, 32, 64, 128, 256};
  const int num_sms = cuda::cuda_backend()->num_sms();
  cuda::LtGemm lt, lt_inv;
  lt_inv.set_batch_invariant(true);
  FlushedTimer time_it(quick ? 5 : 11);
  std::printf(
      "linear paths (bf16 weights, bf16 out): us, and weight GB/s as %% of copy %.0f GB/s\n",
      copy_gbps);
  std::printf("%-26s %5s %16s %16s %16s %16s %9s %9s\n", "shape", "M", "Lt invariant",
              "tc (invariant)", "skinny", "cuBLASLt", "inv/best", "inv TF/s");
  for (const Shape2& sh : shapes) {
    const int64_t Mmax = ms.back();
    const int64_t H = sh.H;
    Tensor x = Tensor::empty({Mmax, H, sh.K}, DType::BF16, Device::cuda());    // [M, H, K]
    Tensor w = Tensor::empty({H, sh.N, sh.K}, DType::BF16, Device::cuda());    // [H, N, K]
    Tensor out = Tensor::empty({Mmax, H, sh.N}, DType::BF16, Device::cuda());  // [M, H, N]
    cuda::fill_random(x, 11, 1.0f);
    cuda::fill_random(w, 12, 0.05f);
    const double wb = static_cast<double>(H * sh.N * sh.K * 2);
    for (int64_t M : ms) {
      cuda::k::SkinnyParams p;
      p.x = x.raw(), p.x_rs = H * sh.K, p.x_bs = sh.K;
      p.w = w.raw(), p.w_bs = sh.N * sh.K;
      p.out = out.raw(), p.o_rs = H * sh.N, p.o_bs = sh.N;
      p.M = M, p.N = sh.N, p.K = sh.K, p.batch = H;
      cuda::k::SkinnyParams pt = p, ps = p;
      pt.splits = cuda::k::tc_gemm_splits(pt, num_sms);
      ps.splits = cuda::k::skinny_splits(ps, cuda::k::DT::BF16, num_sms);
      Tensor part_t, part_s;
      if (pt.splits > 1) {
        part_t = Tensor::empty({pt.splits * H * M * sh.N}, DType::F32, Device::cuda());
        pt.partial = part_t.data<float>();
      }
      if (ps.splits > 1) {
        part_s = Tensor::empty({ps.splits * H * M * sh.N}, DType::F32, Device::cuda());
        ps.partial = part_s.data<float>();
      }
      const double t_tc = time_it([&] { cuda::k::tc_gemm(pt, cuda::k::DT::BF16, nullptr); });
      const double t_sk =
          time_it([&] { cuda::k::skinny_gemm(ps, cuda::k::DT::BF16, cuda::k::DT::BF16, nullptr); });
      const double t_lt = time_it([&] {
        lt.gemm(x.raw(), H * sh.K, w.raw(), sh.K, out.raw(), H * sh.N, false, M, sh.N, sh.K,
                nullptr, H, sh.K, sh.N * sh.K, sh.N);
      });
      const double t_inv = time_it([&] {
        TD_CHECK(lt_inv.gemm(x.raw(), H * sh.K, w.raw(), sh.K, out.raw(), H * sh.N, false, M, sh.N,
                             sh.K, nullptr, H, sh.K, sh.N * sh.K, sh.N),
                 "no batch-invariant cuBLASLt algorithm for {}", sh.name);
      });
      const double t_best = M == 1 ? std::min(t_sk, t_lt) : t_lt;
      auto cell = [&](double us) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%7.1f %5.1f%%", us,
                      100.0 * wb / (us * 1e-6) / 1e9 / copy_gbps);
        return std::string(buf);
      };
      std::printf("%-26s %5lld %16s %16s %16s %16s %9.3f %9.1f\n", sh.name,
                  static_cast<long long>(M), cell(t_inv).c_str(), cell(t_tc).c_str(),
                  cell(t_sk).c_str(), cell(t_lt).c_str(), t_inv / t_best,
                  2.0 * M * H * sh.N * sh.K / (t_inv * 1e-6) / 1e12);
      std::fflush(stdout);
    }
  }
  std::printf("(GEMM ceiling %.0f TFLOP/s)\n\n", gemm_tf);

  std::printf("\n");
}

// fp32 weights (bf16 x, f32 out): the router and the indexer's head weights, decode to prefill
// row counts. The skinny family (skinny_gemm: K splits fixed by the shape, one reduction order,
// batch-invariant) as the backend runs it (the tiled kernel of skinny_f32_tiles.cu at the shape
// chosen for M), the fastest of its tile shapes, and the 2-rows-a-warp skinny kernel it replaced,
// against cuBLASLt's fp32 GEMM, invariant and default, each timed with the widening of x to f32
// it needs, and the weight split exactly into three bf16 pieces with one bf16 cuBLASLt GEMM
// against them ("bf16x3": split, GEMM into [M, 3N] f32, thirds summed; what the backend runs at
// prefill sizes, heuristics::linear_f32_split_path). L2 flushed before every run. "sk/Lt": the
// skinny family over cuBLASLt's fp32 GEMM; "x3/Lt": the split over it.
void bench_linear_f32(double copy_gbps, bool quick) {
  struct ShapeF {
    const char* name;
    int64_t N, K;
  };
  const std::vector<ShapeF> f32_shapes = {{"router 256x6144 f32", 256, 6144},
                                          {"indexer w 32x6144 f32", 32, 6144}};
  const std::vector<int64_t> fms =
      quick ? std::vector<int64_t>{1, 64, 4096}
            : std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096};
  const int num_sms = cuda::cuda_backend()->num_sms();
  cuda::LtGemm lt, lt_inv;
  lt_inv.set_batch_invariant(true);
  FlushedTimer time_it(quick ? 5 : 11);
  const int shapes = cuda::k::skinny_f32_tile_shapes();
  Tensor counters = Tensor::from_vector(std::vector<int32_t>(1 << 16, 0), {int64_t{1} << 16})
                        .to(Device::cuda());  // [65536], left zeroed by every launch
  std::printf("linear paths (fp32 weights, f32 out): us, and weight GB/s as %% of copy %.0f GB/s\n",
              copy_gbps);
  std::printf("%-24s %5s %15s %-7s %15s %-7s %15s %15s %15s %15s %7s %7s %7s\n", "shape", "M",
              "skinny", "tile", "best tile", "", "2 rows/warp", "Lt invariant", "cuBLASLt",
              "bf16x3", "sk/Lt", "inv/Lt", "x3/Lt");
  for (const ShapeF& sh : f32_shapes) {
    const int64_t Mmax = fms.back();
    Tensor x = Tensor::empty({Mmax, sh.K}, DType::BF16, Device::cuda());       // [M, K]
    Tensor xf = Tensor::empty({Mmax, sh.K}, DType::F32, Device::cuda());       // [M, K] widened
    Tensor w = Tensor::empty({sh.N, sh.K}, DType::F32, Device::cuda());        // [N, K]
    Tensor out = Tensor::empty({Mmax, sh.N}, DType::F32, Device::cuda());      // [M, N]
    Tensor w3 = Tensor::empty({3 * sh.N, sh.K}, DType::BF16, Device::cuda());  // [3N, K] pieces
    Tensor p3 = Tensor::empty({Mmax, 3 * sh.N}, DType::F32, Device::cuda());   // [M, 3N]
    cuda::fill_random(x, 13, 1.0f);
    cuda::fill_random(w, 14, 0.05f);
    const double wb = static_cast<double>(sh.N * sh.K * 4);
    for (int64_t M : fms) {
      cuda::k::SkinnyParams p;
      p.x = x.raw(), p.x_rs = sh.K;
      p.w = w.raw();
      p.out = out.raw(), p.o_rs = sh.N;
      p.M = M, p.N = sh.N, p.K = sh.K;
      p.splits = cuda::k::skinny_splits(p, cuda::k::DT::F32, num_sms);
      Tensor part;
      if (p.splits > 1) {
        part = Tensor::empty({p.splits * M * sh.N}, DType::F32, Device::cuda());
        p.partial = part.data<float>();
      }
      auto skinny = [&](int shape) {
        p.f32_tile = shape;
        // The tiles' last blocks reduce where the counters suffice (the backend's way).
        p.counters = cuda::k::skinny_tiles(p, cuda::k::DT::F32) <= (1 << 16)
                         ? counters.data<int32_t>()
                         : nullptr;
        return time_it(
            [&] { cuda::k::skinny_gemm(p, cuda::k::DT::F32, cuda::k::DT::F32, nullptr); });
      };
      const double t_sk = skinny(-1), t_rows = skinny(-2);
      double t_best = 1e30;
      int best = 0;
      std::string all;  // every shape's time, for choosing skinny_f32_tile_shape's rule
      for (int t = 0; t < shapes; ++t) {
        const double us = skinny(t);
        if (us < t_best) t_best = us, best = t;
        char buf[48];
        std::snprintf(buf, sizeof buf, " %s %.1f", cuda::k::skinny_f32_tile_name(t), us);
        all += buf;
      }
      auto lt_f32 = [&](cuda::LtGemm& g) {
        cuda::k::bf16_rows_to_f32(x.raw(), sh.K, xf.data<float>(), M, sh.K, nullptr);
        TD_CHECK(g.gemm_f32(xf.data<float>(), sh.K, w.data<float>(), sh.K, out.data<float>(), sh.N,
                            M, sh.N, sh.K, nullptr),
                 "no cuBLASLt fp32 algorithm for {}", sh.name);
      };
      const double t_inv = time_it([&] { lt_f32(lt_inv); });
      const double t_lt = time_it([&] { lt_f32(lt); });
      const double t_x3 = time_it([&] {
        cuda::k::split_f32_bf16x3(w.data<float>(), sh.N, sh.K, w3.raw(), nullptr);
        TD_CHECK(lt.gemm(x.raw(), sh.K, w3.raw(), sh.K, p3.raw(), 3 * sh.N, true, M, 3 * sh.N, sh.K,
                         nullptr),
                 "no cuBLASLt bf16 algorithm for {} split", sh.name);
        cuda::k::sum_thirds_f32(p3.data<float>(), M, sh.N, out.data<float>(), sh.N, nullptr);
      });
      auto cell = [&](double us) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%7.1f %5.1f%%", us,
                      100.0 * wb / (us * 1e-6) / 1e9 / copy_gbps);
        return std::string(buf);
      };
      std::printf("%-24s %5lld %15s %-7s %15s %-7s %15s %15s %15s %15s %7.3f %7.3f %7.3f\n",
                  sh.name, static_cast<long long>(M), cell(t_sk).c_str(),
                  cuda::k::skinny_f32_tile_name(cuda::k::skinny_f32_tile_shape(p)),
                  cell(t_best).c_str(), cuda::k::skinny_f32_tile_name(best), cell(t_rows).c_str(),
                  cell(t_inv).c_str(), cell(t_lt).c_str(), cell(t_x3).c_str(), t_sk / t_lt,
                  t_inv / t_lt, t_x3 / t_lt);
      if (!quick) std::printf("    tiles:%s\n", all.c_str());
      std::fflush(stdout);
    }
  }
  std::printf("\n");
}

}  // namespace tandem::bench
