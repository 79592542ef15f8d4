// Kernel and decode-step benchmarks on one GPU, against the machine's own ceilings measured in
// the same run: HBM copy bandwidth (bytes read + written) and the bf16 cuBLASLt GEMM rate.
//
// One real-shape GLM-5.2 layer (hidden 6144, 64 heads, kv_lora 512, 256 experts top-8 + shared,
// indexer 32 x 128 top-2048) with dummy random bf16 weights created on the device runs the
// model's own decoder_layer() code: decode steps at batch 1..128 and context 1k..32k (CUDA
// graph replay and eager, CUDA events, median, L2 flushed before every timed run), reporting the
// bytes the step must read (attention weights, the experts actually routed, the shared expert,
// the KV rows read) as GB/s against the copy bandwidth; the same for a dense layer; and prefill
// tokens/s with TFLOP/s against the GEMM rate.
//
// Usage: kernel_bench [--quick] [--linear-only] [--quant-only] [--topk-only]   (--quick: fewer
// shapes and iterations; --linear-only: the ceilings and the linear-path tables only;
// --f32-only: the ceilings and the fp32-weight linear table;
// --quant-only: the ceilings and the quantized-weight tables (FP8 / MXFP4, kept out of the
// default run: they allocate ~15 GB of experts and add a minute to scripts/gpu_suite.sh's
// kernel_bench step); --topk-only: the ceilings and the indexer selection table;
// --layers-only: the ceilings and the layer tables; --deterministic: the layer tables with the
// backend in deterministic mode, the batch-invariant kernels of --enable-deterministic-inference;
// --timeline with --profile-step: the step's kernel timeline from CUPTI, both streams)
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_gemm.h"
#include "backends/init.h"
#include "bench_util.h"
#include "core/error.h"
#include "model/decoder_layer.h"
#include "model/fused_projections.h"
#include "model/layer_context.h"
#include "model/presets.h"
#include "model/rope.h"
#include "ops/forwarding_backend.h"
#include "ops/ops.h"
#include "runtime/batch_builder.h"

