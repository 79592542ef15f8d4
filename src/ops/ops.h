// The ops the model is written against. Each op checks its inputs with named dimensions, then
// dispatches to the backend of the inputs' device. Ops that return a tensor allocate it from
// the workspace. Shapes: T tokens, D hidden, H heads, V vocab, E experts, S cache slots.
#pragma once

#include <optional>

#include "ops/attention_meta.h"
#include "ops/backend.h"
#include "ops/weight.h"
#include "ops/workspace.h"

namespace tandem::ops {

// [T] ids, [V, D] table -> [T, D]
// ids: [T] i32, table: [V, D] -> [T, D]. A shard (vocab-parallel) holds rows [vocab_start,
// vocab_start + V) and gives zero rows for the other ids.
Tensor embedding(Workspace& ws, const Tensor& ids, const Tensor& table, int64_t vocab_start = 0,
                 bool shard = false);
// [T, D] -> [T, D]
Tensor rms_norm(Workspace& ws, const Tensor& x, const Tensor& w, float eps);
// The same into out: [T, D] (rows may be strided: a column range of a wider row).
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
// [T, D] -> [T, D], LayerNorm with bias
Tensor layer_norm(Workspace& ws, const Tensor& x, const Tensor& w, const Tensor& b, float eps);
// In place on x: [T, H, d]; positions: [T]; inv_freq: [d/2]
void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, const RopeParams& p);
// [T, K] . [N, K]^T -> [T, N], in x's dtype unless out_dtype is given (fp32 router and logits)
Tensor linear(Workspace& ws, const Tensor& x, const Weight& w, std::optional<DType> out_dtype = {});
// [T, H, K] with per-head [H, N, K] -> [T, H, N]
Tensor head_matmul(Workspace& ws, const Tensor& x, const Tensor& w);
// The same into out: [T, H, N] with unit last stride (e.g. the first N columns of wider rows)
void head_matmul_into(const Tensor& x, const Tensor& w, Tensor& out);
// [T, 2I] -> [T, I]
Tensor silu_mul(Workspace& ws, const Tensor& x);
// a += b
void add_inplace(Tensor& a, const Tensor& b);
// h += b, then out = rms_norm(h, w) (Backend::add_rms_norm). h, b, out: [T, D]; w: [D]
void add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float eps, Tensor& out);
// The same with out allocated from ws.
Tensor add_rms_norm(Workspace& ws, Tensor& h, const Tensor& b, const Tensor& w, float eps);
// [T, D1], [T, D2] -> [T, D1 + D2]
Tensor concat_cols(Workspace& ws, const Tensor& a, const Tensor& b);
// [N, D], rows [M] -> [M, D]
Tensor gather_rows(Workspace& ws, const Tensor& src, const Tensor& rows);
// dst = src: same shape and dtype, on one device; both contiguous, or both [R, C] with unit last
// stride (rows at any stride). Asynchronous on the backend's stream (graph-capturable), unlike
// Tensor::copy_from.
void copy(const Tensor& src, Tensor& dst);

// rows: [T, R] written to pool: [S, R] at meta.slot_mapping (or an FP8 indexer-key pool
// [S, R + 4]: rotated and quantized, Backend::kv_store)
void kv_store(const Tensor& rows, const AttentionMeta& meta, Tensor& pool);
// x: [T, n + dr] -> pool: [S, n + dr] at meta.slot_mapping: [rms_norm(x[:, :n], w) |
// rope(x[:, n:])], n = w: [n]; the cached MLA latent row (Backend::mla_kv_store). x unchanged.
// An F8_E4M3 pool [S, kv_fp8::latent_row_bytes(n, dr)] gets the quantized row.
void mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& inv_freq,
                  const RopeParams& p, const AttentionMeta& meta, Tensor& pool);
// pool: [S, R] -> [sum(seq_lens), R]; total = sum of seq_lens (host value)
Tensor kv_gather(Workspace& ws, const Tensor& pool, const AttentionMeta& meta, int64_t total);
// An FP8 latent pool [S, latent_row_bytes(n, dr)] -> [sum(seq_lens), n + dr] dequantized rows in
// dtype (the compute dtype)
Tensor kv_gather_fp8(Workspace& ws, const Tensor& pool, const AttentionMeta& meta, int64_t total,
                     int64_t n, int64_t dr, DType dtype);

// q: [T, H, L], pool: [S, L] (or FP8 [S, latent_row_bytes(Lc, L - Lc)]), topk: [T, K] or
// undefined -> [T, H, Lc]
Tensor mla_decode(Workspace& ws, const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                  const Tensor& topk, float scale, int64_t kv_lora_rank);
// q: [T, H, dn + dr], kv: [sumL, H, dn + dv], k_pe: [sumL, dr] -> [T, H, dv]
Tensor mla_prefill(Workspace& ws, const Tensor& q, const Tensor& kv, const Tensor& k_pe,
                   const AttentionMeta& meta, const Tensor& topk, float scale, int64_t v_head_dim);
// q: [T, Hi, Di], w: [T, Hi], pool: [S, Di] (or FP8 [S, Di + 4]) -> [T, topk] i32
Tensor indexer_topk(Workspace& ws, const Tensor& q, const Tensor& w, const Tensor& pool,
                    const AttentionMeta& meta, int64_t topk);

struct Routing {
  Tensor idx;      // [T, k] i32
  Tensor weights;  // [T, k] f32
};
// logits: [T, E] f32, bias: [E] f32 (may be undefined)
Routing moe_route(Workspace& ws, const Tensor& logits, const Tensor& bias, const RouteParams& p);
// x: [T, D], gate_up: [E, 2I, D], down: [E, D, I] (dense or quantized) -> [T, D]
Tensor moe_experts(Workspace& ws, const Tensor& x, const Weight& gate_up, const Weight& down,
                   const Routing& r);
// Dense expert weights as plain tensors.
inline Tensor moe_experts(Workspace& ws, const Tensor& x, const Tensor& gate_up, const Tensor& down,
                          const Routing& r) {
  return moe_experts(ws, x, Weight::from_dense(gate_up), Weight::from_dense(down), r);
}
// [T, V] -> [T] i32
Tensor argmax(Workspace& ws, const Tensor& logits);
// Constrained decoding, in place: logits[t, v] = -inf where bit v of row t of allowed is clear.
// logits: [T, V] f32; allowed: [T, (V + 31) / 32] i32 bitmask
void mask_logits(Workspace& ws, Tensor& logits, const Tensor& allowed);
// One sampled token per row (see Backend::sample). logits: [T, V] f32; params: [T] -> [T] i32
Tensor sample(Workspace& ws, const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
              const Tensor& top_p, const Tensor& u);
// The ops issued on device d during this object's lifetime form a side branch
// (Backend::begin_side); join_side(d) waits for it before its results are used.
class SideBranch {
 public:
  explicit SideBranch(Device d);
  ~SideBranch();
  SideBranch(const SideBranch&) = delete;
  SideBranch& operator=(const SideBranch&) = delete;

 private:
  Device device_;
};
void join_side(Device d);

// Fills a contiguous float tensor with N(0, scale^2) values from seed.
void fill_random(Tensor& t, uint64_t seed, float scale);
// The backend's workspace for forwards on device d (an arena of `bytes` on GPUs).
std::unique_ptr<Workspace> make_workspace(Device d, size_t bytes);

}  // namespace tandem::ops
