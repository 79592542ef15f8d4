#include "ops/ops.h"

#include <string>

#include "core/error.h"
#include "ops/kv_fp8.h"

namespace tandem::ops {

namespace {

// Checks t against expected dims (-1 = any) and names the dims in the message,
// e.g. "rms_norm: x must be [T, D] = [?, 64], got f32[3, 32] cpu".
void expect(const char* op, const char* what, const Tensor& t, const char* names,
            std::initializer_list<int64_t> dims) {
  TD_CHECK(t.defined(), "{}: {} is missing", op, what);
  bool ok = t.ndim() == static_cast<int>(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (ok && d >= 0 && t.size(i) != d) ok = false;
    ++i;
  }
  if (!ok) {
    std::string want = "[";
    i = 0;
    for (int64_t d : dims)
      want += (i++ ? ", " : "") + (d < 0 ? std::string("?") : std::to_string(d));
    fail("{}: {} must be {} = {}], got {}", op, what, names, want, t.str());
  }
}

void expect_dtype(const char* op, const char* what, const Tensor& t, DType dt) {
  if (t.dtype() != dt) fail("{}: {} must be {}, got {}", op, what, dtype_name(dt), t.str());
}

void expect_same_device(const char* op, const Tensor& a, const Tensor& b) {
  if (!(a.device() == b.device()))
    fail("{}: inputs on different devices ({} and {})", op, a.device().str(), b.device().str());
}

void expect_rows_unit_stride(const char* op, const char* what, const Tensor& t) {
  if (t.stride(-1) != 1)
    fail("{}: {} must have unit stride in its last dim, got {}", op, what, t.str());
}

void check_meta(const char* op, const AttentionMeta& m, int64_t T) {
  expect(op, "meta.token_seq", m.token_seq, "[T]", {T});
  expect(op, "meta.token_pos", m.token_pos, "[T]", {T});
  expect(op, "meta.page_table", m.page_table, "[B, max_pages]", {m.num_seqs(), -1});
  expect_dtype(op, "meta.token_pos", m.token_pos, DType::I32);
  expect_dtype(op, "meta.page_table", m.page_table, DType::I32);
  TD_CHECK(m.page_size > 0, "{}: meta.page_size must be positive", op);
}

}  // namespace

Tensor embedding(Workspace& ws, const Tensor& ids, const Tensor& table, int64_t vocab_start,
                 bool shard) {
  expect("embedding", "ids", ids, "[T]", {-1});
  expect_dtype("embedding", "ids", ids, DType::I32);
  expect("embedding", "table", table, "[V, D]", {-1, -1});
  expect_same_device("embedding", ids, table);
  TD_CHECK(vocab_start >= 0 && (shard || vocab_start == 0),
           "embedding: vocab_start {} needs a sharded table", vocab_start);
  Tensor out = ws.alloc({ids.size(0), table.size(1)}, table.dtype());
  backend_for(table.device()).embedding(ids, table, vocab_start, shard, out);
  return out;
}

Tensor rms_norm(Workspace& ws, const Tensor& x, const Tensor& w, float eps) {
  Tensor out = ws.alloc(x.shape(), x.dtype());
  rms_norm(x, w, eps, out);
  return out;
}

void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  expect("rms_norm", "x", x, "[T, D]", {-1, -1});
  expect("rms_norm", "w", w, "[D]", {x.size(1)});
  expect("rms_norm", "out", out, "[T, D]", {x.size(0), x.size(1)});
  expect_rows_unit_stride("rms_norm", "x", x);
  expect_rows_unit_stride("rms_norm", "out", out);
  TD_CHECK(out.dtype() == x.dtype(), "rms_norm: out {} must have x's dtype {}", out.str(), x.str());
  expect_same_device("rms_norm", x, out);
  backend_for(x.device()).rms_norm(x, w, eps, out);
}

Tensor layer_norm(Workspace& ws, const Tensor& x, const Tensor& w, const Tensor& b, float eps) {
  expect("layer_norm", "x", x, "[T, D]", {-1, -1});
  expect("layer_norm", "w", w, "[D]", {x.size(1)});
  expect("layer_norm", "b", b, "[D]", {x.size(1)});
  expect_rows_unit_stride("layer_norm", "x", x);
  Tensor out = ws.alloc(x.shape(), x.dtype());
  backend_for(x.device()).layer_norm(x, w, b, eps, out);
  return out;
}