namespace tandem::bench {
namespace {

// ---- a real-shape layer with dummy weights -----------------------------------------------------

uint64_t g_seed = 100;

Tensor dev_rand(const Shape& s, float scale, DType dt = DType::BF16) {
  Tensor t = Tensor::empty(s, dt, Device::cuda());
  cuda::fill_random(t, g_seed++, scale);
  return t;
}
Tensor dev_ones_ish(int64_t n) {  // norm weights around 1
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 1.0f + 0.01f * static_cast<float>(i % 7);
  return Tensor::from_vector(v, {n}).to(Device::cuda());
}
Weight wt(const Shape& s, float scale, DType dt = DType::BF16) {
  return Weight{dev_rand(s, scale, dt), {}, WeightFormat::kDense};
}
int64_t wbytes(const Weight& w) {
  return w.w.nbytes();
}

struct Layer {
  LayerWeights w;
  int64_t attn_bytes = 0;    // attention + indexer weights read per step
  int64_t shared_bytes = 0;  // router + shared expert (MoE) or the dense MLP
  int64_t expert_bytes = 0;  // one routed expert (gate_up + down)
};

Layer make_layer(const ModelConfig& c, bool moe) {
  Layer L;
  const int64_t D = c.hidden_size, H = c.num_attention_heads, rq = c.q_lora_rank,
                rkv = c.kv_lora_rank;
  const int64_t dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
  const float s = 0.02f;
  AttentionWeights& a = L.w.attn;
  L.w.input_norm = dev_ones_ish(D);
  L.w.post_attn_norm = dev_ones_ish(D);
  a.q_a_proj = wt({rq, D}, s);
  a.q_a_layernorm = dev_ones_ish(rq);
  a.q_b_proj = wt({H * (dn + dr), rq}, s);
  a.kv_a_proj = wt({rkv + dr, D}, s);
  a.kv_a_layernorm = dev_ones_ish(rkv);
  a.kv_b_proj = wt({H * (dn + dv), rkv}, s);
  a.w_uk_t = dev_rand({H, rkv, dn}, s);
  a.w_uv = dev_rand({H, dv, rkv}, s);
  a.o_proj = wt({D, H * dv}, s);
  IndexerWeights ix;
  ix.wq_b = wt({c.index_n_heads * c.index_head_dim, rq}, s);
  ix.wk = wt({c.index_head_dim, D}, s);
  ix.k_norm_w = dev_ones_ish(c.index_head_dim);
  ix.k_norm_b = dev_rand({c.index_head_dim}, 0.01f, DType::F32);
  ix.weights_proj = wt({c.index_n_heads, D}, s, DType::F32);
  a.indexer = ix;
  // Decode reads the absorbed W_UK/W_UV, not kv_b_proj.
  L.attn_bytes = wbytes(a.q_a_proj) + wbytes(a.q_b_proj) + wbytes(a.kv_a_proj) + a.w_uk_t.nbytes() +
                 a.w_uv.nbytes() + wbytes(a.o_proj) + wbytes(ix.wq_b) + wbytes(ix.wk) +
                 wbytes(ix.weights_proj);
  fuse_attention_projections(a);  // as Model does: q_a | kv_a | wk in one GEMM
  if (moe) {
    MoeWeights m;
    const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
    m.router = wt({E, D}, s, DType::F32);
    m.score_bias = dev_rand({E}, 0.01f, DType::F32);
    m.experts_gate_up = Weight::from_dense(dev_rand({E, 2 * I, D}, s));
    m.experts_down = Weight::from_dense(dev_rand({E, D, I}, s));
    MlpWeights sh{wt({2 * I * c.n_shared_experts, D}, s), wt({D, I * c.n_shared_experts}, s)};
    m.shared = sh;
    L.shared_bytes = wbytes(m.router) + wbytes(sh.gate_up) + wbytes(sh.down);
    L.expert_bytes = 3 * I * D * 2;
    L.w.moe = std::move(m);
  } else {
    const int64_t I = c.intermediate_size;
    L.w.mlp = MlpWeights{wt({2 * I, D}, s), wt({D, I}, s)};
    L.shared_bytes = wbytes(L.w.mlp->gate_up) + wbytes(L.w.mlp->down);
  }
  return L;
}

// Forwards every op to the CUDA backend and keeps the last routing, to count the experts a step
// really reads.
class Recorder final : public ForwardingBackend {
 public:
  explicit Recorder(Backend& b) : ForwardingBackend(b) {}
  Tensor last_idx;
  void moe_route(const Tensor& l, const Tensor& b, const RouteParams& p, Tensor& i,
                 Tensor& w) override {
    inner().moe_route(l, b, p, i, w);
    last_idx = i;
  }
};

// Forwards every op to the CUDA backend with a pair of events around it: where a step's time
// goes, op by op (eager launches; launch gaps between ops are not counted).
class OpTimer final : public Backend {
 public:
  explicit OpTimer(Backend& b) : b_(b) {}
  ~OpTimer() override {
    for (cudaEvent_t e : pool_) cudaEventDestroy(e);
  }
  void embedding(const Tensor& i, const Tensor& t, int64_t v0, bool shard, Tensor& o) override {
    time("embedding", [&] { b_.embedding(i, t, v0, shard, o); });
  }
  void rms_norm(const Tensor& x, const Tensor& w, float e, Tensor& o) override {
    time("rms_norm", [&] { b_.rms_norm(x, w, e, o); });
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float e, Tensor& o) override {
    time("layer_norm", [&] { b_.layer_norm(x, w, b, e, o); });
  }
  void rope(Tensor& x, const Tensor& p, const Tensor& f, const RopeParams& r) override {
    time("rope", [&] { b_.rope(x, p, f, r); });
  }
  void linear(const Tensor& x, const Weight& w, Tensor& o) override {
    const std::string n =
        "linear " + std::to_string(w.out_features()) + "x" + std::to_string(w.in_features()) +
        (w.w.dtype() == DType::F32 ? " f32" : "") +
        (x.size(0) > cuda::CudaBackend::kSkinnyMaxRows && w.w.dtype() == DType::BF16 ? " (cublasLt)"
                                                                                     : "");
    time(n, [&] { b_.linear(x, w, o); });
  }
  void head_matmul(const Tensor& x, const Tensor& w, Tensor& o) override {
    time("head_matmul " + std::to_string(w.size(1)) + "x" + std::to_string(w.size(2)),
         [&] { b_.head_matmul(x, w, o); });
  }
  void silu_mul(const Tensor& x, Tensor& o) override {
    time("silu_mul", [&] { b_.silu_mul(x, o); });
  }
  void add(const Tensor& a, const Tensor& b, Tensor& o) override {
    time("add", [&] { b_.add(a, b, o); });
  }
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& o) override {
    time("concat_cols", [&] { b_.concat_cols(a, b, o); });
  }
  void gather_rows(const Tensor& s, const Tensor& r, Tensor& o) override {
    time("gather_rows", [&] { b_.gather_rows(s, r, o); });
  }
  void kv_store(const Tensor& r, const Tensor& s, Tensor& p) override {
    time("kv_store", [&] { b_.kv_store(r, s, p); });
  }
  // Ops with a default in Backend: without these the breakdown timed the defaults (the fused
  // latent-row store as rms_norm + concat_cols + rope + kv_store on freshly allocated rows, a
  // row-strided copy as one synchronous copy per row), not what the CUDA backend runs.
  void copy(const Tensor& s, Tensor& d) override {
    time("copy", [&] { b_.copy(s, d); });
  }
  void add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float e, Tensor& o) override {
    time("add_rms_norm", [&] { b_.add_rms_norm(h, b, w, e, o); });
  }
  void mla_kv_store(const Tensor& x, const Tensor& w, float e, const Tensor& pos, const Tensor& f,
                    const RopeParams& r, const Tensor& sm, Tensor& p) override {
    time("mla_kv_store", [&] { b_.mla_kv_store(x, w, e, pos, f, r, sm, p); });
  }
  void kv_gather(const Tensor& p, const AttentionMeta& m, int64_t n, Tensor& o) override {
    time("kv_gather", [&] { b_.kv_gather(p, m, n, o); });
  }
  void mla_decode(const Tensor& q, const Tensor& p, const AttentionMeta& m, const Tensor& k,
                  float s, Tensor& o) override {
    time("mla_decode", [&] { b_.mla_decode(q, p, m, k, s, o); });
  }
  void mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& pe, const AttentionMeta& m,
                   const Tensor& k, float s, Tensor& o) override {
    time("mla_prefill", [&] { b_.mla_prefill(q, kv, pe, m, k, s, o); });
  }
  void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& p, const AttentionMeta& m,
                    Tensor& o) override {
    time("indexer_topk", [&] { b_.indexer_topk(q, w, p, m, o); });
  }
  void moe_route(const Tensor& l, const Tensor& b, const RouteParams& p, Tensor& i,
                 Tensor& w) override {
    time("moe_route", [&] { b_.moe_route(l, b, p, i, w); });
  }
  void moe_experts(const Tensor& x, const Weight& gu, const Weight& d, const Tensor& i,
                   const Tensor& w, Tensor& o) override {
    time("moe_experts", [&] { b_.moe_experts(x, gu, d, i, w, o); });
  }
  void argmax(const Tensor& l, Tensor& o) override {
    time("argmax", [&] { b_.argmax(l, o); });
  }
  void mask_logits(Tensor& l, const Tensor& a) override {
    time("mask_logits", [&] { b_.mask_logits(l, a); });
  }
  void fill_random(Tensor& t, uint64_t seed, float scale) override {
    b_.fill_random(t, seed, scale);
  }
  void sample(const Tensor& l, const Tensor& t, const Tensor& k, const Tensor& p, const Tensor& u,
              Tensor& o) override {
    b_.sample(l, t, k, p, u, o);
  }

  // Sums per op name after the recorded work finished, largest first.
  std::vector<std::pair<std::string, double>> totals() {
    cuda::synchronize();
    std::map<std::string, double> m;
    for (const auto& r : recs_) {
      float ms = 0;
      cudaEventElapsedTime(&ms, r.a, r.b);
      m[r.name] += ms * 1e3;
    }
    std::vector<std::pair<std::string, double>> v(m.begin(), m.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    return v;
  }

 private:
  struct Rec {
    std::string name;
    cudaEvent_t a, b;
  };
  template <typename F>
  void time(const std::string& name, F f) {
    while (pool_.size() < used_ + 2) {
      cudaEvent_t e;
      cudaEventCreate(&e);
      pool_.push_back(e);
    }
    cudaEvent_t a = pool_[used_++], b = pool_[used_++];
    cudaEventRecord(a);
    f();
    cudaEventRecord(b);
    recs_.push_back({name, a, b});
  }
  Backend& b_;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
  std::vector<Rec> recs_;
};

