// Quantized weights on the GPU (issue #14): the decode kernels of quant_kernels.h on GLM-5.2
// shapes at batch 1 / 8 / 32 (FP8 block attention projections and shared expert, the routed
// experts in FP8 and in MXFP4), and FP8 prefill at 4096 tokens through cuBLASLt's block-scaled
// mode against its per-tensor FP8 rate on the same shapes. Every row prints the HBM floor of
// the bytes it must read at the copy bandwidth measured in the same run; decode sequences are
// timed as CUDA graphs (no launch gaps), the L2 flushed before every timed run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_fp8.h"
#include "backends/cuda/lt_gemm.h"
#include "backends/cuda/quant_kernels.h"
#include "bench_util.h"
#include "core/tensor.h"

namespace tandem::bench {

namespace {

namespace k = cuda::k;

// TANDEM_QUANT_RING (2, 23 or 24): the decode kernels' stream shape, as the backend reads it; 0
// leaves each format its own.
int ring_depth() {
  static const int r = cuda::heuristics::read_switches().quant_ring;
  return r;
}

Tensor dev_bytes(int64_t n) {
  return Tensor::empty({n}, DType::U8, Device::cuda());
}

// Fills n device bytes from a host pattern of valid codes (e4m3 without NaN: magnitudes up to
// 0x6f with either sign; or any byte for e2m1 pairs), copied in 32 MB pieces.
void fill_codes(void* p, int64_t n, bool e4m3, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<uint8_t> h(static_cast<size_t>(std::min<int64_t>(n, int64_t{32} << 20)));
  for (auto& b : h) {
    const uint64_t r = g();
    b = e4m3 ? static_cast<uint8_t>((r % 0x70) | (r & 0x80)) : static_cast<uint8_t>(r);
  }
  for (int64_t o = 0; o < n; o += static_cast<int64_t>(h.size()))
    CK(cudaMemcpy(static_cast<uint8_t*>(p) + o, h.data(),
                  static_cast<size_t>(std::min<int64_t>(n - o, static_cast<int64_t>(h.size()))),
                  cudaMemcpyHostToDevice));
}
Tensor dev_floats(int64_t n, float lo, float hi, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) f = std::uniform_real_distribution<float>(lo, hi)(g);
  return Tensor::from_vector(v, {n}).to(Device::cuda());
}
Tensor dev_e8m0(int64_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = static_cast<uint8_t>(118 + g() % 5);
  Tensor t = dev_bytes(n);
  CK(cudaMemcpy(t.raw(), v.data(), v.size(), cudaMemcpyHostToDevice));
  return t;
}

struct Fp8Dev {
  Tensor w, s;
  k::Fp8W v;
  int64_t bytes() const { return w.nbytes() + s.nbytes(); }
};
// [E, N, K] e4m3 with 128 x 128 block scales (rows padded to a multiple of 4 K blocks).
Fp8Dev make_fp8(int64_t E, int64_t N, int64_t K, uint64_t seed) {
  Fp8Dev d;
  const int64_t nb = (N + 127) / 128, kb = (K + 127) / 128, srs = (kb + 3) / 4 * 4;
  d.w = dev_bytes(E * N * K);
  fill_codes(d.w.raw(), d.w.nbytes(), true, seed);
  d.s = dev_floats(E * nb * srs, 0.5e-4f, 2e-4f, seed + 1);
  d.v.w = static_cast<const uint8_t*>(d.w.raw());
  d.v.s = d.s.data<float>();
  d.v.s_rs = srs, d.v.bn = 128, d.v.bk = 128, d.v.N = N, d.v.K = K;
  d.v.w_es = N * K, d.v.s_es = nb * srs;
  return d;
}

struct Mx4Dev {
  Tensor w, s;
  k::Mx4W v;
  int64_t bytes() const { return w.nbytes() + s.nbytes(); }
};
Mx4Dev make_mx4(int64_t E, int64_t N, int64_t K, uint64_t seed) {
  Mx4Dev d;
  d.w = dev_bytes(E * N * K / 2);
  fill_codes(d.w.raw(), d.w.nbytes(), false, seed);
  d.s = dev_e8m0(E * N * (K / 32), seed + 1);
  d.v.w = static_cast<const uint8_t*>(d.w.raw());
  d.v.s = static_cast<const uint8_t*>(d.s.raw());
  d.v.s_rs = K / 32, d.v.N = N, d.v.K = K;
  d.v.w_es = N * K / 2, d.v.s_es = N * (K / 32);
  return d;
}

class Timer {
 public:
  explicit Timer(bool quick) : quick_(quick) {
    CK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
    cudaEventCreate(&e0_);
    cudaEventCreate(&e1_);
    flush_ = Tensor::empty({int64_t{256} << 20}, DType::U8, Device::cuda());
  }
  ~Timer() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
    cudaStreamDestroy(s_);
  }
  cudaStream_t stream() const { return s_; }
  // Median microseconds of fn on the stream, as a captured graph (graph = true) or eagerly.
  double us(const std::function<void(cudaStream_t)>& fn, bool graph) {
    cudaGraphExec_t exec = nullptr;
    if (graph) {
      fn(s_);  // warm-up: cuBLASLt plans, lazy module loads
      CK(cudaStreamSynchronize(s_));
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
      fn(s_);
      CK(cudaStreamEndCapture(s_, &g));
      CK(cudaGraphInstantiate(&exec, g, 0));
      cudaGraphDestroy(g);
    }
    std::vector<double> v;
    for (int i = 0; i < (quick_ ? 6 : 16); ++i) {
      CK(cudaMemsetAsync(flush_.raw(), i & 0xff, flush_.nbytes(), s_));
      cudaEventRecord(e0_, s_);
      if (exec)
        CK(cudaGraphLaunch(exec, s_));
      else
        fn(s_);
      cudaEventRecord(e1_, s_);
      CK(cudaEventSynchronize(e1_));
      float t = 0;
      cudaEventElapsedTime(&t, e0_, e1_);
      if (i > 0) v.push_back(t * 1e3);
    }
    if (exec) cudaGraphExecDestroy(exec);
    CK(cudaGetLastError());
    return median(v);
  }
  // The kernel timeline (CUPTI) of one graph replay of fn after an L2 flush, as us() times it.
  void timeline(const std::function<void(cudaStream_t)>& fn, const std::string& title) {
    fn(s_);
    CK(cudaStreamSynchronize(s_));
    cudaGraph_t g;
    cudaGraphExec_t exec = nullptr;
    CK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeThreadLocal));
    fn(s_);
    CK(cudaStreamEndCapture(s_, &g));
    CK(cudaGraphInstantiate(&exec, g, 0));
    cudaGraphDestroy(g);
    CK(cudaMemsetAsync(flush_.raw(), 1, flush_.nbytes(), s_));
    CK(cudaStreamSynchronize(s_));
    print_kernel_timeline([&] { CK(cudaGraphLaunch(exec, s_)); }, title);
    cudaGraphExecDestroy(exec);
  }

 private:
  bool quick_;
  cudaStream_t s_ = nullptr;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
  Tensor flush_;
};