void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, const RopeParams& p) {
  expect("rope", "x", x, "[T, H, d]", {-1, -1, -1});
  expect("rope", "positions", positions, "[T]", {x.size(0)});
  expect("rope", "inv_freq", inv_freq, "[d/2]", {x.size(2) / 2});
  expect_dtype("rope", "positions", positions, DType::I32);
  expect_dtype("rope", "inv_freq", inv_freq, DType::F32);
  expect_rows_unit_stride("rope", "x", x);
  TD_CHECK(x.size(2) % 2 == 0, "rope: rotary dim must be even, got {}", x.size(2));
  backend_for(x.device()).rope(x, positions, inv_freq, p);
}

Tensor linear(Workspace& ws, const Tensor& x, const Weight& w, std::optional<DType> out_dtype) {
  expect("linear", "x", x, "[T, K]", {-1, w.in_features()});
  expect_rows_unit_stride("linear", "x", x);
  expect_same_device("linear", x, w.w);
  Tensor out = ws.alloc({x.size(0), w.out_features()}, out_dtype.value_or(x.dtype()));
  backend_for(x.device()).linear(x, w, out);
  return out;
}

Tensor head_matmul(Workspace& ws, const Tensor& x, const Tensor& w) {
  Tensor out = ws.alloc({x.size(0), x.size(1), w.size(1)}, x.dtype());
  head_matmul_into(x, w, out);
  return out;
}

void head_matmul_into(const Tensor& x, const Tensor& w, Tensor& out) {
  expect("head_matmul", "x", x, "[T, H, K]", {-1, -1, -1});
  expect("head_matmul", "w", w, "[H, N, K]", {x.size(1), -1, x.size(2)});
  expect("head_matmul", "out", out, "[T, H, N]", {x.size(0), x.size(1), w.size(1)});
  expect_rows_unit_stride("head_matmul", "x", x);
  expect_rows_unit_stride("head_matmul", "out", out);
  expect_same_device("head_matmul", x, out);
  TD_CHECK(out.dtype() == x.dtype(), "head_matmul: out {} must have x's dtype {}", out.str(),
           x.str());
  backend_for(x.device()).head_matmul(x, w, out);
}

Tensor silu_mul(Workspace& ws, const Tensor& x) {
  expect("silu_mul", "x", x, "[T, 2I]", {-1, -1});
  TD_CHECK(x.size(1) % 2 == 0, "silu_mul: x width {} is odd", x.size(1));
  Tensor out = ws.alloc({x.size(0), x.size(1) / 2}, x.dtype());
  backend_for(x.device()).silu_mul(x, out);
  return out;
}

void add_inplace(Tensor& a, const Tensor& b) {
  TD_CHECK(a.shape() == b.shape(), "add: shapes differ: {} and {}", a.str(), b.str());
  expect_same_device("add", a, b);
  backend_for(a.device()).add(a, b, a);
}

void add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float eps, Tensor& out) {
  expect("add_rms_norm", "h", h, "[T, D]", {-1, -1});
  expect("add_rms_norm", "b", b, "[T, D]", {h.size(0), h.size(1)});
  expect("add_rms_norm", "w", w, "[D]", {h.size(1)});
  expect("add_rms_norm", "out", out, "[T, D]", {h.size(0), h.size(1)});
  TD_CHECK(h.is_contiguous() && b.is_contiguous(),
           "add_rms_norm: h and b must be contiguous, got {} and {}", h.str(), b.str());
  expect_rows_unit_stride("add_rms_norm", "out", out);
  expect_same_device("add_rms_norm", h, b);
  TD_CHECK(out.dtype() == h.dtype() && b.dtype() == h.dtype(),
           "add_rms_norm: h, b and out must share a dtype, got {}, {}, {}", h.str(), b.str(),
           out.str());
  backend_for(h.device()).add_rms_norm(h, b, w, eps, out);
}

Tensor add_rms_norm(Workspace& ws, Tensor& h, const Tensor& b, const Tensor& w, float eps) {
  Tensor out = ws.alloc(h.shape(), h.dtype());
  add_rms_norm(h, b, w, eps, out);
  return out;
}

Tensor concat_cols(Workspace& ws, const Tensor& a, const Tensor& b) {
  expect("concat_cols", "a", a, "[T, D1]", {-1, -1});
  expect("concat_cols", "b", b, "[T, D2]", {a.size(0), -1});
  Tensor out = ws.alloc({a.size(0), a.size(1) + b.size(1)}, a.dtype());
  backend_for(a.device()).concat_cols(a, b, out);
  return out;
}