struct Env {
  ModelConfig c;
  ModelWeights mw;  // rope tables only
  std::unique_ptr<KvCache> cache;
  int64_t page_size = 64;
  cuda::ArenaWorkspace ws{Device::cuda(), size_t{3} << 30};
  Tensor flush;  // written between timed runs: evicts the 50 MB L2
  cudaStream_t stream = nullptr;
  ExtendAttention extend_attention = ExtendAttention::kAuto;  // prefill rows: the MLA form
};

struct Timing {
  double eager_us = 0, graph_us = 0;
  int64_t unique_experts = 0;
  // Sum over experts of ceil(rows / 16): the decode expert kernels' 16-row passes, each of which
  // streams the expert's weights once (the bytes a step really reads depend on the routing).
  int64_t expert_passes = 0, max_expert_rows = 0;
};

// --timeline: time_layer prints the kernel timeline of one more graph replay.
bool g_timeline = false;

// Times one forward of the layer on `batch`: eager, then as a CUDA graph.
Timing time_layer(Env& env, Layer& layer, const ForwardBatch& fb, int iters, bool with_graph) {
  const int64_t T = fb.num_tokens(), D = env.c.hidden_size;
  Tensor h0 = dev_rand({T, D}, 1.0f), h = Tensor::empty({T, D}, DType::BF16, Device::cuda());
  LayerContext ctx{env.c, env.mw, fb, *env.cache, env.ws};
  ctx.extend_attention = env.extend_attention;
  Tensor topk;
  auto body = [&]() {
    env.ws.reset();
    decoder_layer(ctx, layer.w, 0, true, h, topk);
  };
  cuda::CudaBackend* be = cuda::cuda_backend();
  Timing out;
  // Warm-up (sizes scratch, picks GEMM algorithms) and the routing record.
  Recorder rec(*be);
  register_backend(DeviceType::CUDA, &rec);
  h.copy_from(h0);
  body();
  register_backend(DeviceType::CUDA, be);
  if (rec.last_idx.defined()) {
    cuda::synchronize();  // routing may have run beside a side branch
    const std::vector<int32_t> ids = to_int_vector(rec.last_idx);
    out.unique_experts = static_cast<int64_t>(std::set<int32_t>(ids.begin(), ids.end()).size());
    std::map<int32_t, int64_t> rows;
    for (int32_t e : ids) ++rows[e];
    for (const auto& [e, n] : rows) {
      out.expert_passes += (n + 15) / 16;
      out.max_expert_rows = std::max(out.max_expert_rows, n);
    }
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  auto timed = [&](cudaStream_t s, const std::function<void()>& run) {
    std::vector<double> us;
    for (int i = 0; i < iters + 1; ++i) {
      CK(cudaMemcpyAsync(h.raw(), h0.raw(), h.nbytes(), cudaMemcpyDeviceToDevice, s));
      CK(cudaMemsetAsync(env.flush.raw(), i & 0xff, env.flush.nbytes(), s));
      cudaEventRecord(e0, s);
      run();
      cudaEventRecord(e1, s);
      CK(cudaEventSynchronize(e1));
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (i > 0) us.push_back(ms * 1e3);
    }
    return median(us);
  };
  out.eager_us = timed(nullptr, body);
  if (with_graph) {
    CK(cudaDeviceSynchronize());
    be->set_stream(env.stream);
    cudaGraph_t g = nullptr;
    CK(cudaStreamBeginCapture(env.stream, cudaStreamCaptureModeThreadLocal));
    body();
    CK(cudaStreamEndCapture(env.stream, &g));
    be->set_stream(nullptr);
    cudaGraphExec_t ex = nullptr;
    CK(cudaGraphInstantiate(&ex, g, 0));
    out.graph_us = timed(env.stream, [&] { CK(cudaGraphLaunch(ex, env.stream)); });
    if (g_timeline) {  // one more replay, from the same state as the timed ones
      CK(cudaMemcpyAsync(h.raw(), h0.raw(), h.nbytes(), cudaMemcpyDeviceToDevice, env.stream));
      CK(cudaMemsetAsync(env.flush.raw(), 0x5a, env.flush.nbytes(), env.stream));
      CK(cudaStreamSynchronize(env.stream));
      print_kernel_timeline([&] { CK(cudaGraphLaunch(ex, env.stream)); },
                            "graph replay, " + std::to_string(fb.num_tokens()) + " tokens");
    }
    cudaGraphExecDestroy(ex);
    cudaGraphDestroy(g);
  }
  cuda::synchronize();
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return out;
}

// One eager forward with every op timed: prints the ops that take the time.
void print_breakdown(Env& env, Layer& layer, const ForwardBatch& fb, const std::string& title) {
  const int64_t T = fb.num_tokens(), D = env.c.hidden_size;
  Tensor h = dev_rand({T, D}, 1.0f);
  LayerContext ctx{env.c, env.mw, fb, *env.cache, env.ws};
  ctx.extend_attention = env.extend_attention;
  Tensor topk;
  cuda::CudaBackend* be = cuda::cuda_backend();
  OpTimer timer(*be);
  register_backend(DeviceType::CUDA, &timer);
  env.ws.reset();
  CK(cudaMemsetAsync(env.flush.raw(), 3, env.flush.nbytes()));
  decoder_layer(ctx, layer.w, 0, true, h, topk);
  register_backend(DeviceType::CUDA, be);
  const auto v = timer.totals();
  double sum = 0;
  for (const auto& [n, us] : v) sum += us;
  std::printf("  breakdown %s (eager, %.0f us in ops):", title.c_str(), sum);
  // TANDEM_BENCH_BREAKDOWN_OPS=N: the N most expensive ops (8 unless set).
  static const int most = [] {
    const char* e = std::getenv("TANDEM_BENCH_BREAKDOWN_OPS");
    return e && std::atoi(e) > 0 ? std::atoi(e) : 8;
  }();
  int shown = 0;
  for (const auto& [n, us] : v) {
    if (shown++ == most) break;
    std::printf("%s %s %.0f", shown == 1 ? "" : ",", n.c_str(), us);
  }
  std::printf("\n");
}

ForwardBatch decode_batch(const Env& env, int64_t batch, int64_t ctx,
                          std::vector<std::vector<int32_t>>& pages) {
  const int64_t pp = (ctx + env.page_size - 1) / env.page_size;
  pages.assign(static_cast<size_t>(batch), {});
  std::vector<SequenceChunk> chunks;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < pp; ++i) pages[b].push_back(static_cast<int32_t>(b * pp + i));
    chunks.push_back(SequenceChunk{&pages[b], ctx - 1, {static_cast<int32_t>(b % 1000)}, false});
  }
  return build_forward_batch(ForwardMode::kDecode, chunks, env.page_size, Device::cuda());
}

