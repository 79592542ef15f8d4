// A backend that hands every op to another one: the base for wrappers that watch a forward
// without changing it (recording the choices an op made, counting what a step reads). A wrapper
// overrides only the ops it watches; everything else, the fused ops and the side-branch hooks
// included, reaches the wrapped backend unchanged.
#pragma once

#include "ops/backend.h"

namespace tandem {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(Backend& inner) : b_(inner) {}

  void embedding(const Tensor& i, const Tensor& t, int64_t v0, bool shard, Tensor& o) override {
    b_.embedding(i, t, v0, shard, o);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float e, Tensor& o) override {
    b_.rms_norm(x, w, e, o);
  }
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float e, Tensor& o) override {
    b_.layer_norm(x, w, b, e, o);
  }
  void rope(Tensor& x, const Tensor& p, const Tensor& f, const RopeParams& r) override {
    b_.rope(x, p, f, r);
  }
  void linear(const Tensor& x, const Weight& w, Tensor& o) override { b_.linear(x, w, o); }
  void head_matmul(const Tensor& x, const Tensor& w, Tensor& o) override {
    b_.head_matmul(x, w, o);
  }
  void silu_mul(const Tensor& x, Tensor& o) override { b_.silu_mul(x, o); }
  void add(const Tensor& a, const Tensor& b, Tensor& o) override { b_.add(a, b, o); }
  void add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float e, Tensor& o) override {
    b_.add_rms_norm(h, b, w, e, o);
  }
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& o) override {
    b_.concat_cols(a, b, o);
  }
  void gather_rows(const Tensor& s, const Tensor& r, Tensor& o) override {
    b_.gather_rows(s, r, o);
  }
  void copy(const Tensor& s, Tensor& d) override { b_.copy(s, d); }
  void kv_store(const Tensor& r, const Tensor& s, Tensor& p) override { b_.kv_store(r, s, p); }
  void mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& pos, const Tensor& f,
                    const RopeParams& p, const Tensor& s, Tensor& pool) override {
    b_.mla_kv_store(x, w, eps, pos, f, p, s, pool);
  }
  void kv_gather(const Tensor& p, const AttentionMeta& m, int64_t n, Tensor& o) override {
    b_.kv_gather(p, m, n, o);
  }
  void mla_decode(const Tensor& q, const Tensor& p, const AttentionMeta& m, const Tensor& k,
                  float s, Tensor& o) override {
    b_.mla_decode(q, p, m, k, s, o);
  }
  void mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& pe, const AttentionMeta& m,
                   const Tensor& k, float s, Tensor& o) override {
    b_.mla_prefill(q, kv, pe, m, k, s, o);
  }
  void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& p, const AttentionMeta& m,
                    Tensor& o) override {
    b_.indexer_topk(q, w, p, m, o);
  }
  void moe_route(const Tensor& l, const Tensor& bias, const RouteParams& p, Tensor& i,
                 Tensor& w) override {
    b_.moe_route(l, bias, p, i, w);
  }
  void moe_experts(const Tensor& x, const Weight& gu, const Weight& d, const Tensor& i,
                   const Tensor& w, Tensor& o) override {
    b_.moe_experts(x, gu, d, i, w, o);
  }
  void argmax(const Tensor& l, Tensor& o) override { b_.argmax(l, o); }
  void mask_logits(Tensor& l, const Tensor& a) override { b_.mask_logits(l, a); }
  void sample(const Tensor& l, const Tensor& t, const Tensor& k, const Tensor& p, const Tensor& u,
              Tensor& o) override {
    b_.sample(l, t, k, p, u, o);
  }
  void begin_side() override { b_.begin_side(); }
  void end_side() override { b_.end_side(); }
  void join_side() override { b_.join_side(); }
  void set_deterministic(bool on) override { b_.set_deterministic(on); }
  void fill_random(Tensor& t, uint64_t s, float sc) override { b_.fill_random(t, s, sc); }
  std::unique_ptr<Workspace> make_workspace(Device d, size_t n) override {
    return b_.make_workspace(d, n);
  }
  std::unique_ptr<GraphRunner> make_graph_runner(Workspace& ws) override {
    return b_.make_graph_runner(ws);
  }

 protected:
  Backend& inner() { return b_; }

 private:
  Backend& b_;
};

}  // namespace tandem