Tensor gather_rows(Workspace& ws, const Tensor& src, const Tensor& rows) {
  expect("gather_rows", "src", src, "[N, D]", {-1, -1});
  expect("gather_rows", "rows", rows, "[M]", {-1});
  expect_dtype("gather_rows", "rows", rows, DType::I32);
  Tensor out = ws.alloc({rows.size(0), src.size(1)}, src.dtype());
  backend_for(src.device()).gather_rows(src, rows, out);
  return out;
}

void copy(const Tensor& src, Tensor& dst) {
  TD_CHECK(src.defined() && dst.defined(), "copy: src and dst must be defined");
  TD_CHECK(src.shape() == dst.shape(), "copy: shapes differ: src {}, dst {}", src.str(), dst.str());
  if (src.dtype() != dst.dtype()) fail("copy: dtypes differ: src {}, dst {}", src.str(), dst.str());
  expect_same_device("copy", src, dst);
  const auto rows = [](const Tensor& t) {  // 2-D, unit last stride, rows at any stride
    return t.ndim() == 2 && t.stride(1) == 1 && t.stride(0) >= t.size(1);
  };
  TD_CHECK((src.is_contiguous() && dst.is_contiguous()) || (rows(src) && rows(dst)),
           "copy: src and dst must be contiguous, or both [R, C] with unit last stride, got src "
           "{}, dst {}",
           src.str(), dst.str());
  if (src.numel() == 0) return;
  backend_for(src.device()).copy(src, dst);
}

void kv_store(const Tensor& rows, const AttentionMeta& meta, Tensor& pool) {
  expect("kv_store", "pool", pool, "[S, R]", {-1, -1});
  if (pool.dtype() == DType::F8_E4M3)
    expect("kv_store", "rows", rows, "[T, R] (the FP8 key pool holds R + 4 bytes a row)",
           {meta.num_tokens(), pool.size(1) - 4});
  else
    expect("kv_store", "rows", rows, "[T, R]", {meta.num_tokens(), pool.size(1)});
  expect("kv_store", "slot_mapping", meta.slot_mapping, "[T]", {meta.num_tokens()});
  expect_rows_unit_stride("kv_store", "rows", rows);
  backend_for(pool.device()).kv_store(rows, meta.slot_mapping, pool);
}

void mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& inv_freq,
                  const RopeParams& p, const AttentionMeta& meta, Tensor& pool) {
  expect("mla_kv_store", "w", w, "[n]", {-1});
  expect("mla_kv_store", "x", x, "[T, n + dr]", {meta.num_tokens(), -1});
  const int64_t dr = x.size(1) - w.size(0);
  if (pool.dtype() == DType::F8_E4M3)
    expect("mla_kv_store", "pool", pool, "[S, latent_row_bytes(n, dr)] (FP8)",
           {-1, kv_fp8::latent_row_bytes(w.size(0), dr)});
  else
    expect("mla_kv_store", "pool", pool, "[S, n + dr]", {-1, x.size(1)});
  TD_CHECK(dr > 0 && dr % 2 == 0,
           "mla_kv_store: the rope part of the {}-wide row after {} normed "
           "dims must be even and non-empty",
           x.size(1), w.size(0));
  expect("mla_kv_store", "inv_freq", inv_freq, "[dr / 2]", {dr / 2});
  expect("mla_kv_store", "positions", meta.token_pos, "[T]", {meta.num_tokens()});
  expect("mla_kv_store", "slot_mapping", meta.slot_mapping, "[T]", {meta.num_tokens()});
  expect_rows_unit_stride("mla_kv_store", "x", x);
  expect_same_device("mla_kv_store", x, pool);
  backend_for(pool.device())
      .mla_kv_store(x, w, eps, meta.token_pos, inv_freq, p, meta.slot_mapping, pool);
}

Tensor kv_gather(Workspace& ws, const Tensor& pool, const AttentionMeta& meta, int64_t total) {
  expect("kv_gather", "pool", pool, "[S, R]", {-1, -1});
  TD_CHECK(pool.dtype() != DType::F8_E4M3, "kv_gather: an FP8 pool needs kv_gather_fp8");
  Tensor out = ws.alloc({total, pool.size(1)}, pool.dtype());
  backend_for(pool.device()).kv_gather(pool, meta, 0, out);
  return out;
}

Tensor kv_gather_fp8(Workspace& ws, const Tensor& pool, const AttentionMeta& meta, int64_t total,
                     int64_t n, int64_t dr, DType dtype) {
  expect_dtype("kv_gather_fp8", "pool", pool, DType::F8_E4M3);
  expect("kv_gather_fp8", "pool", pool, "[S, latent_row_bytes(n, dr)]",
         {-1, kv_fp8::latent_row_bytes(n, dr)});
  Tensor out = ws.alloc({total, n + dr}, dtype);
  backend_for(pool.device()).kv_gather(pool, meta, n, out);
  return out;
}