// "us  GB/s as % of copy  floor us" for `bytes` read in `us`.
std::string cell(double us, double bytes, double copy_gbps) {
  char b[64];
  std::snprintf(b, sizeof b, "%8.1f %5.1f%% %7.1f", us,
                100.0 * bytes / (us * 1e-6) / 1e9 / copy_gbps, bytes / (copy_gbps * 1e9) * 1e6);
  return b;
}

// One FP8 linear at decode size: activation quantization, then the weight stream.
struct DecodeLinear {
  const Fp8Dev* w;
  Tensor x, xq, xs, part, counters, out;
  k::QGemvParams p;
  DecodeLinear(const Fp8Dev& wt, int64_t M, int num_sms) : w(&wt) {
    const int64_t N = wt.v.N, K = wt.v.K, kb = (K + 127) / 128;
    x = Tensor::empty({M, K}, DType::BF16, Device::cuda());  // [M, K]
    cuda::fill_random(x, 7, 1.0f);
    xq = Tensor::empty({M, K}, DType::U8, Device::cuda());     // [M, K] e4m3
    xs = Tensor::empty({M, kb}, DType::F32, Device::cuda());   // [M, kb]
    out = Tensor::empty({M, N}, DType::BF16, Device::cuda());  // [M, N]
    p.x = xq.raw(), p.x_rs = K, p.xscale = xs.data<float>(), p.xs_rs = kb;
    p.out = out.raw(), p.o_rs = N, p.out_dt = k::DT::BF16, p.M = M;
    p.splits = k::quant_gemv_splits(N, K, num_sms);
    p.ring = ring_depth();
    if (p.splits > 1) {
      part = Tensor::empty({p.splits * M * N}, DType::F32, Device::cuda());  // [splits, M, N]
      p.partial = part.data<float>();
      // As the backend runs it: the tiles' last blocks sum the partials.
      counters = Tensor::empty({k::quant_gemv_tiles(M, N)}, DType::I32, Device::cuda());
      CK(cudaMemset(counters.raw(), 0, counters.nbytes()));
      p.counters = counters.data<int32_t>();
    }
  }
  void quant(cudaStream_t s) const {
    k::act_quant_fp8(x.raw(), w->v.K, k::DT::BF16, p.M, w->v.K, 128, false, xq.raw(), w->v.K,
                     xs.data<float>(), p.xs_rs, 1, s, /*early=*/true);
  }
  void gemv(cudaStream_t s) const { k::fp8_gemv(p, w->v, s); }
};

// One FP8 linear on the grouped wgmma kernel (moe_wgmma_fp8.cu): random bf16 rows quantized
// with their scales transposed ([kb, Mp]) by quant(), then the kernel (one launch: a dense linear
// needs no tile list).
struct WgmmaLinear {
  const Fp8Dev* w;
  int64_t M, Mp;
  Tensor x, xq, xs, out;
  WgmmaLinear(const Fp8Dev& wt, int64_t M_) : w(&wt), M(M_), Mp((M_ + 3) / 4 * 4) {
    const int64_t N = wt.v.N, K = wt.v.K;
    x = Tensor::empty({M, K}, DType::BF16, Device::cuda());  // [M, K]
    cuda::fill_random(x, 5, 1.0f);
    xq = dev_bytes(M * K);                                                  // [M, K] e4m3
    xs = Tensor::empty({(K + 127) / 128, Mp}, DType::F32, Device::cuda());  // [kb, Mp]
    out = Tensor::empty({M, N}, DType::BF16, Device::cuda());               // [M, N]
  }
  void quant(cudaStream_t s) const {
    k::act_quant_fp8(x.raw(), w->v.K, k::DT::BF16, M, w->v.K, 128, false, xq.raw(), w->v.K,
                     xs.data<float>(), 1, Mp, s);
  }
  void gemm(cudaStream_t s) const {
    k::fp8_linear_wgmma(xq.raw(), xs.data<float>(), Mp, M, w->v, out.raw(), w->v.N, k::DT::BF16, s);
  }
};