// One sequence of T fresh tokens on pages 0, 1, ... (pages: the page list the batch points to).
ForwardBatch prefill_batch(const Env& env, int64_t T, std::vector<int32_t>& pages) {
  pages.clear();
  for (int64_t i = 0; i < (T + env.page_size - 1) / env.page_size; ++i)
    pages.push_back(static_cast<int32_t>(i));
  std::vector<int32_t> toks(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) toks[i] = static_cast<int32_t>(i % 1000);
  return build_forward_batch(ForwardMode::kExtend, {SequenceChunk{&pages, 0, toks, false}},
                             env.page_size, Device::cuda());
}

// One warm eager run of the layer between cudaProfilerStart/Stop, for `ncu --profile-from-start
// off`: every kernel's own duration, no launch gaps.
void profile_once(Env& env, Layer& L, const ForwardBatch& fb) {
  Tensor h = dev_rand({fb.num_tokens(), env.c.hidden_size}, 1.0f);
  const LayerContext ctx{env.c, env.mw, fb, *env.cache, env.ws};
  Tensor tk;
  env.ws.reset();
  CK(cudaDeviceSynchronize());
  CK(cudaProfilerStart());
  decoder_layer(ctx, L.w, 0, true, h, tk);
  CK(cudaDeviceSynchronize());
  CK(cudaProfilerStop());
}