Tensor mla_decode(Workspace& ws, const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                  const Tensor& topk, float scale, int64_t kv_lora_rank) {
  expect("mla_decode", "q", q, "[T, H, L]", {-1, -1, -1});
  TD_CHECK(kv_lora_rank > 0 && kv_lora_rank < q.size(2), "mla_decode: kv_lora_rank {} vs L {}",
           kv_lora_rank, q.size(2));
  if (pool.dtype() == DType::F8_E4M3)
    expect("mla_decode", "pool", pool, "[S, latent_row_bytes(Lc, L - Lc)] (FP8)",
           {-1, kv_fp8::latent_row_bytes(kv_lora_rank, q.size(2) - kv_lora_rank)});
  else
    expect("mla_decode", "pool", pool, "[S, L]", {-1, q.size(2)});
  check_meta("mla_decode", meta, q.size(0));
  if (topk.defined()) expect("mla_decode", "topk", topk, "[T, K]", {q.size(0), -1});
  Tensor out = ws.alloc({q.size(0), q.size(1), kv_lora_rank}, q.dtype());
  backend_for(q.device()).mla_decode(q, pool, meta, topk, scale, out);
  return out;
}

Tensor mla_prefill(Workspace& ws, const Tensor& q, const Tensor& kv, const Tensor& k_pe,
                   const AttentionMeta& meta, const Tensor& topk, float scale, int64_t v_head_dim) {
  expect("mla_prefill", "q", q, "[T, H, dn+dr]", {-1, -1, -1});
  expect("mla_prefill", "kv", kv, "[sumL, H, dn+dv]", {-1, q.size(1), -1});
  const int64_t dn = kv.size(2) - v_head_dim;
  expect("mla_prefill", "k_pe", k_pe, "[sumL, dr]", {kv.size(0), q.size(2) - dn});
  check_meta("mla_prefill", meta, q.size(0));
  if (topk.defined()) expect("mla_prefill", "topk", topk, "[T, K]", {q.size(0), -1});
  Tensor out = ws.alloc({q.size(0), q.size(1), v_head_dim}, q.dtype());
  backend_for(q.device()).mla_prefill(q, kv, k_pe, meta, topk, scale, out);
  return out;
}

Tensor indexer_topk(Workspace& ws, const Tensor& q, const Tensor& w, const Tensor& pool,
                    const AttentionMeta& meta, int64_t topk) {
  expect("indexer_topk", "q", q, "[T, Hi, Di]", {-1, -1, -1});
  expect("indexer_topk", "w", w, "[T, Hi]", {q.size(0), q.size(1)});
  if (pool.dtype() == DType::F8_E4M3)
    expect("indexer_topk", "pool", pool, "[S, Di + 4] (FP8)", {-1, q.size(2) + 4});
  else
    expect("indexer_topk", "pool", pool, "[S, Di]", {-1, q.size(2)});
  expect_dtype("indexer_topk", "w", w, DType::F32);
  check_meta("indexer_topk", meta, q.size(0));
  TD_CHECK(topk > 0, "indexer_topk: topk must be positive");
  Tensor out = ws.alloc({q.size(0), topk}, DType::I32);
  backend_for(q.device()).indexer_topk(q, w, pool, meta, out);
  return out;
}

Routing moe_route(Workspace& ws, const Tensor& logits, const Tensor& bias, const RouteParams& p) {
  expect("moe_route", "logits", logits, "[T, E]", {-1, -1});
  expect_dtype("moe_route", "logits", logits, DType::F32);
  const int64_t E = logits.size(1);
  if (bias.defined()) expect("moe_route", "bias", bias, "[E]", {E});
  TD_CHECK(p.top_k > 0 && p.top_k <= E, "moe_route: top_k {} for {} experts", p.top_k, E);
  TD_CHECK(p.n_group > 0 && E % p.n_group == 0, "moe_route: n_group {} must divide E {}", p.n_group,
           E);
  TD_CHECK(p.local_count < 0 || (p.local_first >= 0 && p.local_first + p.local_count <= E),
           "moe_route: local experts [{}, {}) outside [0, {})", p.local_first,
           p.local_first + p.local_count, E);
  Routing r{ws.alloc({logits.size(0), p.top_k}, DType::I32),
            ws.alloc({logits.size(0), p.top_k}, DType::F32)};
  backend_for(logits.device()).moe_route(logits, bias, p, r.idx, r.weights);
  return r;
}