// The operands of cuBLASLt's block-scaled FP8 GEMM for M rows of a linear: random bf16 rows,
// quantized per 1x128 group (E4M3 bytes, scales [kb, M]) by quant(), and the output.
struct BlockScaledRows {
  int64_t M, K;
  Tensor x, xq, xs, out;
  BlockScaledRows(int64_t M_, int64_t N, int64_t K_) : M(M_), K(K_) {
    x = Tensor::empty({M, K}, DType::BF16, Device::cuda());  // [M, K]
    cuda::fill_random(x, 3, 1.0f);
    xq = dev_bytes(M * K);                                                 // [M, K] e4m3
    xs = Tensor::empty({(K + 127) / 128, M}, DType::F32, Device::cuda());  // [kb, M]
    out = Tensor::empty({M, N}, DType::BF16, Device::cuda());              // [M, N]
  }
  void quant(cudaStream_t s) const {
    k::act_quant_fp8(x.raw(), K, k::DT::BF16, M, K, 128, false, xq.raw(), K, xs.data<float>(), 1, M,
                     s);
  }
  bool gemm(cuda::LtFp8& lt, const Fp8Dev& w, int64_t N, cudaStream_t s) const {
    return lt.gemm(cuda::LtFp8::Scales::kBlock128, xq.raw(), xs.data<float>(), w.w.raw(),
                   w.s.data<float>(), out.raw(), N, false, M, N, K, s);
  }
};

