// The op interface every backend implements. Inputs are validated once in ops.cpp (shapes with
// named dimensions, dtypes, devices) before a backend sees them, so backends only compute.
// Shapes use T = tokens, D = hidden, H = heads, V = vocab, E = experts, S = slots.
#pragma once

#include <cstdint>
#include <memory>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention_meta.h"
#include "ops/graph_runner.h"
#include "ops/weight.h"
#include "ops/workspace.h"

namespace tandem {

struct RouteParams {
  int64_t top_k = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  bool normalize = true;
  float scaling = 1.0f;
  // Expert parallelism: this rank holds experts [local_first, local_first + local_count); the
  // routing names them by local index and every other choice as -1 (skipped by moe_experts, its
  // weight kept). local_count < 0: all experts are local (ids unchanged).
  int64_t local_first = 0;
  int64_t local_count = -1;
};

struct RopeParams {
  bool interleaved = true;        // pairs (2j, 2j+1); false: pairs (j, j + d/2) (NeoX)
  float attention_factor = 1.0f;  // scales cos and sin (YaRN)
};

class Backend {
 public:
  virtual ~Backend() = default;

  // out[t] = table[ids[t] - vocab_start]. ids: [T] i32, table: [V, D], out: [T, D]. shard: the
  // table holds rows [vocab_start, vocab_start + V) of a vocabulary split across ranks, and ids
  // outside them give zero rows (the all-reduce over ranks fills them in); otherwise an id
  // outside [0, V) is an error where the backend can see it.
  virtual void embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, bool shard,
                         Tensor& out) = 0;
  // out = w * x / sqrt(mean(x^2) + eps), rows of x may be strided. x, out: [T, D], w: [D]
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // LayerNorm with bias. x, out: [T, D]; w, b: [D]
  virtual void layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                          Tensor& out) = 0;
  // In place on x: [T, H, d] (strided views allowed, last stride 1). positions: [T] i32,
  // inv_freq: [d/2] f32.
  virtual void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                    const RopeParams& p) = 0;
  // out = x . W^T. x: [T, K], out: [T, N]; out may be f32 while x is bf16 (router, logits)
  virtual void linear(const Tensor& x, const Weight& w, Tensor& out) = 0;
  // Per-head matmul: out[t, h, :] = W[h] . x[t, h, :]. x: [T, H, K], w: [H, N, K], out: [T, H, N]
  virtual void head_matmul(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // out = silu(x[:, :I]) * x[:, I:]. x: [T, 2I], out: [T, I]
  virtual void silu_mul(const Tensor& x, Tensor& out) = 0;
  // out = a + b (same shape; out may alias a).
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // h = h + b (rounded to h's dtype, exactly as add), then out = rms_norm(h, w): a residual add
  // and the next pre-norm in one pass over the row. h, b: [T, D] contiguous; out: [T, D]. The
  // default runs the two ops.
  virtual void add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float eps, Tensor& out) {
    add(h, b, h);
    rms_norm(h, w, eps, out);
  }
  // out[:, :D1] = a, out[:, D1:] = b. a: [T, D1], b: [T, D2], out: [T, D1 + D2]
  virtual void concat_cols(const Tensor& a, const Tensor& b, Tensor& out) = 0;
  // out[i] = src[rows[i]]. src: [N, D], rows: [M] i32, out: [M, D]
  virtual void gather_rows(const Tensor& src, const Tensor& rows, Tensor& out) = 0;
  // dst = src, same shape and dtype, on this backend's device: both contiguous, or both [R, C]
  // with unit last stride and rows at any stride. The default is the device's synchronous copy
  // (a row at a time for strided rows); backends that capture graphs override it with a copy on
  // their stream (a synchronous copy cannot be captured).
  virtual void copy(const Tensor& src, Tensor& dst) {
    DeviceInterface& d = device_interface(src.device().type);
    if (src.is_contiguous() && dst.is_contiguous()) {
      d.copy(dst.raw(), dst.device(), src.raw(), src.device(), static_cast<size_t>(src.nbytes()));
      return;
    }
    const int64_t es = dtype_size(src.dtype());
    for (int64_t r = 0; r < src.size(0); ++r)
      d.copy(static_cast<char*>(dst.raw()) + r * dst.stride(0) * es, dst.device(),
             static_cast<const char*>(src.raw()) + r * src.stride(0) * es, src.device(),
             static_cast<size_t>(src.size(1) * es));
  }

  // The KV pools are in the compute dtype or, with an FP8 cache, F8_E4M3 byte rows
  // (ops/kv_fp8.h, docs/kv-cache.md): latent rows [S, kv_fp8::latent_row_bytes(n, dr)] and
  // indexer-key rows [S, kv_fp8::index_row_bytes(Di)]. Ops that read them dequantize exactly.
  //
  // pool[slot_mapping[t]] = rows[t]. rows: [T, R] (strided ok), pool: [S, R]; or an FP8
  // indexer-key pool [S, R + 4]: the row rotated (kv_fp8::hadamard) and quantized.
  virtual void kv_store(const Tensor& rows, const Tensor& slot_mapping, Tensor& pool) = 0;
  // The cached MLA latent row of each token in one pass: pool[slot_mapping[t]] =
  // [rms_norm(x[t, :n], w) | rope(x[t, n:])], n = w's width, the rest one rope head. x is not
  // modified. x: [T, n + dr] (strided rows), w: [n] f32, positions: [T] i32, inv_freq: [dr / 2]
  // f32, pool: [S, n + dr] (or an FP8 latent pool: the row quantized). The default runs
  // rms_norm, concat_cols, rope and kv_store on a temporary row (it allocates: backends that
  // capture graphs override it; it does not handle FP8 pools).
  virtual void mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                            const Tensor& inv_freq, const RopeParams& p, const Tensor& slot_mapping,
                            Tensor& pool) {
    TD_CHECK(pool.dtype() != DType::F8_E4M3,
             "mla_kv_store: this backend does not write FP8 latent rows (override it)");
    const int64_t T = x.size(0), n = w.size(0), dr = x.size(1) - n;
    Tensor c = Tensor::empty({T, n}, x.dtype(), x.device());
    rms_norm(x.narrow(1, 0, n), w, eps, c);
    Tensor row = Tensor::empty({T, n + dr}, x.dtype(), x.device());
    concat_cols(c, x.narrow(1, n, dr), row);
    Tensor pe = row.narrow(1, n, dr).unsqueeze(1);  // [T, 1, dr]
    rope(pe, positions, inv_freq, p);
    kv_store(row, slot_mapping, pool);
  }
  // Gathers each sequence's cached rows [0, seq_len) in order: out: [sum(seq_lens), R]. From an
  // FP8 latent pool the rows come out dequantized into out's dtype: out: [sum(seq_lens), n + dr]
  // with n = fp8_nope (kv_lora_rank; the width is ambiguous from the byte count alone).
  virtual void kv_gather(const Tensor& pool, const AttentionMeta& meta, int64_t fp8_nope,
                         Tensor& out) = 0;

  // Absorbed (MQA) MLA over the paged latent cache. q: [T, H, L] with L = kv_lora_rank + rope
  // dim; pool: [S, L] or FP8 [S, latent_row_bytes(kv_lora_rank, L - kv_lora_rank)]; topk: [T, K]
  // i32 positions (-1 = empty) or undefined for dense causal. out: [T, H, kv_lora_rank] = softmax(q
  // . K^T * scale) . K[:, :kv_lora_rank]
  virtual void mla_decode(const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                          const Tensor& topk, float scale, Tensor& out) = 0;
  // Naive (MHA) MLA for prefill. q: [T, H, dn + dr]; kv: [sumL, H, dn + dv] (expanded from the
  // gathered latents, in kv_gather order); k_pe: [sumL, dr]; out: [T, H, dv]
  virtual void mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& k_pe,
                           const AttentionMeta& meta, const Tensor& topk, float scale,
                           Tensor& out) = 0;
  // DSA lightning indexer: score(t, j) = sum_h w[t, h] * relu(q[t, h] . k[j]) over the cached
  // positions j <= pos(t); out: [T, K] i32 the top-K positions ascending, -1 padded.
  // q: [T, Hi, Di]; w: [T, Hi] f32 (scales folded in); pool: [S, Di].
  // With an FP8 pool [S, Di + 4] (keys k8 with scale k_s) each query head is rotated by the
  // same Hadamard as the keys and quantized with its own scale (q8, q_s), and
  // score(t, j) = k_s * sum_h (w[t, h] * q_s[h]) * relu(q8[h] . k8) (the reference fp8_index).
  // Ties between equal scores go to the earlier position (docs/kv-cache.md).
  virtual void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool,
                            const AttentionMeta& meta, Tensor& out) = 0;

  // Sigmoid routing with correction bias (selection only) and group-limited top-k.
  // logits: [T, E] f32; bias: [E] f32 or undefined; idx: [T, k] i32; weights: [T, k] f32
  virtual void moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p,
                         Tensor& idx, Tensor& weights) = 0;
  // out[t] = sum_k weights[t, k] * down_e(silu(gate_e x) * up_e x), e = idx[t, k].
  // x: [T, D]; gate_up: [E, 2I, D]; down: [E, D, I] (dense or quantized, docs/quantization.md);
  // out: [T, D]
  virtual void moe_experts(const Tensor& x, const Weight& gate_up, const Weight& down,
                           const Tensor& idx, const Tensor& weights, Tensor& out) = 0;

  // out[t] = argmax_v logits[t, v] (lowest index on ties). logits: [T, V] f32; out: [T] i32
  virtual void argmax(const Tensor& logits, Tensor& out) = 0;

  // Constrained decoding: logits[t, v] = -inf wherever bit v % 32 of allowed[t, v / 32] is clear,
  // in place; rows whose words are all ones are untouched. logits: [T, V] f32;
  // allowed: [T, (V + 31) / 32] i32 (bit patterns).
  virtual void mask_logits(Tensor& logits, const Tensor& allowed) = 0;

  // Sampling, one row per token: softmax(logits / temperature) restricted to the top_k most
  // likely tokens (top_k <= 0: all) and then to the smallest most-likely set whose mass reaches
  // top_p (ties broken toward the lower index), renormalised; the token is the first, in
  // vocabulary order, whose cumulative kept probability exceeds u * (kept mass). Rows with
  // temperature <= 0 or top_k == 1 take the argmax (lowest index on ties).
  // logits: [T, V] f32; temperature, top_p, u: [T] f32; top_k: [T] i32; out: [T] i32
  virtual void sample(const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
                      const Tensor& top_p, const Tensor& u, Tensor& out) = 0;

  // A side branch within one forward. The ops issued between begin_side() and end_side() run
  // after everything issued before begin_side() and may overlap the main line's ops issued after
  // end_side(); join_side() makes the main line wait for the branch. One branch at a time; what
  // the branch reads must not be written by the main line before the join. Backends that run
  // ops in order (the CPU) need nothing; the CUDA backend puts the branch on a second stream, so
  // a latency-bound chain (the indexer, the routing) hides behind a bandwidth-bound one.
  virtual void begin_side() {}
  virtual void end_side() {}
  virtual void join_side() {}

  // Batch-invariant mode (SGLang's --enable-deterministic-inference): every op reduces a row in
  // one fixed order whatever else is in the batch and however many rows there are, at some
  // cost in speed. The CPU backend always is; the CUDA backend is in this mode only.
  virtual void set_deterministic(bool on) {}

  // Deterministic random values, mean 0 and standard deviation `scale` (dummy weights).
  virtual void fill_random(Tensor& t, uint64_t seed, float scale) = 0;
  // The workspace a forward should allocate from: plain allocations, or an arena whose
  // addresses repeat from step to step (graph capture, no allocator calls in the hot path).
  virtual std::unique_ptr<Workspace> make_workspace(Device d, size_t bytes) {
    return std::make_unique<Workspace>(d);
  }
  // A graph runner over ws; nullptr: this backend runs forwards eagerly.
  virtual std::unique_ptr<GraphRunner> make_graph_runner(Workspace& ws) { return nullptr; }
};

// The backend for a device (CPU always; CUDA when built and initialised).
Backend& backend_for(Device d);
void register_backend(DeviceType t, Backend* b);

}  // namespace tandem