Tensor moe_experts(Workspace& ws, const Tensor& x, const Weight& gate_up, const Weight& down,
                   const Routing& r) {
  expect("moe_experts", "x", x, "[T, D]", {-1, -1});
  TD_CHECK(gate_up.w.ndim() == 3 && down.w.ndim() == 3,
           "moe_experts: expert weights must be [E, N, K], got gate_up {} and down {}",
           gate_up.w.str(), down.w.str());
  const auto dims = [](const Weight& w) {
    return fmt::format("[{}, {}, {}]", w.experts(), w.out_features(), w.in_features());
  };
  TD_CHECK(gate_up.in_features() == x.size(1) && gate_up.out_features() % 2 == 0,
           "moe_experts: gate_up must be [E, 2I, D={}], got {}", x.size(1), dims(gate_up));
  TD_CHECK(down.experts() == gate_up.experts() && down.out_features() == x.size(1) &&
               down.in_features() == gate_up.out_features() / 2,
           "moe_experts: down must be [E={}, D={}, I={}], got {}", gate_up.experts(), x.size(1),
           gate_up.out_features() / 2, dims(down));
  expect("moe_experts", "idx", r.idx, "[T, k]", {x.size(0), -1});
  expect("moe_experts", "weights", r.weights, "[T, k]", {x.size(0), r.idx.size(1)});
  Tensor out = ws.alloc(x.shape(), x.dtype());
  backend_for(x.device()).moe_experts(x, gate_up, down, r.idx, r.weights, out);
  return out;
}

Tensor argmax(Workspace& ws, const Tensor& logits) {
  expect("argmax", "logits", logits, "[T, V]", {-1, -1});
  Tensor out = ws.alloc({logits.size(0)}, DType::I32);
  backend_for(logits.device()).argmax(logits, out);
  return out;
}

void mask_logits(Workspace& ws, Tensor& logits, const Tensor& allowed) {
  expect("mask_logits", "logits", logits, "[T, V]", {-1, -1});
  expect_dtype("mask_logits", "logits", logits, DType::F32);
  const int64_t T = logits.size(0), W = (logits.size(1) + 31) / 32;
  expect("mask_logits", "allowed", allowed, "[T, W]", {T, W});
  expect_dtype("mask_logits", "allowed", allowed, DType::I32);
  TD_CHECK(allowed.device() == logits.device(), "mask_logits: allowed is on {}, logits on {}",
           allowed.device().str(), logits.device().str());
  backend_for(logits.device()).mask_logits(logits, allowed.contiguous());
}

Tensor sample(Workspace& ws, const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
              const Tensor& top_p, const Tensor& u) {
  expect("sample", "logits", logits, "[T, V]", {-1, -1});
  expect_dtype("sample", "logits", logits, DType::F32);
  const int64_t T = logits.size(0);
  expect("sample", "temperature", temperature, "[T]", {T});
  expect("sample", "top_k", top_k, "[T]", {T});
  expect("sample", "top_p", top_p, "[T]", {T});
  expect("sample", "u", u, "[T]", {T});
  expect_dtype("sample", "top_k", top_k, DType::I32);
  expect_dtype("sample", "u", u, DType::F32);
  Tensor out = ws.alloc({T}, DType::I32);
  backend_for(logits.device()).sample(logits, temperature, top_k, top_p, u, out);
  return out;
}

void fill_random(Tensor& t, uint64_t seed, float scale) {
  TD_CHECK(t.is_contiguous(), "fill_random: needs a contiguous tensor, got {}", t.str());
  backend_for(t.device()).fill_random(t, seed, scale);
}

}  // namespace tandem::ops

namespace tandem {

namespace {
class EagerRunner final : public GraphRunner {
 public:
  explicit EagerRunner(Workspace& ws) : ws_(ws) {}
  void run(int64_t, const std::function<void(Workspace&)>& fn) override { fn(ws_); }

 private:
  Workspace& ws_;
};
}  // namespace

std::unique_ptr<GraphRunner> make_graph_runner(Workspace& ws, bool disable_graphs) {
  if (!disable_graphs)
    if (auto r = backend_for(ws.device()).make_graph_runner(ws)) return r;
  return std::make_unique<EagerRunner>(ws);
}

}  // namespace tandem

namespace tandem::ops {

std::unique_ptr<Workspace> make_workspace(Device d, size_t bytes) {
  return backend_for(d).make_workspace(d, bytes);
}

SideBranch::SideBranch(Device d) : device_(d) {
  backend_for(d).begin_side();
}

SideBranch::~SideBranch() {
  backend_for(device_).end_side();
}

void join_side(Device d) {
  backend_for(d).join_side();
}

}  // namespace tandem::ops