// The routed experts of one MoE layer at decode size (T tokens, top-k), FP8 or MXFP4.
struct DecodeExperts {
  int64_t T, kk, E, D, I, P, distinct = 0;
  Tensor x, idx, rw, ints, xq, xs, h, hq, hs, y, out;
  k::MoeGroups g;
  DecodeExperts(int64_t T_, int64_t k_, int64_t E_, int64_t D_, int64_t I_, uint64_t seed)
      : T(T_), kk(k_), E(E_), D(D_), I(I_), P(T_ * k_) {
    std::mt19937_64 r(seed);
    std::vector<int32_t> ids;
    std::vector<float> ws;
    std::vector<char> used(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> pick;
      while (static_cast<int64_t>(pick.size()) < kk) {
        const int32_t e = static_cast<int32_t>(r() % static_cast<uint64_t>(E));
        if (std::find(pick.begin(), pick.end(), e) == pick.end()) pick.push_back(e);
      }
      for (int32_t e : pick) ids.push_back(e), ws.push_back(0.125f), used[e] = 1;
    }
    distinct = std::count(used.begin(), used.end(), 1);
    idx = Tensor::from_vector(ids, {T, kk}).to(Device::cuda());  // [T, k]
    rw = Tensor::from_vector(ws, {T, kk}).to(Device::cuda());    // [T, k]
    x = Tensor::empty({T, D}, DType::BF16, Device::cuda());      // [T, D]
    cuda::fill_random(x, seed + 1, 1.0f);
    ints = Tensor::empty({3 * E + 2 + 2 * P}, DType::I32, Device::cuda());  // moe_prepare's
    xq = Tensor::empty({T, D}, DType::F16, Device::cuda());        // [T, D] e4m3 (MXFP4: bf16 qdq)
    xs = Tensor::empty({T, D / 128}, DType::F32, Device::cuda());  // [T, kb]
    h = Tensor::empty({P, I}, DType::F32, Device::cuda());         // [P, I] f32 (W4A16: bf16)
    hq = Tensor::empty({P, I}, DType::F16, Device::cuda());        // [P, I] e4m3 (MXFP4: bf16)
    hs = Tensor::empty({P, I / 128}, DType::F32, Device::cuda());  // [P, kb]
    y = Tensor::empty({P, D}, DType::F32, Device::cuda());         // [P, D]
    out = Tensor::empty({T, D}, DType::BF16, Device::cuda());      // [T, D]
    int32_t* b = ints.data<int32_t>();
    g.counts = b, g.offsets = b + E, g.perm = b + 2 * E + 1, g.active = b + 2 * E + 1 + 2 * P;
    g.num_active = b + 3 * E + 1 + 2 * P;
    g.max_active = std::min(E, P), g.k = kk, g.pairs = P;
  }
  int32_t* inv() const { return const_cast<int32_t*>(g.perm) + P; }
  void prepare(cudaStream_t s) const {
    k::moe_prepare(idx.data<int32_t>(), P, E, const_cast<int32_t*>(g.counts),
                   const_cast<int32_t*>(g.offsets), const_cast<int32_t*>(g.perm), inv(),
                   const_cast<int32_t*>(g.active), const_cast<int32_t*>(g.num_active), s);
  }
  void combine(cudaStream_t s) const {
    k::moe_combine(y.raw(), k::DT::F32, inv(), rw.data<float>(), T, kk, D, out.raw(), s);
  }
  void fp8(const Fp8Dev& gu, const Fp8Dev& dn, cudaStream_t s) const {
    prepare(s);
    // As the backend runs them: each quantizer triggers its expert kernel early.
    k::MoeGroups ge = g;
    ge.grouping_before_wait = true;
    k::act_quant_fp8(x.raw(), D, k::DT::BF16, T, D, 128, false, xq.raw(), D, xs.data<float>(),
                     D / 128, 1, s, /*early=*/true);
    k::fp8_moe_gate_up(xq.raw(), D, xs.data<float>(), D / 128, ge, gu.v, I, h.raw(), k::DT::F32, s,
                       ring_depth());
    k::act_quant_fp8(h.raw(), I, k::DT::F32, P, I, 128, false, hq.raw(), I, hs.data<float>(),
                     I / 128, 1, s, /*early=*/true);
    k::fp8_moe_down(hq.raw(), I, hs.data<float>(), I / 128, ge, dn.v, y.data<float>(), s,
                    ring_depth());
    combine(s);
  }
  // The same FP8 experts on the grouped wgmma kernels, as the backend's grouped_fp8_moe_chunk
  // runs them: x quantized once per token (scales [T, kb]), the pairs' rows gathered into expert
  // order with their scales transposed, the tile list, gate_up, h quantized (scales transposed),
  // down, the combine. xsort, xst, hst and tiles: wgmma_buffers().
  void fp8_wgmma(const Fp8Dev& gu, const Fp8Dev& dn, cudaStream_t s) const {
    const int64_t Pp = (P + 3) / 4 * 4, kbx = D / 128;
    int32_t* tl = wtiles.data<int32_t>();
    int32_t* nt = tl + wtiles.numel() - 1;
    prepare(s);
    k::act_quant_fp8(x.raw(), D, k::DT::BF16, T, D, 128, false, xq.raw(), D, xs.data<float>(), kbx,
                     1, s);
    k::moe_gather_fp8(xq.raw(), xs.data<float>(), D, kbx, kk, g.perm, g.offsets + E, P, xsort.raw(),
                      xst.data<float>(), Pp, s);
    k::fp8_moe_wgmma_tiles(g.counts, 0, E, tl, nt, s);
    k::fp8_moe_wgmma_gemm(true, xsort.raw(), xst.data<float>(), Pp, P, g.counts, g.offsets, gu.v, 0,
                          E, tl, nt, h.data<float>(), s);
    k::act_quant_fp8(h.raw(), I, k::DT::F32, P, I, 128, false, hq.raw(), I, hst.data<float>(), 1,
                     Pp, s);
    k::fp8_moe_wgmma_gemm(false, hq.raw(), hst.data<float>(), Pp, P, g.counts, g.offsets, dn.v, 0,
                          E, tl, nt, y.data<float>(), s);
    combine(s);
  }
  void wgmma_buffers() {
    const int64_t Pp = (P + 3) / 4 * 4;
    xsort = Tensor::empty({P, D}, DType::U8, Device::cuda());        // [P, D] e4m3
    xst = Tensor::empty({D / 128, Pp}, DType::F32, Device::cuda());  // [kbx, Pp]
    hst = Tensor::empty({I / 128, Pp}, DType::F32, Device::cuda());  // [kbh, Pp]
    wtiles = Tensor::empty({4 * k::fp8_moe_wgmma_max_tiles(P, E) + 1}, DType::I32,
                           Device::cuda());  // int4 tiles, then their count
  }
  Tensor xsort, xst, hst, wtiles;
  // The bf16 experts through moe_experts' device path as the backend picks it (SIMT kernels
  // below one row per expert, tensor cores from there): the baseline the quantized rows beat.
  void bf16(const Tensor& gu, const Tensor& dn, cudaStream_t s) const {
    prepare(s);
    if (cuda::heuristics::moe_tensor_cores(-1, false, P, E)) {
      const int groups = cuda::heuristics::moe_row_groups(0, P, E);
      k::moe_gate_up_mma(x.raw(), D, kk, gu.raw(), g.counts, g.offsets, g.perm, g.active,
                         g.num_active, g.max_active, I, D, h.raw(), groups, s);
      k::moe_down_mma(h.raw(), dn.raw(), g.counts, g.offsets, g.active, g.num_active, g.max_active,
                      I, D, y.data<float>(), groups, s);
    } else {
      k::moe_gate_up(x.raw(), D, kk, gu.raw(), g.counts, g.offsets, g.perm, g.active, g.num_active,
                     g.max_active, I, D, h.raw(), s);
      k::moe_down(h.raw(), dn.raw(), g.counts, g.offsets, g.active, g.num_active, g.max_active, I,
                  D, y.data<float>(), s);
    }
    combine(s);
  }
  void mxfp4(const Mx4Dev& gu, const Mx4Dev& dn, bool w4a4, cudaStream_t s) const {
    prepare(s);
    // As the backend runs them: a quantizer before an expert kernel triggers it early.
    k::MoeGroups ge = g;
    ge.grouping_before_wait = w4a4;
    if (w4a4)
      k::act_qdq_mxfp4(x.raw(), D, k::DT::BF16, T, D, xq.raw(), D, s, /*early=*/true,
                       /*paired=*/true);
    k::mxfp4_moe_gate_up(w4a4 ? xq.raw() : x.raw(), D, ge, gu.v, I, h.raw(),
                         w4a4 ? k::DT::F32 : k::DT::BF16, s, ring_depth(), w4a4);
    if (w4a4)
      k::act_qdq_mxfp4(h.raw(), I, k::DT::F32, P, I, hq.raw(), I, s, /*early=*/true,
                       /*paired=*/true);
    k::mxfp4_moe_down(w4a4 ? hq.raw() : h.raw(), I, ge, dn.v, y.data<float>(), s, ring_depth(),
                      w4a4);
    combine(s);
  }
};

}  // namespace

