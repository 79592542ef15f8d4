// The CPU backend: every op in plain fp32 loops, multi-threaded over independent outputs.
// It is the oracle for the CUDA backend and runs tiny models in CI, so it stays simple.
// Each output element is computed by one fixed sequence of operations whatever the batch
// (no cross-token reductions, fixed-order dot products), which makes results bitwise
// independent of batch composition and thread count; speculative decoding relies on that.
#pragma once

#include "ops/backend.h"

namespace tandem::cpu {

class CpuBackend final : public Backend {
 public:
  void embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, bool shard,
                 Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                  Tensor& out) override;
  void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq,
            const RopeParams& p) override;
  void linear(const Tensor& x, const Weight& w, Tensor& out) override;
  void head_matmul(const Tensor& x, const Tensor& w, Tensor& out) override;
  void silu_mul(const Tensor& x, Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, Tensor& out) override;
  void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) override;
  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& out) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void kv_store(const Tensor& rows, const Tensor& slot_mapping, Tensor& pool) override;
  void mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                    const Tensor& inv_freq, const RopeParams& p, const Tensor& slot_mapping,
                    Tensor& pool) override;
  void kv_gather(const Tensor& pool, const AttentionMeta& meta, int64_t fp8_nope,
                 Tensor& out) override;
  void mla_decode(const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                  const Tensor& topk, float scale, Tensor& out) override;
  void mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& k_pe, const AttentionMeta& meta,
                   const Tensor& topk, float scale, Tensor& out) override;
  void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool, const AttentionMeta& meta,
                    Tensor& out) override;
  void moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p, Tensor& idx,
                 Tensor& weights) override;
  void moe_experts(const Tensor& x, const Weight& gate_up, const Weight& down, const Tensor& idx,
                   const Tensor& weights, Tensor& out) override;
  void argmax(const Tensor& logits, Tensor& out) override;
  void mask_logits(Tensor& logits, const Tensor& allowed) override;
  void sample(const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
              const Tensor& top_p, const Tensor& u, Tensor& out) override;
  void fill_random(Tensor& t, uint64_t seed, float scale) override;

 private:
  void linear_quantized(const Tensor& x, const Weight& w, Tensor& out);
  void moe_experts_quantized(const Tensor& x, const Weight& gate_up, const Weight& down,
                             const Tensor& idx, const Tensor& weights, Tensor& out);
};

CpuBackend& cpu_backend();

}  // namespace tandem::cpu
