// A CPU backend that rounds what the CUDA backend stores in bf16: the dense weights (as the
// loader places them on the GPU) and every bf16 op output; f32 stays f32 (norm weights, the
// router and indexer-head weights, router/LM-head logits, routing weights). Running the CPU
// model through it separates the cost of bf16 itself (CPU f32 vs this) from the GPU kernels'
// own error (GPU vs this). It rounds where the CUDA kernels round: each op's bf16 output, and
// inside the expert SwiGLU the intermediate h = silu(gate x) * (up x), which the GPU stores in
// bf16 between its two GEMMs. Given a ChoiceLog (choice_replay.h) it takes the GPU's routed
// experts and indexer rows wherever they differ from its own at a near-tie.
#pragma once

#include <map>
#include <set>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "choice_replay.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "ops/backend.h"

namespace tandem::test {

class Bf16CpuBackend final : public Backend {
 public:
  explicit Bf16CpuBackend(const Model& m) {
    const ModelWeights& w = m.weights();
    lm_head_ = w.lm_head.w.raw();
    auto layer = [&](const LayerWeights& l) {
      if (l.moe) f32_weights_.insert(l.moe->router.w.raw());
      if (l.attn.indexer) f32_weights_.insert(l.attn.indexer->weights_proj.w.raw());
    };
    for (const LayerWeights& l : w.layers) layer(l);
    if (w.mtp) layer(w.mtp->layer);
  }