void bench_quant(double copy_gbps, bool quick) {
  const int sms = cuda::cuda_backend()->num_sms();
  Timer tm(quick);
  const int64_t D = 6144, I = 2048, E = 256, kTop = 8;
  struct Lin {
    const char* name;
    int64_t N, K;
  };
  // GLM-5.2: q_a | kv_a | indexer wk fused (2048 + 576 + 128), q_b (64 x 256), the indexer's
  // wq_b (32 x 128), o_proj, the shared expert.
  const std::vector<Lin> attn = {{"q_a|kv_a|wk 2752x6144", 2752, D},
                                 {"q_b 16384x2048", 16384, 2048},
                                 {"idx wq_b 4096x2048", 4096, 2048},
                                 {"o_proj 6144x16384", 6144, 16384}};
  const std::vector<Lin> shared = {{"shared gate_up 4096x6144", 2 * I, D},
                                   {"shared down 6144x2048", D, I}};
  std::vector<Fp8Dev> aw, sw;
  uint64_t seed = 500;
  for (const Lin& l : attn) aw.push_back(make_fp8(1, l.N, l.K, seed += 7));
  for (const Lin& l : shared) sw.push_back(make_fp8(1, l.N, l.K, seed += 7));
  // TANDEM_QBENCH_DECODE=1: batches 1, 8, 32 even with --quick, and no prefill section.
  const char* dec_env = std::getenv("TANDEM_QBENCH_DECODE");
  const bool decode_only = dec_env && dec_env[0] == '1';
  std::vector<int64_t> batches =
      quick && !decode_only ? std::vector<int64_t>{1, 32} : std::vector<int64_t>{1, 8, 32};
  // TANDEM_QBENCH_BATCHES=32 (or "1,8"): only these batches (a profiler run of one shape).
  if (const char* b = std::getenv("TANDEM_QBENCH_BATCHES"); b && *b) {
    batches.clear();
    for (const char* p = b; *p;) {
      char* end = nullptr;
      const long v = std::strtol(p, &end, 10);
      if (end == p) break;
      if (v > 0) batches.push_back(v);
      p = *end == ',' ? end + 1 : end;
    }
  }

  std::printf(
      "FP8 block decode linears (128x128 scales, per-token-group activations): us, weight GB/s as "
      "%% of copy %.0f GB/s, HBM floor us\n",
      copy_gbps);
  if (ring_depth() != 0)
    std::printf("decode kernels' ring depth forced to %d (TANDEM_QUANT_RING)\n", ring_depth());
  std::printf("%-26s %4s %27s %27s %9s %27s\n", "shape", "M", "quant + gemv", "gemv alone",
              "quant us", "wgmma kernel alone");
  for (size_t i = 0; i < attn.size() + shared.size(); ++i) {
    const Lin& l = i < attn.size() ? attn[i] : shared[i - attn.size()];
    const Fp8Dev& w = i < attn.size() ? aw[i] : sw[i - attn.size()];
    for (int64_t M : batches) {
      DecodeLinear dl(w, M, sms);
      const double t_all = tm.us(
          [&](cudaStream_t s) {
            dl.quant(s);
            dl.gemv(s);
          },
          true);
      const double t_g = tm.us([&](cudaStream_t s) { dl.gemv(s); }, true);
      const double t_q = tm.us([&](cudaStream_t s) { dl.quant(s); }, true);
      const double b = static_cast<double>(w.bytes());
      // The grouped FP8 wgmma kernel on the same weight (one launch): a candidate
      // for every M in one kernel (issue #20 item 3), measured beside the stream.
      std::string cw = "n/a";
      if (k::fp8_linear_wgmma_applies(w.v)) {
        const WgmmaLinear wl(w, M);
        wl.quant(nullptr);
        cw = cell(tm.us([&](cudaStream_t s) { wl.gemm(s); }, true), b, copy_gbps);
      }
      std::printf("%-26s %4lld %27s %27s %9.1f %27s\n", l.name, static_cast<long long>(M),
                  cell(t_all, b, copy_gbps).c_str(), cell(t_g, b, copy_gbps).c_str(), t_q,
                  cw.c_str());
      std::fflush(stdout);
    }
  }

  // Routed experts: FP8 and MXFP4 (only the experts some token picked are read).
  std::printf(
      "\nGLM-5.2 MoE layer decode (256 experts top-8 + 1 shared, hidden 6144, moe_inter 2048)\n");
  const Fp8Dev gu8 = make_fp8(E, 2 * I, D, 900), dn8 = make_fp8(E, D, I, 910);
  const Mx4Dev gu4 = make_mx4(E, 2 * I, D, 920), dn4 = make_mx4(E, D, I, 930);
  Tensor gu16 = Tensor::empty({E, 2 * I, D}, DType::BF16, Device::cuda());  // [E, 2I, D]
  Tensor dn16 = Tensor::empty({E, D, I}, DType::BF16, Device::cuda());      // [E, D, I]
  cuda::fill_random(gu16, 940, 0.02f);
  cuda::fill_random(dn16, 950, 0.02f);
  const double e16 = static_cast<double>(gu16.nbytes() + dn16.nbytes()) / E;
  const double e8 = static_cast<double>(gu8.bytes() + dn8.bytes()) / E;
  const double e4 = static_cast<double>(gu4.bytes() + dn4.bytes()) / E;
  double attn_b = 0, shared_b = 0;
  for (const Fp8Dev& w : aw) attn_b += static_cast<double>(w.bytes());
  for (const Fp8Dev& w : sw) shared_b += static_cast<double>(w.bytes());
  std::printf("%-44s %5s %9s %27s\n", "what", "batch", "experts", "us  %copy  floor us");
  for (int64_t B : batches) {
    DecodeExperts ex(B, kTop, E, D, I, 1000 + static_cast<uint64_t>(B));
    std::vector<DecodeLinear> lins;
    for (const Fp8Dev& w : aw) lins.emplace_back(w, B, sms);
    for (const Fp8Dev& w : sw) lins.emplace_back(w, B, sms);
    auto linears = [&](cudaStream_t s) {
      for (const DecodeLinear& l : lins) {
        l.quant(s);
        l.gemv(s);
      }
    };
    const double routed8 = e8 * static_cast<double>(ex.distinct);
    const double routed4 = e4 * static_cast<double>(ex.distinct);
    auto row = [&](const char* what, double us, double bytes) {
      std::printf("%-44s %5lld %9lld %27s\n", what, static_cast<long long>(B),
                  static_cast<long long>(ex.distinct), cell(us, bytes, copy_gbps).c_str());
      std::fflush(stdout);
    };
    row("routed experts bf16 (moe_experts' kernels)",
        tm.us([&](cudaStream_t s) { ex.bf16(gu16, dn16, s); }, true),
        e16 * static_cast<double>(ex.distinct));
    row("routed experts FP8 (prepare..combine)",
        tm.us([&](cudaStream_t s) { ex.fp8(gu8, dn8, s); }, true), routed8);
    if (k::fp8_moe_wgmma_applies(gu8.v, dn8.v, E)) {
      ex.wgmma_buffers();
      row("routed experts FP8, grouped wgmma kernels",
          tm.us([&](cudaStream_t s) { ex.fp8_wgmma(gu8, dn8, s); }, true), routed8);
    }
    row("routed experts MXFP4 W4A16",
        tm.us([&](cudaStream_t s) { ex.mxfp4(gu4, dn4, false, s); }, true), routed4);
    row("routed experts MXFP4 W4A4 (qdq activations)",
        tm.us([&](cudaStream_t s) { ex.mxfp4(gu4, dn4, true, s); }, true), routed4);
    row("layer linears FP8 (attn proj + shared + routed)",
        tm.us(
            [&](cudaStream_t s) {
              linears(s);
              ex.fp8(gu8, dn8, s);
            },
            true),
        attn_b + shared_b + routed8);
    // TANDEM_QBENCH_TIMELINE=1: where the batch's FP8 layer linears spend their time, per kernel.
    if (const char* tl = std::getenv("TANDEM_QBENCH_TIMELINE"); tl && tl[0] == '1')
      tm.timeline(
          [&](cudaStream_t s) {
            linears(s);
            ex.fp8(gu8, dn8, s);
          },
          "FP8 layer linears, batch " + std::to_string(B));
    for (const bool w4a4 : {false, true})  // weight-only, then the Quark checkpoints' default
      row(w4a4 ? "layer linears, FP8 attn/shared + MXFP4 W4A4"
               : "layer linears, FP8 attn/shared + MXFP4 experts",
          tm.us(
              [&](cudaStream_t s) {
                linears(s);
                ex.mxfp4(gu4, dn4, w4a4, s);
              },
              true),
          attn_b + shared_b + routed4);
    // TANDEM_QBENCH_TIMELINE=1: the MXFP4 W4A4 routed experts (the Quark checkpoints' default),
    // per kernel.
    if (const char* tl = std::getenv("TANDEM_QBENCH_TIMELINE"); tl && tl[0] == '1')
      tm.timeline([&](cudaStream_t s) { ex.mxfp4(gu4, dn4, true, s); },
                  "MXFP4 W4A4 routed experts, batch " + std::to_string(B));
  }
  std::printf(
      "(not counted: W_UK / W_UV head_matmul (bf16), the f32 router, norms, attention itself)\n\n");

  if (decode_only) return;
  // Prefill: cuBLASLt block-scaled FP8 against per-tensor FP8 on the same shapes.
  const int64_t M = 4096;
  cuda::LtFp8 lt;
  std::printf(
      "FP8 prefill, %lld tokens: cuBLASLt block-scaled (VEC128 x BLK128x128) against per-tensor "
      "FP8 (target >= 60%%)\n",
      static_cast<long long>(M));
  std::printf("%-28s %10s %10s %10s %8s %9s\n", "shape", "quant us", "block us", "tensor us",
              "block %", "block TF/s");
  Tensor one = Tensor::from_vector(std::vector<float>{1.f}, {1}).to(Device::cuda());
  auto us_or_na = [](bool ok, double us) {
    char b[32];
    std::snprintf(b, sizeof b, ok ? "%.1f" : "n/a", us);
    return std::string(b);
  };
  for (size_t i = 0; i < attn.size() + shared.size(); ++i) {
    const Lin& l = i < attn.size() ? attn[i] : shared[i - attn.size()];
    const Fp8Dev& w = i < attn.size() ? aw[i] : sw[i - attn.size()];
    const BlockScaledRows rows(M, l.N, l.K);
    const double tq = tm.us([&](cudaStream_t s) { rows.quant(s); }, false);
    bool ok_b = true, ok_t = true;
    const double tb = tm.us([&](cudaStream_t s) { ok_b = rows.gemm(lt, w, l.N, s); }, false);
    const double tt = tm.us(
        [&](cudaStream_t s) {
          ok_t = lt.gemm(cuda::LtFp8::Scales::kTensor, rows.xq.raw(), one.data<float>(), w.w.raw(),
                         one.data<float>(), rows.out.raw(), l.N, false, M, l.N, l.K, s);
        },
        false);
    std::printf("%-28s %10.1f %10s %10s %7.0f%% %9.0f\n", l.name, tq, us_or_na(ok_b, tb).c_str(),
                us_or_na(ok_t, tt).c_str(), 100.0 * tt / tb,
                2.0 * M * l.N * l.K / (tb * 1e-6) / 1e12);
    std::fflush(stdout);
  }
  // Deterministic mode keeps the weight-stream kernels at every row count (their reduction order
  // depends on N, K and the SM count only); default mode switches to cuBLASLt's block-scaled
  // GEMM above kQuantDecodeMaxRows. This table is what that costs (issue #20, item 3).
  std::printf(
      "\nFP8 linears past the decode sizes: the weight stream (deterministic mode's path at any M) "
      "against cuBLASLt block-scaled (default mode's above 64 rows); activations quantized "
      "beforehand, not timed\n");
  std::printf("%-28s %6s %10s %10s %12s %10s %12s\n", "shape", "M", "stream us", "block us",
              "stream/block", "wgmma us", "wgmma/block");
  for (size_t i = 0; i < attn.size() + shared.size(); ++i) {
    const Lin& l = i < attn.size() ? attn[i] : shared[i - attn.size()];
    const Fp8Dev& w = i < attn.size() ? aw[i] : sw[i - attn.size()];
    for (int64_t Mr : {int64_t{128}, int64_t{512}, int64_t{4096}}) {
      DecodeLinear dl(w, Mr, sms);
      dl.quant(nullptr);  // the stream's activations: real quantized values, not zeros
      const double ts = tm.us([&](cudaStream_t st) { dl.gemv(st); }, false);
      const BlockScaledRows rows(Mr, l.N, l.K);
      rows.quant(nullptr);
      bool ok = true;
      const double tb = tm.us([&](cudaStream_t st) { ok = rows.gemm(lt, w, l.N, st); }, false);
      double tw = 0;
      const bool okw = k::fp8_linear_wgmma_applies(w.v);
      if (okw) {
        const WgmmaLinear wl(w, Mr);
        wl.quant(nullptr);
        tw = tm.us([&](cudaStream_t st) { wl.gemm(st); }, false);
      }
      std::printf("%-28s %6lld %10.1f %10s %12.2f %10s %12.2f\n", l.name,
                  static_cast<long long>(Mr), ts, us_or_na(ok, tb).c_str(), ok ? ts / tb : 0.0,
                  us_or_na(okw, tw).c_str(), ok && okw ? tw / tb : 0.0);
      std::fflush(stdout);
    }
  }
  // Routed experts at 4096 tokens: 128 rows per expert (uniform), one GEMM per expert, as the
  // host path of moe_experts loops; and MXFP4 experts dequantized per expert into bf16 for the
  // bf16 cuBLASLt GEMM.
  {
    const int64_t rows = M * kTop / E;
    Tensor xq = dev_bytes(rows * D), hq = dev_bytes(rows * I);
    Tensor xs = dev_floats(D / 128 * rows, 1e-2f, 2e-2f, 5),
           hs = dev_floats(I / 128 * rows, 1e-2f, 2e-2f, 6);
    fill_codes(xq.raw(), xq.nbytes(), true, 7);
    fill_codes(hq.raw(), hq.nbytes(), true, 8);
    Tensor g = Tensor::empty({rows, 2 * I}, DType::BF16, Device::cuda());  // [rows, 2I]
    Tensor y = Tensor::empty({rows, D}, DType::BF16, Device::cuda());      // [rows, D]
    auto experts = [&](cuda::LtFp8::Scales mode, cudaStream_t s) {
      const bool blk = mode == cuda::LtFp8::Scales::kBlock128;
      for (int64_t e = 0; e < E; ++e) {
        lt.gemm(mode, xq.raw(), blk ? xs.data<float>() : one.data<float>(),
                gu8.v.w + e * gu8.v.w_es, blk ? gu8.v.s + e * gu8.v.s_es : one.data<float>(),
                g.raw(), 2 * I, false, rows, 2 * I, D, s);
        lt.gemm(mode, hq.raw(), blk ? hs.data<float>() : one.data<float>(),
                dn8.v.w + e * dn8.v.w_es, blk ? dn8.v.s + e * dn8.v.s_es : one.data<float>(),
                y.raw(), D, false, rows, D, I, s);
      }
    };
    const double tb =
        tm.us([&](cudaStream_t s) { experts(cuda::LtFp8::Scales::kBlock128, s); }, false);
    const double tt =
        tm.us([&](cudaStream_t s) { experts(cuda::LtFp8::Scales::kTensor, s); }, false);
    const double fl = 2.0 * E * rows * 3 * I * D;
    std::printf("%-28s %10s %10.1f %10.1f %7.0f%% %9.0f\n", "routed experts (128 rows each)", "-",
                tb, tt, 100.0 * tt / tb, fl / (tb * 1e-6) / 1e12);
    // The same products on the grouped FP8 wgmma kernels (moe_wgmma_fp8.cu), every expert's own
    // rows (E x 128 sorted rows, scales transposed as the kernels read them), the tiles listed
    // on the device: two launches, no host sync. "block us" is theirs; the percentage is
    // per-tensor cuBLASLt's loop time over it, as in the rows above. h and y are f32.
    if (k::fp8_moe_wgmma_applies(gu8.v, dn8.v, E)) {
      const int64_t P = E * rows, Pp = (P + 3) / 4 * 4;
      Tensor xa = dev_bytes(P * D), ha = dev_bytes(P * I);  // [P, D], [P, I] e4m3
      fill_codes(xa.raw(), xa.nbytes(), true, 11);
      fill_codes(ha.raw(), ha.nbytes(), true, 12);
      Tensor xst = dev_floats(D / 128 * Pp, 1e-2f, 2e-2f, 13);  // [D / 128, Pp]
      Tensor hst = dev_floats(I / 128 * Pp, 1e-2f, 2e-2f, 14);  // [I / 128, Pp]
      std::vector<int32_t> cnt(static_cast<size_t>(E), static_cast<int32_t>(rows)), off;
      for (int64_t e = 0; e <= E; ++e) off.push_back(static_cast<int32_t>(e * rows));
      Tensor counts = Tensor::from_vector(cnt, {E}).to(Device::cuda());       // [E]
      Tensor offsets = Tensor::from_vector(off, {E + 1}).to(Device::cuda());  // [E + 1]
      Tensor tiles =
          Tensor::empty({4 * k::fp8_moe_wgmma_max_tiles(P, E) + 1}, DType::I32, Device::cuda());
      int32_t* num_tiles = tiles.data<int32_t>() + tiles.numel() - 1;
      Tensor hf = Tensor::empty({P, I}, DType::F32, Device::cuda());  // [P, I]
      Tensor yf = Tensor::empty({P, D}, DType::F32, Device::cuda());  // [P, D]
      const double tw = tm.us(
          [&](cudaStream_t s) {
            k::fp8_moe_wgmma_tiles(counts.data<int32_t>(), 0, E, tiles.data<int32_t>(), num_tiles,
                                   s);
            k::fp8_moe_wgmma_gemm(true, xa.raw(), xst.data<float>(), Pp, P, counts.data<int32_t>(),
                                  offsets.data<int32_t>(), gu8.v, 0, E, tiles.data<int32_t>(),
                                  num_tiles, hf.data<float>(), s);
            k::fp8_moe_wgmma_gemm(false, ha.raw(), hst.data<float>(), Pp, P, counts.data<int32_t>(),
                                  offsets.data<int32_t>(), dn8.v, 0, E, tiles.data<int32_t>(),
                                  num_tiles, yf.data<float>(), s);
          },
          false);
      const double wbytes = static_cast<double>(gu8.bytes() + dn8.bytes());
      std::printf(
          "%-28s %10s %10.1f %10.1f %7.0f%% %9.0f   (grouped FP8 wgmma; weights once: "
          "%.0f us at copy)\n",
          "routed experts, grouped", "-", tw, tt, 100.0 * tt / tw, fl / (tw * 1e-6) / 1e12,
          wbytes / (copy_gbps * 1e3));
      // MXFP4 experts on the same kernels, as the backend runs W4A4 (mxfp4_moe_wgmma_chunk):
      // each group of experts' weights converted to FP8 blocks (within 1 GiB), its tiles, its
      // GEMM; gate_up for every group, then down. The activations are the FP8 rows above.
      if (k::mxfp4_fp8_applies(gu4.v) && k::mxfp4_fp8_applies(dn4.v)) {
        const int64_t G =
            std::clamp<int64_t>((int64_t{1} << 30) / (2 * I * D + 2 * I * (D / 128) * 4), 1, E);
        Tensor wq = dev_bytes(G * 2 * I * D);  // [G, 2I, D]
        Tensor wsc = Tensor::empty({G * 2 * I * (D / 128)}, DType::F32, Device::cuda());
        Tensor t4 =
            Tensor::empty({4 * k::fp8_moe_wgmma_max_tiles(P, G) + 1}, DType::I32, Device::cuda());
        int32_t* n4 = t4.data<int32_t>() + t4.numel() - 1;
        const double tc = tm.us(
            [&](cudaStream_t s) {
              for (int pass = 0; pass < 2; ++pass) {
                const k::Mx4W& src = pass == 0 ? gu4.v : dn4.v;
                k::Fp8W w;
                w.w = static_cast<const uint8_t*>(wq.raw()), w.s = wsc.data<float>();
                w.N = src.N, w.K = src.K, w.bn = 1, w.bk = 128, w.s_rs = src.K / 128;
                w.w_es = src.N * src.K, w.s_es = src.N * (src.K / 128);
                for (int64_t e0 = 0; e0 < E; e0 += G) {
                  const int64_t ne = std::min(G, E - e0);
                  k::mxfp4_to_fp8(src, e0, ne, wq.raw(), wsc.data<float>(), s);
                  k::fp8_moe_wgmma_tiles(counts.data<int32_t>(), e0, ne, t4.data<int32_t>(), n4, s);
                  k::fp8_moe_wgmma_gemm(pass == 0, pass == 0 ? xa.raw() : ha.raw(),
                                        pass == 0 ? xst.data<float>() : hst.data<float>(), Pp, P,
                                        counts.data<int32_t>(), offsets.data<int32_t>(), w, e0, ne,
                                        t4.data<int32_t>(), n4,
                                        pass == 0 ? hf.data<float>() : yf.data<float>(), s);
                }
              }
            },
            false);
        std::printf(
            "%-28s %10s %10.1f %10s %7s %9.0f   (MXFP4 converted to FP8 blocks per %lld "
            "experts + grouped FP8 wgmma)\n",
            "routed experts MXFP4, grouped", "-", tc, "-", "-", fl / (tc * 1e-6) / 1e12,
            static_cast<long long>(G));
      }
    }
    cuda::LtGemm bf;
    Tensor wg = Tensor::empty({2 * I, D}, DType::BF16, Device::cuda());  // one expert, dequantized
    Tensor wd = Tensor::empty({D, I}, DType::BF16, Device::cuda());
    Tensor xb = Tensor::empty({rows, D}, DType::BF16, Device::cuda());
    Tensor hb = Tensor::empty({rows, I}, DType::BF16, Device::cuda());
    cuda::fill_random(xb, 9, 1.0f);
    cuda::fill_random(hb, 10, 1.0f);
    const double t4 = tm.us(
        [&](cudaStream_t s) {
          for (int64_t e = 0; e < E; ++e) {
            k::mxfp4_dequant_bf16(gu4.v, e, wg.raw(), s);
            bf.gemm(xb.raw(), D, wg.raw(), D, g.raw(), 2 * I, false, rows, 2 * I, D, s);
            k::mxfp4_dequant_bf16(dn4.v, e, wd.raw(), s);
            bf.gemm(hb.raw(), I, wd.raw(), I, y.raw(), D, false, rows, D, I, s);
          }
        },
        false);
    std::printf("%-28s %10s %10.1f %10s %7.0f%% %9.0f   (MXFP4: dequant to bf16 + bf16 cuBLASLt)\n",
                "routed experts MXFP4", "-", t4, "-", 100.0 * tt / t4, fl / (t4 * 1e-6) / 1e12);
  }
  std::printf("\n");
}

}  // namespace tandem::bench