struct DecodeRow {
  std::string layer;
  int64_t batch, ctx, experts;
  double eager_us, graph_us, weight_mb, kv_mb, gbps;
};
struct PrefillRow {
  std::string layer;
  int64_t tokens;
  double ms, tok_s, tflops;
};

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::bench;
  bool quick = false, linear_only = false, f32_only = false, quant_only = false, topk_only = false,
       layers_only = false, deterministic = false;
  // --prefill-only: the layers' prefill rows alone (no decode rows, no earlier-path comparisons);
  // --prefill-tokens 1024,4096: their token counts (default 1024, and 4096 without --quick).
  bool prefill_only = false;
  std::vector<int64_t> prefill_token_list;
  std::string profile_layer;  // --profile-step moe|dense BATCH: one eager step for ncu
  int64_t profile_batch = 1, profile_ctx = 1024;  // --profile-ctx N: the step's context
  std::string prefill_layer;  // --profile-prefill moe|dense T: one eager T-token prefill for ncu
  int64_t prefill_tokens = 4096;
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    linear_only |= std::strcmp(argv[i], "--linear-only") == 0;
    f32_only |= std::strcmp(argv[i], "--f32-only") == 0;
    quant_only |= std::strcmp(argv[i], "--quant-only") == 0;
    topk_only |= std::strcmp(argv[i], "--topk-only") == 0;
    layers_only |= std::strcmp(argv[i], "--layers-only") == 0;
    deterministic |= std::strcmp(argv[i], "--deterministic") == 0;
    g_timeline |= std::strcmp(argv[i], "--timeline") == 0;
    prefill_only |= std::strcmp(argv[i], "--prefill-only") == 0;
    if (std::strcmp(argv[i], "--prefill-tokens") == 0 && i + 1 < argc) {
      for (const char* p = argv[++i]; *p;) {
        char* end = nullptr;
        const long long v = std::strtoll(p, &end, 10);
        if (end == p) break;
        if (v > 0) prefill_token_list.push_back(v);
        p = *end == ',' ? end + 1 : end;
      }
    }
    if (std::strcmp(argv[i], "--profile-step") == 0 && i + 2 < argc) {
      profile_layer = argv[i + 1];
      profile_batch = std::atoll(argv[i + 2]);
      i += 2;
    }
    if (std::strcmp(argv[i], "--profile-ctx") == 0 && i + 1 < argc)
      profile_ctx = std::atoll(argv[++i]);
    if (std::strcmp(argv[i], "--profile-prefill") == 0 && i + 2 < argc) {
      prefill_layer = argv[i + 1];
      prefill_tokens = std::atoll(argv[i + 2]);
      i += 2;
    }
  }
  const bool profiling = !profile_layer.empty() || !prefill_layer.empty();
  try {
    if (!init_backends()) {
      std::fprintf(stderr, "kernel_bench: no CUDA device\n");
      return 1;
    }
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    std::printf("device: %s, %d SMs, L2 %.0f MB\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize / 1e6);
    const double copy_gbps = measure_copy_gbps();
    const double gemm_tf = measure_gemm_tflops();
    std::printf(
        "ceilings: HBM copy %.0f GB/s (read + write), bf16 GEMM 8192^3 %.0f TFLOP/s (cuBLASLt)\n\n",
        copy_gbps, gemm_tf);
    if (quant_only) {
      bench_quant(copy_gbps, quick);
      return 0;
    }
    if (topk_only) {
      bench_topk_select(copy_gbps, quick);
      return 0;
    }
    if (f32_only) {
      bench_linear_f32(copy_gbps, quick);
      return 0;
    }
    if (!profiling && !layers_only) bench_linear_paths(copy_gbps, gemm_tf, quick);
    if (!profiling && !layers_only) bench_linear_f32(copy_gbps, quick);
    if (linear_only) return 0;
    if (!profiling && !layers_only) bench_sampling(copy_gbps, quick);
    if (!profiling && !layers_only) bench_mla_decode_fp8(copy_gbps, quick);
    if (!profiling && !layers_only) bench_topk_select(copy_gbps, quick);

    if (deterministic) {
      cuda::cuda_backend()->set_deterministic(true);
      std::printf("deterministic mode: batch-invariant kernels\n\n");
    }
    Env env;
    env.c = preset_config("glm5.2");
    env.c.num_hidden_layers = 1;
    env.c.layer_is_moe = {true};
    env.c.indexer_full = {true};
    env.c.num_nextn_predict_layers = 0;
    const RopeTables rt = compute_rope_tables(env.c);
    env.mw.rope_inv_freq =
        Tensor::from_vector(rt.inv_freq, {static_cast<int64_t>(rt.inv_freq.size())})
            .to(Device::cuda());
    env.mw.rope_attention_factor = rt.attention_factor;
    const std::vector<int64_t> batches =
        quick ? std::vector<int64_t>{1, 32} : std::vector<int64_t>{1, 8, 32, 128};
    const std::vector<int64_t> ctxs =
        quick ? std::vector<int64_t>{1024, 8192} : std::vector<int64_t>{1024, 8192, 32768};
    const int64_t max_slots = std::max<int64_t>(batches.back() * ctxs.back(), 8192);
    KvCacheOptions ko;
    ko.page_size = env.page_size;
    ko.num_pages = max_slots / env.page_size + 1;
    ko.dtype = DType::BF16;
    ko.device = Device::cuda();
    ko.with_mtp = false;
    env.cache = std::make_unique<KvCache>(env.c, ko);
    cuda::fill_random(env.cache->latent(0), 7, 1.0f);
    cuda::fill_random(env.cache->index_keys(0), 8, 1.0f);
    env.flush = Tensor::empty({int64_t{256} << 20}, DType::U8, Device::cuda());
    CK(cudaStreamCreateWithFlags(&env.stream, cudaStreamNonBlocking));

    Layer moe = make_layer(env.c, true), dense = make_layer(env.c, false);
    const int64_t topk = env.c.index_topk, latent_row = env.c.latent_dim() * 2,
                  index_row = env.c.index_head_dim * 2;
    std::printf(
        "GLM-5.2 layer: attention+indexer weights %.1f MB, router+shared expert %.1f MB, one "
        "routed expert "
        "%.1f MB, dense MLP %.1f MB\n\n",
        moe.attn_bytes / 1e6, moe.shared_bytes / 1e6, moe.expert_bytes / 1e6,
        dense.shared_bytes / 1e6);

    if (!profile_layer.empty()) {
      // One warm eager decode step at context profile_ctx (profile_once).
      std::vector<std::vector<int32_t>> pages;
      ForwardBatch fb = decode_batch(env, profile_batch, profile_ctx, pages);
      Layer& L = profile_layer == "moe" ? moe : dense;
      const Timing t = time_layer(env, L, fb, 3, true);
      std::printf(
          "profile-step %s batch %lld ctx %lld: eager %.1f us, graph %.1f us; experts %lld, "
          "16-row passes %lld, most rows %lld\n",
          profile_layer.c_str(), static_cast<long long>(profile_batch),
          static_cast<long long>(profile_ctx), t.eager_us, t.graph_us,
          static_cast<long long>(t.unique_experts), static_cast<long long>(t.expert_passes),
          static_cast<long long>(t.max_expert_rows));
      profile_once(env, L, fb);
      return 0;
    }

    if (!prefill_layer.empty()) {
      // One warm eager prefill of prefill_tokens fresh tokens (profile_once).
      std::vector<int32_t> pg;
      ForwardBatch fb = prefill_batch(env, prefill_tokens, pg);
      Layer& L = prefill_layer == "moe" ? moe : dense;
      const Timing t = time_layer(env, L, fb, 2, false);
      std::printf("profile-prefill %s T=%lld: eager %.2f ms\n", prefill_layer.c_str(),
                  static_cast<long long>(prefill_tokens), t.eager_us / 1e3);
      print_breakdown(env, L, fb, prefill_layer + " prefill T=" + std::to_string(prefill_tokens));
      profile_once(env, L, fb);
      return 0;
    }

    std::vector<DecodeRow> rows;
    std::printf("%-6s %5s %6s %7s %10s %10s %10s %9s %8s %6s\n", "layer", "batch", "ctx", "experts",
                "eager us", "graph us", "weights MB", "KV MB", "GB/s", "%copy");
    for (Layer* L : prefill_only ? std::vector<Layer*>{} : std::vector<Layer*>{&moe, &dense}) {
      const bool is_moe = L == &moe;
      for (int64_t ctx : ctxs)
        for (int64_t b : batches) {
          std::vector<std::vector<int32_t>> pages;
          ForwardBatch fb = decode_batch(env, b, ctx, pages);
          const Timing t = time_layer(env, *L, fb, quick ? 5 : 15, true);
          const double wbytes = static_cast<double>(L->attn_bytes + L->shared_bytes +
                                                    t.unique_experts * L->expert_bytes);
          // KV read per token: every visible indexer key; the latent rows of min(ctx, top-k) keys.
          const double kv =
              static_cast<double>(b) * (ctx * index_row + std::min(ctx, topk) * latent_row);
          const double best = t.graph_us > 0 ? t.graph_us : t.eager_us;
          const double gbps = (wbytes + kv) / (best * 1e-6) / 1e9;
          rows.push_back({is_moe ? "moe" : "dense", b, ctx, t.unique_experts, t.eager_us,
                          t.graph_us, wbytes / 1e6, kv / 1e6, gbps});
          // TANDEM_BENCH_BREAKDOWNS=all: every step's breakdown, not only b = 1 and the largest.
          static const bool all_breakdowns = [] {
            const char* v = std::getenv("TANDEM_BENCH_BREAKDOWNS");
            return v && std::strcmp(v, "all") == 0;
          }();
          if ((b == 1 || b == batches.back() || all_breakdowns) && ctx == 8192)
            print_breakdown(
                env, *L, fb,
                std::string(is_moe ? "moe" : "dense") + " b=" + std::to_string(b) + " ctx=8192");
          if (!is_moe && b == batches.back() &&
              ctx == 8192) {  // the SIMT attention kernels, for comparison
            cuda::cuda_backend()->set_mla_tensor_cores(false);
            const Timing ts = time_layer(env, *L, fb, quick ? 3 : 5, true);
            cuda::cuda_backend()->set_mla_tensor_cores(true);
            std::printf("  (same step with the SIMT mla_decode kernel: graph %.1f us)\n",
                        ts.graph_us);
          }
          std::printf("%-6s %5lld %6lld %7lld %10.1f %10.1f %10.1f %9.1f %8.0f %5.1f%%\n",
                      is_moe ? "moe" : "dense", static_cast<long long>(b),
                      static_cast<long long>(ctx), static_cast<long long>(t.unique_experts),
                      t.eager_us, t.graph_us, wbytes / 1e6, kv / 1e6, gbps,
                      100.0 * gbps / copy_gbps);
          std::fflush(stdout);
        }
    }

    // Prefill: one sequence of T tokens through the layer (the indexer, sparse MLA in the
    // absorbed form, the grouped experts), and at the largest T the same with the naive MLA form.
    // TFLOP/s counts the naive form's work (kv_b over every gathered latent, 2 (dn + dr + dv)
    // per head and attended key): the absorbed form does about 2.1x the attention
    // multiply-adds, so the rows stay comparable across forms and count no extra work.
    std::vector<PrefillRow> prows;
    const std::vector<int64_t> ptoks = !prefill_token_list.empty() ? prefill_token_list
                                       : quick                     ? std::vector<int64_t>{1024}
                                               : std::vector<int64_t>{1024, 4096};
    std::printf("\n%-6s %7s %10s %10s %9s %6s\n", "layer", "tokens", "ms", "tok/s", "TFLOP/s",
                "%gemm");
    for (Layer* L : {&moe, &dense}) {
      const bool is_moe = L == &moe;
      for (int64_t T : ptoks) {
        std::vector<int32_t> pg;
        ForwardBatch fb = prefill_batch(env, T, pg);
        // The median of 9 (of 3 the layers' rows moved by up to 4% from run to run: the sparse
        // attention kernel alone varies by 2-4% between prefills).
        const Timing t = time_layer(env, *L, fb, 9, false);
        if (T == ptoks.back())
          print_breakdown(
              env, *L, fb,
              std::string(is_moe ? "moe" : "dense") + " prefill T=" + std::to_string(T));
        if (T == ptoks.back() && !prefill_only) {
          env.extend_attention = ExtendAttention::kNaive;
          const Timing tn = time_layer(env, *L, fb, 2, false);
          print_breakdown(env, *L, fb,
                          std::string(is_moe ? "moe" : "dense") +
                              " prefill T=" + std::to_string(T) + ", naive MLA form");
          env.extend_attention = ExtendAttention::kAuto;
          std::printf("  (same prefill with the naive MLA form: %.2f ms)\n", tn.eager_us / 1e3);
          if (is_moe) {  // the expert path's earlier forms: cuBLASLt on the host path, or in
                         // deterministic mode the mma.sync kernels of moe_mma.cu
            cuda::CudaBackend* be = cuda::cuda_backend();
            be->set_moe_wgmma(0);
            const Timing tg = time_layer(env, *L, fb, 3, false);
            const char* earlier = deterministic ? "the mma.sync expert kernels (moe_mma.cu)"
                                                : "cuBLASLt pointer-array batches";
            print_breakdown(env, *L, fb,
                            "moe prefill T=" + std::to_string(T) + ", experts as " + earlier);
            std::printf("  (same prefill with the experts as %s: %.2f ms)\n", earlier,
                        tg.eager_us / 1e3);
            be->set_moe_grouped(false);
            const Timing t4 = time_layer(env, *L, fb, 3, false);
            be->set_expert_streams(1);
            const Timing t1 = time_layer(env, *L, fb, 3, false);
            be->set_expert_streams(4);
            be->set_moe_grouped(true);
            be->set_moe_wgmma(-1);
            std::printf(
                "  (same prefill with a GEMM per expert: four experts at a time %.2f ms, one at a "
                "time %.2f ms)\n",
                t4.eager_us / 1e3, t1.eager_us / 1e3);
          }
          if (!is_moe) {
            cuda::cuda_backend()->set_mla_tensor_cores(false);
            const Timing ts = time_layer(env, *L, fb, 2, false);
            cuda::cuda_backend()->set_mla_tensor_cores(true);
            std::printf("  (same prefill with the SIMT attention kernels: %.2f ms)\n",
                        ts.eager_us / 1e3);
          }
        }
        const ModelConfig& c = env.c;
        const double D = c.hidden_size, H = c.num_attention_heads, rq = c.q_lora_rank,
                     rkv = c.kv_lora_rank;
        const double dn = c.qk_nope_head_dim, dr = c.qk_rope_head_dim, dv = c.v_head_dim;
        // Linear layers (2 flops per multiply-add), kv_b_proj over every gathered latent.
        double lin = rq * D + H * (dn + dr) * rq + (rkv + dr) * D + H * (dn + dv) * rkv +
                     D * H * dv + c.index_n_heads * c.index_head_dim * rq + c.index_head_dim * D +
                     c.index_n_heads * D;
        if (is_moe)
          lin += c.n_routed_experts * D +
                 3.0 * D * c.moe_intermediate_size * (c.num_experts_per_tok + c.n_shared_experts);
        else
          lin += 3.0 * D * c.intermediate_size;
        double flops = 2.0 * T * lin;
        double keys = 0, scored = 0;
        for (int64_t p = 0; p < T; ++p) {
          keys += static_cast<double>(std::min<int64_t>(p + 1, topk));
          if (p + 1 > topk) scored += static_cast<double>(p + 1);
        }
        flops +=
            keys * H * 2.0 * (dn + dr + dv) + scored * 2.0 * c.index_n_heads * c.index_head_dim;
        const double ms = t.eager_us / 1e3;
        const double tf = flops / (ms * 1e-3) / 1e12;
        prows.push_back({is_moe ? "moe" : "dense", T, ms, T / (ms * 1e-3), tf});
        std::printf("%-6s %7lld %10.2f %10.0f %9.1f %5.1f%%\n", is_moe ? "moe" : "dense",
                    static_cast<long long>(T), ms, T / (ms * 1e-3), tf, 100.0 * tf / gemm_tf);
        std::fflush(stdout);
      }
    }

    // The short table.
    std::printf("\nSUMMARY (GLM-5.2 layer, %s; ceilings: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s)\n",
                prop.name, copy_gbps, gemm_tf);
    std::printf("%-28s %10s %10s %8s\n", "decode step (graph)", "us", "GB/s", "%copy");
    for (const DecodeRow& r : rows)
      if (r.batch == 1 || r.batch == batches.back())
        std::printf("%-6s b=%-4lld ctx=%-6lld        %10.1f %10.0f %7.1f%%\n", r.layer.c_str(),
                    static_cast<long long>(r.batch), static_cast<long long>(r.ctx), r.graph_us,
                    r.gbps, 100.0 * r.gbps / copy_gbps);
    std::printf("%-28s %10s %10s %8s\n", "prefill", "ms", "tok/s", "%gemm");
    for (const PrefillRow& r : prows)
      std::printf("%-6s T=%-20lld %10.2f %10.0f %7.1f%%\n", r.layer.c_str(),
                  static_cast<long long>(r.tokens), r.ms, r.tok_s, 100.0 * r.tflops / gemm_tf);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernel_bench: %s\n", e.what());
    return 1;
  }
}
