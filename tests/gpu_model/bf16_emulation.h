// A CPU backend that rounds what the CUDA backend stores in bf16: the dense weights (as the
// loader places them on the GPU) and every bf16 op output; f32 stays f32 (norm weights, the
// router and indexer-head weights, router/LM-head logits, routing weights). Running the CPU
// model through it separates the cost of bf16 itself (CPU f32 vs this) from the GPU kernels'
// own error (GPU vs this): on tiny random checkpoints, whose routing and top-k selections sit on
// near-ties, bf16 alone moves the logits far more than any kernel does.
#pragma once

#include <map>
#include <set>

#include "backends/cpu/cpu_backend.h"
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

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out) override {
    cpu().embedding(ids, rounded(table), out);
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
    cpu().linear(x, f32w ? w : Weight{rounded(w.w), {}, WeightFormat::kDense}, out);
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
  void kv_gather(const Tensor& p, const AttentionMeta& m, Tensor& out) override {
    cpu().kv_gather(p, m, out);
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
  }
  void moe_route(const Tensor& l, const Tensor& b, const RouteParams& p, Tensor& i,
                 Tensor& w) override {
    cpu().moe_route(l, b, p, i, w);
  }
  void moe_experts(const Tensor& x, const Tensor& gu, const Tensor& d, const Tensor& i,
                   const Tensor& w, Tensor& out) override {
    cpu().moe_experts(x, rounded(gu), rounded(d), i, w, out);
    round(out);
  }
  void argmax(const Tensor& l, Tensor& out) override { cpu().argmax(l, out); }
  void fill_random(Tensor& t, uint64_t seed, float scale) override {
    cpu().fill_random(t, seed, scale);
  }
  void sample(const Tensor& l, const Tensor& t, const Tensor& k, const Tensor& p, const Tensor& u,
              Tensor& o) override {
    cpu().sample(l, t, k, p, u, o);
  }

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