  void embedding(const Tensor& ids, const Tensor& table, int64_t v0, bool shard,
                 Tensor& out) override {
    cpu().embedding(ids, rounded(table), v0, shard, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    cpu().rms_norm(x, w, eps, out);
    round(out);
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                  Tensor& out) override {
    cpu().layer_norm(x, w, b, eps, out);
    round(out);
  }
  void rope(Tensor& x, const Tensor& p, const Tensor& f, const RopeParams& r) override {
    cpu().rope(x, p, f, r);
    round(x);
  }
  void linear(const Tensor& x, const Weight& w, Tensor& out) override {
    const bool f32w = f32_weights_.count(w.w.raw()) > 0;
    // Quantized weights hold exact values already: the reference computes with them as stored.
    cpu().linear(x, f32w || w.quantized() ? w : Weight{rounded(w.w), {}, WeightFormat::kDense},
                 out);
    if (!f32w && w.w.raw() != lm_head_) round(out);  // router, head weights, logits stay f32
  }
  void head_matmul(const Tensor& x, const Tensor& w, Tensor& out) override {
    cpu().head_matmul(x, rounded(w), out);
    round(out);
  }
  void silu_mul(const Tensor& x, Tensor& out) override {
    cpu().silu_mul(x, out);
    round(out);
  }
  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    cpu().add(a, b, out);
    round(out);
  }
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override {
    cpu().concat_cols(a, b, out);
  }
  void gather_rows(const Tensor& s, const Tensor& r, Tensor& out) override {
    cpu().gather_rows(s, r, out);
  }
  void kv_store(const Tensor& r, const Tensor& s, Tensor& p) override { cpu().kv_store(r, s, p); }
  void kv_gather(const Tensor& p, const AttentionMeta& m, int64_t n, Tensor& out) override {
    cpu().kv_gather(p, m, n, out);
  }
  void mla_decode(const Tensor& q, const Tensor& p, const AttentionMeta& m, const Tensor& k,
                  float s, Tensor& out) override {
    cpu().mla_decode(q, p, m, k, s, out);
    round(out);
  }
  void mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& pe, const AttentionMeta& m,
                   const Tensor& k, float s, Tensor& out) override {
    cpu().mla_prefill(q, kv, pe, m, k, s, out);
    round(out);
  }
  void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& p, const AttentionMeta& m,
                    Tensor& out) override {
    cpu().indexer_topk(q, w, p, m, out);
    if (!replay_) return;
    const int64_t T = out.size(0), K = out.size(1);
    if (replay_->topk.empty() || static_cast<int64_t>(replay_->topk.front().size()) != T * K) {
      ++stats_.unmatched_calls;
      return;
    }
    const std::vector<int32_t> gpu = std::move(replay_->topk.front());
    replay_->topk.pop_front();
    int32_t* ref = out.data<int32_t>();
    for (int64_t t = 0; t < T; ++t) {
      ++stats_.topk_rows;
      if (same_set(ref + t * K, gpu.data() + t * K, K)) continue;
      ++stats_.topk_rows_differ;
      const double d =
          topk_deficit(indexer_scores(q, w, p, m, t), ref + t * K, gpu.data() + t * K, K);
      if (d > stats_.topk_deficit) {
        stats_.topk_deficit = d;
        stats_.worst_topk = "call row " + std::to_string(t);
      }
      std::copy(gpu.begin() + t * K, gpu.begin() + (t + 1) * K, ref + t * K);
    }
  }
  void moe_route(const Tensor& l, const Tensor& b, const RouteParams& p, Tensor& i,
                 Tensor& w) override {
    cpu().moe_route(l, b, p, i, w);
    if (!replay_) return;
    const int64_t T = i.size(0), k = i.size(1), E = l.size(1);
    if (replay_->routes.empty() ||
        static_cast<int64_t>(replay_->routes.front().idx.size()) != T * k) {
      ++stats_.unmatched_calls;
      return;
    }
    const ChoiceLog::Route gpu = std::move(replay_->routes.front());
    replay_->routes.pop_front();
    int32_t* ref = i.data<int32_t>();
    float* rw = w.data<float>();
    for (int64_t t = 0; t < T; ++t) {
      ++stats_.route_rows;
      if (same_set(ref + t * k, gpu.idx.data() + t * k, k)) continue;
      ++stats_.route_rows_differ;
      const double d =
          route_deficit(l.data<float>() + t * l.stride(0), b.defined() ? b.data<float>() : nullptr,
                        E, p, gpu.idx.data() + t * k);
      if (d > stats_.route_deficit) {
        stats_.route_deficit = d;
        stats_.worst_route = "call row " + std::to_string(t);
      }
      std::copy(gpu.idx.begin() + t * k, gpu.idx.begin() + (t + 1) * k, ref + t * k);
      std::copy(gpu.w.begin() + t * k, gpu.w.begin() + (t + 1) * k, rw + t * k);
    }
  }
  // out[t] = bf16(sum_j w[t, j] * down_e . bf16(silu(gate_e . x) * (up_e . x))), e = idx[t, j]:
  // the CUDA expert kernels' rounding points (fp32 sums, h stored in bf16).
  // Quantized experts go to the CPU reference as they are (their values are exact already).
  void moe_experts(const Tensor& x, const Weight& guw, const Weight& dw, const Tensor& idx,
                   const Tensor& w, Tensor& out) override {
    if (guw.quantized()) return cpu().moe_experts(x, guw, dw, idx, w, out);
    const Tensor& gu = guw.w;
    const Tensor& d = dw.w;
    const int64_t T = x.size(0), D = x.size(1), I = d.size(2), k = idx.size(1);
    const float* gp = rounded(gu).data<float>();
    const float* dp = rounded(d).data<float>();
    const float* xp = x.data<float>();
    const int32_t* ip = idx.data<int32_t>();
    const float* wp = w.data<float>();
    float* op = out.data<float>();
    parallel_for(T, [&](int64_t b, int64_t e) {
      std::vector<float> h(static_cast<size_t>(I)), acc(static_cast<size_t>(D));
      for (int64_t t = b; t < e; ++t) {
        const float* xt = xp + t * x.stride(0);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = 0; j < k; ++j) {
          const int64_t ex = ip[t * k + j];
          const float* gate = gp + ex * 2 * I * D;
          for (int64_t c = 0; c < I; ++c) {
            const float g = cpu::dot(xt, gate + c * D, D), u = cpu::dot(xt, gate + (I + c) * D, D);
            h[c] = bf16_to_f32(f32_to_bf16(g / (1.0f + std::exp(-g)) * u));
          }
          for (int64_t r = 0; r < D; ++r)
            acc[r] += wp[t * k + j] * cpu::dot(dp + (ex * D + r) * I, h.data(), I);
        }
        for (int64_t r = 0; r < D; ++r)
          op[t * out.stride(0) + r] = bf16_to_f32(f32_to_bf16(acc[r]));
      }
    });
  }
  void argmax(const Tensor& l, Tensor& out) override { cpu().argmax(l, out); }
  void mask_logits(Tensor& l, const Tensor& a) override { cpu().mask_logits(l, a); }
  void fill_random(Tensor& t, uint64_t seed, float scale) override {
    cpu().fill_random(t, seed, scale);
  }
  void sample(const Tensor& l, const Tensor& t, const Tensor& k, const Tensor& p, const Tensor& u,
              Tensor& o) override {
    cpu().sample(l, t, k, p, u, o);
  }

  // Replays the GPU's choices from `log` (nullptr: the reference's own choices); the stats
  // start over.
  void replay(ChoiceLog* log) {
    replay_ = log;
    stats_ = ChoiceStats{};
  }
  const ChoiceStats& stats() const { return stats_; }

 private:
  static Backend& cpu() { return cpu::cpu_backend(); }
  // A bf16-rounded copy of a weight, made once.
  const Tensor& rounded(const Tensor& w) {
    auto it = cache_.find(w.raw());
    if (it == cache_.end()) it = cache_.emplace(w.raw(), w.to_dtype(DType::BF16).to_f32()).first;
    return it->second;
  }
  // In place, any strides (2 or 3 dims).
  static void round(Tensor& t) {
    float* p = t.data<float>();
    const int64_t d0 = t.size(0), d1 = t.ndim() > 1 ? t.size(1) : 1,
                  d2 = t.ndim() > 2 ? t.size(2) : 1;
    const int64_t s0 = t.stride(0), s1 = t.ndim() > 1 ? t.stride(1) : 0,
                  s2 = t.ndim() > 2 ? t.stride(2) : 0;
    for (int64_t i = 0; i < d0; ++i)
      for (int64_t j = 0; j < d1; ++j)
        for (int64_t k = 0; k < d2; ++k) {
          float& v = p[i * s0 + j * s1 + k * s2];
          v = bf16_to_f32(f32_to_bf16(v));
        }
  }

  ChoiceLog* replay_ = nullptr;
  ChoiceStats stats_;
  std::set<const void*> f32_weights_;
  const void* lm_head_ = nullptr;
  std::map<const void*, Tensor> cache_;
};

// Registers the emulation as the CPU backend for its lifetime.
class ScopedBf16Cpu {
 public:
  explicit ScopedBf16Cpu(Bf16CpuBackend& b) { register_backend(DeviceType::CPU, &b); }
  ~ScopedBf16Cpu() { register_backend(DeviceType::CPU, &cpu::cpu_backend()); }
};

}  // namespace tandem::test
