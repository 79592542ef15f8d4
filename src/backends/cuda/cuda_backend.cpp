#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_gemm.h"
#include "core/error.h"
#include "core/log.h"

namespace tandem::cuda {

namespace {

using k::DT;

DT kdt(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() == DType::BF16) return DT::BF16;
  if (t.dtype() == DType::F32) return DT::F32;
  fail("cuda {}: {} must be bf16 or f32, got {}", op, what, t.str());
}

void need_dtype(const Tensor& t, DType d, const char* op, const char* what) {
  if (t.dtype() != d) fail("cuda {}: {} must be {}, got {}", op, what, dtype_name(d), t.str());
}

void need_cuda(const Tensor& t, const char* op, const char* what) {
  if (!t.device().is_cuda()) fail("cuda {}: {} must be on the GPU, got {}", op, what, t.str());
}

void need_contiguous(const Tensor& t, const char* op, const char* what) {
  if (!t.is_contiguous()) fail("cuda {}: {} must be contiguous, got {}", op, what, t.str());
}

void need_unit_last(const Tensor& t, const char* op, const char* what) {
  if (t.stride(-1) != 1)
    fail("cuda {}: {} must have unit stride in its last dim, got {}", op, what, t.str());
}

bool aligned16(const Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.raw()) & 15) == 0;
}

// 16-byte vector access: the base aligned and every listed stride a multiple of 8 elements.
void need_vec(const Tensor& t, std::initializer_list<int64_t> strides, const char* op,
              const char* what) {
  bool ok = aligned16(t);
  for (int64_t s : strides) ok = ok && s % 8 == 0;
  if (!ok)
    fail(
        "cuda {}: {} needs 16-byte aligned rows (base and strides multiples of 8 elements), got {}",
        op, what, t.str());
}

k::PagedMeta paged(const AttentionMeta& m, const char* op) {
  for (const Tensor* t : {&m.token_seq, &m.token_pos, &m.page_table, &m.seq_lens}) {
    TD_CHECK(t->defined(), "cuda {}: attention metadata is incomplete", op);
    need_cuda(*t, op, "attention metadata");
    need_dtype(*t, DType::I32, op, "attention metadata");
    need_contiguous(*t, op, "attention metadata");
  }
  k::PagedMeta p;
  p.token_seq = m.token_seq.data<int32_t>();
  p.token_pos = m.token_pos.data<int32_t>();
  p.page_table = m.page_table.data<int32_t>();
  p.seq_lens = m.seq_lens.data<int32_t>();
  p.max_pages = m.page_table.size(1);
  p.page_size = static_cast<int32_t>(m.page_size);
  p.num_seqs = static_cast<int32_t>(m.num_seqs());
  return p;
}

int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

}  // namespace

CudaBackend::CudaBackend() : lt_(std::make_unique<LtGemm>()) {
  int dev = 0;
  TD_CUDA_CHECK(cudaGetDevice(&dev));
  TD_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, dev));
  const char* simt = std::getenv("TANDEM_MLA_SIMT");
  mla_tensor_cores_ = !(simt && *simt && *simt != '0');
  // Switches for A/B measurements of one build (docs/cuda-backend.md, "Switches").
  auto off = [](const char* name) {
    const char* v = std::getenv(name);
    return v && std::strcmp(v, "0") == 0;
  };
  side_stream_on_ = !off("TANDEM_SIDE_STREAM");
  last_block_reduce_ = !off("TANDEM_SKINNY_LAST_BLOCK_REDUCE");
  if (const char* v = std::getenv("TANDEM_MOE_TENSOR_CORES"); v && *v)
    moe_tc_mode_ = std::atoi(v) != 0;
  if (const char* v = std::getenv("TANDEM_MLA_MIN_SPLIT")) mla_min_split_ = std::atoll(v);
  if (const char* v = std::getenv("TANDEM_MLA_WIDE"); v && *v) mla_wide_mode_ = std::atoi(v) != 0;
  for (int*& c : split_counters_) {
    TD_CUDA_CHECK(cudaMalloc(&c, kSplitCounters * sizeof(int)));
    TD_CUDA_CHECK(cudaMemset(c, 0, kSplitCounters * sizeof(int)));
  }
  TD_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  TD_CUDA_CHECK(cudaEventCreateWithFlags(&fork_event_, cudaEventDisableTiming));
  TD_CUDA_CHECK(cudaEventCreateWithFlags(&join_event_, cudaEventDisableTiming));
}

CudaBackend::~CudaBackend() {
  for (void* p : scratch_)
    if (p) cudaFree(p);
  for (void* p : retired_) cudaFree(p);
  for (int* c : split_counters_)
    if (c) cudaFree(c);
  if (side_stream_) cudaStreamDestroy(side_stream_);
  if (fork_event_) cudaEventDestroy(fork_event_);
  if (join_event_) cudaEventDestroy(join_event_);
}

void CudaBackend::begin_side() {
  TD_CHECK(!in_side_, "cuda backend: side branches do not nest");
  if (!side_stream_on_) return;
  main_stream_ = stream_;
  TD_CUDA_CHECK(cudaEventRecord(fork_event_, main_stream_));
  TD_CUDA_CHECK(cudaStreamWaitEvent(side_stream_, fork_event_, 0));
  stream_ = side_stream_;
  in_side_ = true;
  lt_->use_workspace(1);
}

void CudaBackend::end_side() {
  if (!in_side_) return;
  TD_CUDA_CHECK(cudaEventRecord(join_event_, side_stream_));
  stream_ = main_stream_;
  in_side_ = false;
  lt_->use_workspace(0);
}

void CudaBackend::join_side() {
  TD_CHECK(!in_side_, "cuda backend: join_side inside the side branch");
  if (!side_stream_on_) return;
  TD_CUDA_CHECK(cudaStreamWaitEvent(stream_, join_event_, 0));
}

bool CudaBackend::capturing() const {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &st) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

void* CudaBackend::scratch(size_t bytes) {
  const int i = in_side_ ? 1 : 0;
  if (bytes <= scratch_bytes_[i]) return scratch_[i];
  if (capturing())
    fail(
        "cuda backend: an op needs {} MiB of scratch during CUDA graph capture but only {} MiB "
        "exist; run the same forward once eagerly before capturing it",
        bytes >> 20, scratch_bytes_[i] >> 20);
  if (scratch_[i]) retired_.push_back(scratch_[i]);
  const size_t want = std::max(bytes, scratch_bytes_[i] + scratch_bytes_[i] / 2);
  void* p = nullptr;
  if (cudaMalloc(&p, want) != cudaSuccess) {
    cudaGetLastError();
    fail("cuda backend: out of GPU memory allocating {:.1f} MiB of op scratch", want / 1048576.0);
  }
  scratch_[i] = p;
  scratch_bytes_[i] = want;
  return p;
}

// ---- elementwise -----------------------------------------------------------------------------

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, Tensor& out) {
  const DT dt = kdt(table, "embedding", "table");
  need_dtype(out, table.dtype(), "embedding", "out");
  need_contiguous(table, "embedding", "table");
  need_contiguous(ids, "embedding", "ids");
  k::embedding(ids.data<int32_t>(), ids.size(0), table.raw(), table.size(0), table.size(1),
               out.raw(), dt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  const DT dt = kdt(x, "rms_norm", "x");
  need_dtype(w, DType::F32, "rms_norm", "w");
  need_dtype(out, x.dtype(), "rms_norm", "out");
  need_contiguous(w, "rms_norm", "w");
  need_unit_last(out, "rms_norm", "out");
  k::rms_norm(x.raw(), x.stride(0), w.data<float>(), eps, out.raw(), out.stride(0), x.size(0),
              x.size(1), dt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, float eps,
                             Tensor& out) {
  const DT dt = kdt(x, "layer_norm", "x");
  need_dtype(w, DType::F32, "layer_norm", "w");
  need_dtype(b, DType::F32, "layer_norm", "b");
  need_dtype(out, x.dtype(), "layer_norm", "out");
  need_contiguous(w, "layer_norm", "w");
  need_contiguous(b, "layer_norm", "b");
  need_unit_last(out, "layer_norm", "out");
  k::layer_norm(x.raw(), x.stride(0), w.data<float>(), b.data<float>(), eps, out.raw(),
                out.stride(0), x.size(0), x.size(1), dt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq,
                       const RopeParams& p) {
  const DT dt = kdt(x, "rope", "x");
  need_contiguous(positions, "rope", "positions");
  need_contiguous(inv_freq, "rope", "inv_freq");
  k::rope(x.raw(), x.stride(0), x.stride(1), x.size(0), x.size(1), x.size(2),
          positions.data<int32_t>(), inv_freq.data<float>(), p.interleaved, p.attention_factor, dt,
          stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::silu_mul(const Tensor& x, Tensor& out) {
  const DT dt = kdt(x, "silu_mul", "x");
  need_unit_last(x, "silu_mul", "x");
  need_dtype(out, x.dtype(), "silu_mul", "out");
  need_contiguous(out, "silu_mul", "out");
  k::silu_mul(x.raw(), x.stride(0), out.raw(), x.size(0), out.size(1), dt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::add(const Tensor& a, const Tensor& b, Tensor& out) {
  const DT dt = kdt(a, "add", "a");
  need_dtype(b, a.dtype(), "add", "b");
  need_dtype(out, a.dtype(), "add", "out");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&a, &b, &out})
    need_contiguous(*t, "add", "every operand");
  k::add(a.raw(), b.raw(), out.raw(), a.numel(), dt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float eps,
                               Tensor& out) {
  const DT dt = kdt(h, "add_rms_norm", "h");
  need_dtype(w, DType::F32, "add_rms_norm", "w");
  need_contiguous(w, "add_rms_norm", "w");
  if (k::add_rms_norm(h.raw(), h.stride(0), b.raw(), b.stride(0), w.data<float>(), eps, out.raw(),
                      out.stride(0), h.size(0), h.size(1), dt, stream_)) {
    TD_CUDA_LAUNCH_CHECK();
    return;
  }
  Backend::add_rms_norm(h, b, w, eps, out);
}

void CudaBackend::concat_cols(const Tensor& a, const Tensor& b, Tensor& out) {
  need_dtype(b, a.dtype(), "concat_cols", "b");
  need_dtype(out, a.dtype(), "concat_cols", "out");
  need_unit_last(a, "concat_cols", "a");
  need_unit_last(b, "concat_cols", "b");
  need_contiguous(out, "concat_cols", "out");
  const int64_t es = dtype_size(a.dtype());
  TD_CHECK(es == 2 || es == 4, "cuda concat_cols: 2- or 4-byte elements only, got {}", a.str());
  k::concat_cols(a.raw(), a.stride(0), b.raw(), b.stride(0), out.raw(), a.size(0), a.size(1),
                 b.size(1), es, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::gather_rows(const Tensor& src, const Tensor& rows, Tensor& out) {
  need_unit_last(src, "gather_rows", "src");
  need_contiguous(rows, "gather_rows", "rows");
  need_contiguous(out, "gather_rows", "out");
  const int64_t es = dtype_size(src.dtype());
  TD_CHECK(es == 2 || es == 4, "cuda gather_rows: 2- or 4-byte elements only, got {}", src.str());
  k::gather_rows(src.raw(), src.stride(0), src.size(0), rows.data<int32_t>(), out.raw(),
                 rows.size(0), src.size(1), es, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::fill_random(Tensor& t, uint64_t seed, float scale) {
  cuda::fill_random(t, seed, scale);
}

std::unique_ptr<Workspace> CudaBackend::make_workspace(Device d, size_t bytes) {
  return std::make_unique<ArenaWorkspace>(d, bytes);
}

namespace {
class CudaGraphRunner final : public GraphRunner {
 public:
  explicit CudaGraphRunner(ArenaWorkspace& ws) : graphs_(ws) {}
  void run(int64_t key, const std::function<void(Workspace&)>& fn) override {
    graphs_.run(key, fn);
  }

 private:
  DecodeGraphs graphs_;
};
}  // namespace

std::unique_ptr<GraphRunner> CudaBackend::make_graph_runner(Workspace& ws) {
  auto* arena = dynamic_cast<ArenaWorkspace*>(&ws);
  if (!arena) return nullptr;  // graphs need the arena's repeatable addresses
  return std::make_unique<CudaGraphRunner>(*arena);
}

void CudaBackend::argmax(const Tensor& logits, Tensor& out) {
  need_dtype(logits, DType::F32, "argmax", "logits");
  need_unit_last(logits, "argmax", "logits");
  need_contiguous(out, "argmax", "out");
  const int64_t T = logits.size(0), chunks = k::argmax_chunks(logits.size(1));
  TD_CHECK(T <= kSplitCounters, "cuda argmax: {} rows, at most {} at once", T, kSplitCounters);
  auto* part = static_cast<char*>(scratch(static_cast<size_t>(T * chunks) * 8));
  k::argmax(logits.data<float>(), logits.stride(0), T, logits.size(1),
            reinterpret_cast<float*>(part), reinterpret_cast<int*>(part + T * chunks * 4),
            split_counters_[in_side_ ? 1 : 0], out.data<int32_t>(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::sample(const Tensor& logits, const Tensor& temperature, const Tensor& top_k,
                         const Tensor& top_p, const Tensor& u, Tensor& out) {
  const char* op = "sample";
  need_dtype(logits, DType::F32, op, "logits");
  need_cuda(logits, op, "logits");
  need_unit_last(logits, op, "logits");
  need_dtype(temperature, DType::F32, op, "temperature");
  need_dtype(top_p, DType::F32, op, "top_p");
  need_dtype(u, DType::F32, op, "u");
  need_dtype(top_k, DType::I32, op, "top_k");
  need_dtype(out, DType::I32, op, "out");
  for (const Tensor* t :
       std::initializer_list<const Tensor*>{&temperature, &top_k, &top_p, &u, &out}) {
    need_cuda(*t, op, "every sampling parameter and out");
    need_contiguous(*t, op, "every sampling parameter and out");
  }
  const int64_t T = logits.size(0), V = logits.size(1);
  TD_CHECK(V < (int64_t{1} << 31), "cuda sample: vocabulary {} too large", V);
  if (T == 0) return;
  TD_CHECK(V > 0, "cuda sample: empty vocabulary");
  k::sample(logits.data<float>(), logits.stride(0), T, V, temperature.data<float>(),
            top_k.data<int32_t>(), top_p.data<float>(), u.data<float>(), out.data<int32_t>(),
            stream_);
  TD_CUDA_LAUNCH_CHECK();
}

// ---- KV cache --------------------------------------------------------------------------------

void CudaBackend::kv_store(const Tensor& rows, const Tensor& slot_mapping, Tensor& pool) {
  need_dtype(rows, pool.dtype(), "kv_store", "rows");
  need_contiguous(pool, "kv_store", "pool");
  need_contiguous(slot_mapping, "kv_store", "slot_mapping");
  need_cuda(slot_mapping, "kv_store", "slot_mapping");
  const int64_t es = dtype_size(pool.dtype());
  TD_CHECK(es == 2 || es == 4, "cuda kv_store: 2- or 4-byte rows only, got {}", pool.str());
  k::kv_store(rows.raw(), rows.stride(0), slot_mapping.data<int32_t>(), pool.raw(), rows.size(0),
              pool.size(0), pool.size(1), es, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                               const Tensor& inv_freq, const RopeParams& p,
                               const Tensor& slot_mapping, Tensor& pool) {
  const char* op = "mla_kv_store";
  need_dtype(x, DType::BF16, op, "x");
  need_dtype(pool, DType::BF16, op, "pool (the latent cache must be bf16 on the GPU)");
  need_dtype(w, DType::F32, op, "w");
  need_contiguous(pool, op, "pool");
  need_contiguous(w, op, "w");
  need_contiguous(positions, op, "positions");
  need_contiguous(inv_freq, op, "inv_freq");
  need_contiguous(slot_mapping, op, "slot_mapping");
  need_cuda(slot_mapping, op, "slot_mapping");
  const int64_t n = w.size(0);
  k::mla_kv_store(x.raw(), x.stride(0), w.data<float>(), eps, n, x.size(1) - n,
                  positions.data<int32_t>(), inv_freq.data<float>(), p.interleaved,
                  p.attention_factor, slot_mapping.data<int32_t>(), pool.raw(), x.size(0),
                  pool.size(0), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::kv_gather(const Tensor& pool, const AttentionMeta& meta, Tensor& out) {
  need_dtype(out, pool.dtype(), "kv_gather", "out");
  need_contiguous(pool, "kv_gather", "pool");
  need_contiguous(out, "kv_gather", "out");
  const int64_t es = dtype_size(pool.dtype());
  TD_CHECK(es == 2 || es == 4, "cuda kv_gather: 2- or 4-byte rows only, got {}", pool.str());
  k::kv_gather(pool.raw(), paged(meta, "kv_gather"), meta.max_seq_len, out.raw(), pool.size(1), es,
               stream_);
  TD_CUDA_LAUNCH_CHECK();
}

// ---- GEMM ------------------------------------------------------------------------------------

namespace {
// out[b][m, n] = sum_k x[b][m, k] w[b][n, k] with the given row (rs) and batch (bs) strides.
k::SkinnyParams gemm_params(const void* x, int64_t x_rs, int64_t x_bs, const void* w, int64_t w_bs,
                            void* out, int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K,
                            int64_t batch) {
  k::SkinnyParams p;
  p.x = x, p.x_rs = x_rs, p.x_bs = x_bs;
  p.w = w, p.w_bs = w_bs;
  p.out = out, p.o_rs = o_rs, p.o_bs = o_bs;
  p.M = M, p.N = N, p.K = K, p.batch = batch;
  return p;
}

// The K-split partial sums of p: [splits][batch][M][N] f32.
size_t split_bytes(const k::SkinnyParams& p) {
  return static_cast<size_t>(p.splits * p.batch * p.M * p.N) * sizeof(float);
}
}  // namespace

void CudaBackend::skinny(const void* x, int64_t x_rs, int64_t x_bs, const Tensor& w, int64_t w_bs,
                         Tensor& out, int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K,
                         int64_t batch) {
  const DT wdt = kdt(w, "linear", "weight");
  const DT odt = kdt(out, "linear", "out");
  k::SkinnyParams p =
      gemm_params(x, x_rs, x_bs, w.raw(), w_bs, out.raw(), o_rs, o_bs, M, N, K, batch);
  p.splits = k::skinny_splits(p, wdt, num_sms_);
  if (p.splits > 1) {
    p.partial = static_cast<float*>(scratch(split_bytes(p)));
    // The tile's last block reduces (no second launch) where the counters suffice.
    if (last_block_reduce_ && k::skinny_tiles(p) <= kSplitCounters)
      p.counters = split_counters_[in_side_ ? 1 : 0];
  }
  k::skinny_gemm(p, wdt, odt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

bool CudaBackend::tc(const void* x, int64_t x_rs, int64_t x_bs, const Tensor& w, int64_t w_bs,
                     Tensor& out, int64_t o_rs, int64_t o_bs, int64_t M, int64_t N, int64_t K,
                     int64_t batch) {
  k::SkinnyParams p =
      gemm_params(x, x_rs, x_bs, w.raw(), w_bs, out.raw(), o_rs, o_bs, M, N, K, batch);
  if (w.dtype() != DType::BF16 || !k::tc_gemm_applies(p)) return false;
  p.splits = k::tc_gemm_splits(p, num_sms_);
  if (p.splits > 1) p.partial = static_cast<float*>(scratch(split_bytes(p)));
  k::tc_gemm(p, kdt(out, "linear", "out"), stream_);
  TD_CUDA_LAUNCH_CHECK();
  return true;
}

void CudaBackend::linear(const Tensor& x, const Weight& w, Tensor& out) {
  if (w.format != WeightFormat::kDense)
    fail(
        "cuda linear: only dense bf16/f32 weights are supported so far (FP8 block and MXFP4 "
        "checkpoints must be loaded with dtype bf16, which dequantizes them), got {}",
        w.w.str());
  need_dtype(x, DType::BF16, "linear", "x");
  need_contiguous(w.w, "linear", "weight");
  need_cuda(w.w, "linear", "weight");
  need_unit_last(out, "linear", "out");
  const int64_t M = x.size(0), K = x.size(1), N = w.out_features();
  if (M == 0) return;
  if (w.w.dtype() == DType::BF16) {
    if (deterministic_ && tc(x.raw(), x.stride(0), 0, w.w, 0, out, out.stride(0), 0, M, N, K, 1))
      return;
    if (M > kSkinnyMaxRows && !deterministic_ &&
        lt_->gemm(x.raw(), x.stride(0), w.w.raw(), K, out.raw(), out.stride(0),
                  out.dtype() == DType::F32, M, N, K, stream_))
      return;
  }
  skinny(x.raw(), x.stride(0), 0, w.w, 0, out, out.stride(0), 0, M, N, K, 1);
}

void CudaBackend::head_matmul(const Tensor& x, const Tensor& w, Tensor& out) {
  need_dtype(x, DType::BF16, "head_matmul", "x");
  need_dtype(w, DType::BF16, "head_matmul", "w");
  need_dtype(out, DType::BF16, "head_matmul", "out");
  need_contiguous(w, "head_matmul", "w");
  need_contiguous(out, "head_matmul", "out");
  const int64_t T = x.size(0), H = x.size(1), K = x.size(2), N = w.size(1);
  if (T == 0) return;
  if (deterministic_ && tc(x.raw(), x.stride(0), x.stride(1), w, N * K, out, H * N, N, T, N, K, H))
    return;
  // One strided-batched cuBLASLt GEMM (a batch per head); the skinny kernel (its fallback) has
  // its warps mostly idle on these short rows (K = 128 or 512).
  if (!deterministic_ && lt_->gemm(x.raw(), x.stride(0), w.raw(), K, out.raw(), H * N, false, T, N,
                                   K, stream_, H, x.stride(1), N * K, N))
    return;
  skinny(x.raw(), x.stride(0), x.stride(1), w, N * K, out, H * N, N, T, N, K, H);
}

// ---- attention -------------------------------------------------------------------------------

bool CudaBackend::mla_wide(int64_t T, int64_t H, int64_t L, int64_t Lc) const {
  if (!mla_tensor_cores_ || !k::mla_decode_wide_applies(H, L, Lc)) return false;
  if (mla_wide_mode_ >= 0) return mla_wide_mode_ == 1;
  return !deterministic_ && T >= kMlaWideMinTokens;
}

MlaDecodePlan CudaBackend::plan_mla_decode(int64_t T, int64_t H, int64_t range, int64_t Lc,
                                           bool wide) const {
  constexpr int64_t NK = k::kMlaKeysPerChunk;
  range = std::max<int64_t>(range, 1);
  // Enough blocks for two per SM (the 16-head kernel) or about one (the wide kernel, 201 KB of
  // shared memory; a split costs a merge pass over [T, H, splits, Lc] f32 partials, 23 us at
  // 128 tokens, so 3/4 of the SMs busy is enough).
  const int64_t blocks = wide ? T : T * ((H + k::kMlaHeadsPerBlock - 1) / k::kMlaHeadsPerBlock);
  const int64_t sms = num_sms_, target = wide ? 3 * sms / 4 : 2 * sms;
  MlaDecodePlan plan;
  if (deterministic_) {
    // Split boundaries fixed by the key range alone: the same for 1 or S + 1 query tokens.
    plan.split_len = round_up(kDeterministicMlaSplit, NK);
    plan.num_splits = (range + plan.split_len - 1) / plan.split_len;
    if (plan.num_splits > 1)
      plan.scratch_bytes = static_cast<size_t>(T * H * plan.num_splits) * (Lc + 1) * sizeof(float);
    return plan;
  }
  int64_t want = blocks >= target ? 1 : (target + blocks - 1) / blocks;
  want = std::min<int64_t>(want, 128);
  const int64_t min_split = std::max<int64_t>(mla_min_split_, wide ? kMlaWideMinSplit : 1);
  plan.split_len = std::max(round_up(min_split, NK), round_up((range + want - 1) / want, NK));
  plan.num_splits = (range + plan.split_len - 1) / plan.split_len;
  if (plan.num_splits > 1)
    plan.scratch_bytes = static_cast<size_t>(T * H * plan.num_splits) * (Lc + 1) * sizeof(float);
  return plan;
}

void CudaBackend::mla_decode(const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                             const Tensor& topk, float scale, Tensor& out) {
  const char* op = "mla_decode";
  need_dtype(q, DType::BF16, op, "q");
  need_dtype(pool, DType::BF16, op, "pool (the latent cache must be bf16 on the GPU)");
  need_dtype(out, DType::BF16, op, "out");
  need_contiguous(pool, op, "pool");
  need_contiguous(out, op, "out");
  need_unit_last(q, op, "q");
  need_vec(q, {q.stride(0), q.stride(1), q.size(2)}, op, "q");
  need_vec(pool, {pool.size(1)}, op, "pool");
  const int64_t T = q.size(0), H = q.size(1), L = q.size(2), Lc = out.size(2);
  TD_CHECK(Lc % 8 == 0 && Lc <= 512,
           "cuda mla_decode: kv_lora_rank {} must be a multiple of 8 and at most 512", Lc);
  if (T == 0) return;
  k::MlaDecodeParams p;
  p.q = q.raw(), p.q_s0 = q.stride(0), p.q_s1 = q.stride(1);
  p.pool = pool.raw();
  if (topk.defined()) {
    need_dtype(topk, DType::I32, op, "topk");
    need_contiguous(topk, op, "topk");
    p.topk = topk.data<int32_t>();
    p.topk_k = topk.size(1);
  }
  p.out = out.raw();
  p.meta = paged(meta, op);
  p.T = T, p.H = H, p.L = L, p.Lc = Lc, p.scale = scale;
  p.tensor_cores = mla_tensor_cores_;
  p.wide = mla_wide(T, H, L, Lc);
  const MlaDecodePlan plan =
      plan_mla_decode(T, H, topk.defined() ? topk.size(1) : meta.max_seq_len, Lc, p.wide);
  p.split_len = plan.split_len, p.num_splits = plan.num_splits;
  if (plan.num_splits > 1) {
    auto* s = static_cast<float*>(scratch(plan.scratch_bytes));
    p.part_o = s;
    p.part_lse = s + T * H * plan.num_splits * Lc;
  }
  k::mla_decode(p, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& k_pe,
                              const AttentionMeta& meta, const Tensor& topk, float scale,
                              Tensor& out) {
  const char* op = "mla_prefill";
  need_dtype(q, DType::BF16, op, "q");
  need_dtype(kv, DType::BF16, op, "kv");
  need_dtype(k_pe, DType::BF16, op, "k_pe");
  need_dtype(out, DType::BF16, op, "out");
  need_contiguous(kv, op, "kv");
  need_contiguous(out, op, "out");
  need_unit_last(q, op, "q");
  need_unit_last(k_pe, op, "k_pe");
  const int64_t T = q.size(0), H = q.size(1), dqk = q.size(2), dr = k_pe.size(1), dn = dqk - dr,
                dv = out.size(2);
  TD_CHECK(
      dn % 8 == 0 && dr % 8 == 0 && dv % 8 == 0 && dv <= 256 && dqk <= 512,
      "cuda mla_prefill: head dims nope {} rope {} v {} must be multiples of 8 (v at most 256)", dn,
      dr, dv);
  need_vec(q, {q.stride(0), q.stride(1)}, op, "q");
  need_vec(kv, {}, op, "kv");
  need_vec(k_pe, {k_pe.stride(0)}, op, "k_pe");
  if (T == 0) return;
  k::MlaPrefillParams p;
  p.q = q.raw(), p.q_s0 = q.stride(0), p.q_s1 = q.stride(1);
  p.kv = kv.raw();
  p.k_pe = k_pe.raw(), p.pe_rs = k_pe.stride(0);
  if (topk.defined()) {
    need_dtype(topk, DType::I32, op, "topk");
    need_contiguous(topk, op, "topk");
    p.topk = topk.data<int32_t>();
    p.topk_k = topk.size(1);
  }
  p.out = out.raw();
  p.meta = paged(meta, op);
  p.T = T, p.H = H, p.dn = dn, p.dr = dr, p.dv = dv, p.scale = scale;
  p.tensor_cores = mla_tensor_cores_;
  k::mla_prefill(p, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool,
                               const AttentionMeta& meta, Tensor& out) {
  const char* op = "indexer_topk";
  need_dtype(q, DType::BF16, op, "q");
  need_dtype(pool, DType::BF16, op, "pool (indexer keys must be bf16 on the GPU)");
  need_dtype(out, DType::I32, op, "out");
  need_unit_last(q, op, "q");
  need_unit_last(w, op, "w");
  need_contiguous(pool, op, "pool");
  need_contiguous(out, op, "out");
  need_vec(pool, {pool.size(1)}, op, "pool");
  const int64_t T = q.size(0), Di = q.size(2);
  TD_CHECK(k::indexer_supports_head_dim(Di),
           "cuda indexer_topk: index_head_dim {} not supported (16, 32, 64, 128)", Di);
  if (T == 0) return;
  k::IndexerParams p;
  p.q = q.raw(), p.q_s0 = q.stride(0), p.q_s1 = q.stride(1);
  p.w = w.data<float>(), p.w_s0 = w.stride(0);
  p.pool = pool.raw();
  p.meta = paged(meta, op);
  p.out = out.data<int32_t>();
  p.T = T, p.Hi = q.size(1), p.Di = Di, p.K = out.size(1);
  p.tensor_cores = mla_tensor_cores_;
  need_vec(q, {q.stride(0), q.stride(1)}, op, "q");
  p.max_len = std::max<int64_t>(meta.max_seq_len, 1);
  // Scores of up to 64M floats at a time: token chunks bound the scratch for long prefills.
  constexpr int64_t kMaxScores = int64_t{64} << 20;
  const int64_t Tc = std::clamp<int64_t>(kMaxScores / p.max_len, 1, T);
  if (p.max_len > p.K)
    p.scores = static_cast<float*>(scratch(static_cast<size_t>(Tc * p.max_len) * sizeof(float)));
  for (int64_t t0 = 0; t0 < T; t0 += Tc) {
    k::indexer_topk(p, t0, std::min(Tc, T - t0), stream_);
    TD_CUDA_LAUNCH_CHECK();
  }
}

// ---- MoE -------------------------------------------------------------------------------------

void CudaBackend::moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p,
                            Tensor& idx, Tensor& weights) {
  need_dtype(logits, DType::F32, "moe_route", "logits");
  need_unit_last(logits, "moe_route", "logits");
  need_contiguous(idx, "moe_route", "idx");
  need_contiguous(weights, "moe_route", "weights");
  if (bias.defined()) {
    need_dtype(bias, DType::F32, "moe_route", "bias");
    need_contiguous(bias, "moe_route", "bias");
  }
  k::moe_route(logits.data<float>(), logits.stride(0),
               bias.defined() ? bias.data<float>() : nullptr, logits.size(0), logits.size(1),
               p.top_k, p.n_group, p.topk_group, p.normalize, p.scaling, idx.data<int32_t>(),
               weights.data<float>(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

bool CudaBackend::moe_tensor_cores(int64_t pairs, int64_t experts) const {
  if (moe_tc_mode_ >= 0) return moe_tc_mode_ == 1;
  return deterministic_ || pairs >= kMoeTensorCoreRowsPerExpert * experts;
}

void CudaBackend::moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                              const Tensor& idx, const Tensor& weights, Tensor& out) {
  const char* op = "moe_experts";
  need_dtype(x, DType::BF16, op, "x");
  need_dtype(gate_up, DType::BF16, op, "gate_up");
  need_dtype(down, DType::BF16, op, "down");
  need_dtype(out, DType::BF16, op, "out");
  need_dtype(idx, DType::I32, op, "idx");
  need_dtype(weights, DType::F32, op, "weights");
  for (const Tensor* t :
       std::initializer_list<const Tensor*>{&gate_up, &down, &idx, &weights, &out})
    need_contiguous(*t, op, "weights, routing and out");
  need_unit_last(x, op, "x");
  const int64_t T = x.size(0), D = x.size(1), E = gate_up.size(0), I = down.size(2),
                kk = idx.size(1);
  TD_CHECK(D % 8 == 0 && I % 8 == 0,
           "cuda moe_experts: hidden {} and expert intermediate {} must be multiples of 8", D, I);
  need_vec(x, {x.stride(0)}, op, "x");
  if (T == 0) return;
  // Token chunks bound the intermediates (about 16 KB per (token, slot) at GLM-5 sizes).
  const int64_t per_pair = 2 * I * 2 + I * 2 + D * 4 + D * 2;
  const int64_t Tc =
      std::clamp<int64_t>((int64_t{512} << 20) / std::max<int64_t>(1, per_pair * kk), 1, T);
  for (int64_t t0 = 0; t0 < T; t0 += Tc) {
    const int64_t n = std::min(Tc, T - t0);
    Tensor xo = out.narrow(0, t0, n);
    // The host path's per-expert cuBLASLt GEMMs pick algorithms by row count: never when
    // deterministic.
    const bool host = n * kk >= kMoeHostPathRowsPerExpert * E && !capturing() && !deterministic_;
    moe_chunk(x.narrow(0, t0, n), gate_up, down, idx.narrow(0, t0, n), weights.narrow(0, t0, n), xo,
              host);
  }
}

void CudaBackend::moe_chunk(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                            const Tensor& idx, const Tensor& weights, Tensor& out, bool host_path) {
  const int64_t T = x.size(0), D = x.size(1), E = gate_up.size(0), I = down.size(2),
                kk = idx.size(1);
  const int64_t P = T * kk;
  // Scratch: ints (counts E, offsets E+1, perm P, inv P, active E, num_active 1), then
  // h [P, I] bf16, y [P, D] f32, and on the host path xs [P, D] bf16 and g [P, 2I] bf16.
  const size_t ints = static_cast<size_t>(round_up(3 * E + 2 + 2 * P, 64));
  const size_t h_bytes = static_cast<size_t>(round_up(P * I * 2, 256));
  const size_t y_bytes = static_cast<size_t>(round_up(P * D * 4, 256));
  const size_t xs_bytes = host_path ? static_cast<size_t>(round_up(P * D * 2, 256)) : 0;
  const size_t g_bytes = host_path ? static_cast<size_t>(round_up(P * 2 * I * 2, 256)) : 0;
  auto* base = static_cast<char*>(scratch(ints * 4 + h_bytes + y_bytes + xs_bytes + g_bytes));
  auto* counts = reinterpret_cast<int32_t*>(base);
  int32_t* offsets = counts + E;
  int32_t* perm = offsets + E + 1;
  int32_t* inv = perm + P;
  int32_t* active = inv + P;
  int32_t* num_active = active + E;
  void* h = base + ints * 4;
  auto* y = reinterpret_cast<float*>(base + ints * 4 + h_bytes);
  void* xs = base + ints * 4 + h_bytes + y_bytes;
  void* g = base + ints * 4 + h_bytes + y_bytes + xs_bytes;

  k::moe_prepare(idx.data<int32_t>(), P, E, counts, offsets, perm, inv, active, num_active,
                 stream_);
  TD_CUDA_LAUNCH_CHECK();
  if (!host_path) {
    const int64_t max_active = std::min(E, P);
    if (k::moe_mma_applies(I, D) && moe_tensor_cores(P, E)) {
      k::moe_gate_up_mma(x.raw(), x.stride(0), kk, gate_up.raw(), counts, offsets, perm, active,
                         num_active, max_active, I, D, h, stream_);
      TD_CUDA_LAUNCH_CHECK();
      k::moe_down_mma(h, down.raw(), counts, offsets, active, num_active, max_active, I, D, y,
                      stream_);
    } else {
      k::moe_gate_up(x.raw(), x.stride(0), kk, gate_up.raw(), counts, offsets, perm, active,
                     num_active, max_active, I, D, h, stream_);
      TD_CUDA_LAUNCH_CHECK();
      k::moe_down(h, down.raw(), counts, offsets, active, num_active, max_active, I, D, y, stream_);
    }
    TD_CUDA_LAUNCH_CHECK();
  } else {
    std::vector<int32_t> cnt(static_cast<size_t>(E)), off(static_cast<size_t>(E));
    TD_CUDA_CHECK(cudaMemcpyAsync(cnt.data(), counts, E * 4, cudaMemcpyDeviceToHost, stream_));
    TD_CUDA_CHECK(cudaMemcpyAsync(off.data(), offsets, E * 4, cudaMemcpyDeviceToHost, stream_));
    TD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    k::moe_gather_x(x.raw(), x.stride(0), kk, perm, P, D, xs, stream_);
    TD_CUDA_LAUNCH_CHECK();
    const auto* gu = static_cast<const uint16_t*>(gate_up.raw());
    const auto* dn = static_cast<const uint16_t*>(down.raw());
    auto* xs16 = static_cast<uint16_t*>(xs);
    auto* g16 = static_cast<uint16_t*>(g);
    auto* h16 = static_cast<uint16_t*>(h);
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = cnt[static_cast<size_t>(e)], o = off[static_cast<size_t>(e)];
      if (n == 0) continue;
      if (!lt_->gemm(xs16 + o * D, D, gu + e * 2 * I * D, D, g16 + o * 2 * I, 2 * I, false, n,
                     2 * I, D, stream_)) {
        Tensor ge = Tensor::wrap(g16 + o * 2 * I, {n, 2 * I}, DType::BF16, Device::cuda());
        skinny(xs16 + o * D, D, 0, gate_up.select(0, e), 0, ge, 2 * I, 0, n, 2 * I, D, 1);
      }
    }
    k::silu_mul(g, 2 * I, h, P, I, DT::BF16, stream_);
    TD_CUDA_LAUNCH_CHECK();
    for (int64_t e = 0; e < E; ++e) {
      const int64_t n = cnt[static_cast<size_t>(e)], o = off[static_cast<size_t>(e)];
      if (n == 0) continue;
      if (!lt_->gemm(h16 + o * I, I, dn + e * D * I, I, y + o * D, D, true, n, D, I, stream_)) {
        Tensor ye = Tensor::wrap(y + o * D, {n, D}, DType::F32, Device::cuda());
        skinny(h16 + o * I, I, 0, down.select(0, e), 0, ye, D, 0, n, D, I, 1);
      }
    }
  }
  k::moe_combine(y, DT::F32, inv, weights.data<float>(), T, kk, D, out.raw(), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

// ---- device copy -----------------------------------------------------------------------------

// On the compute stream, so a graph capture records it as a memcpy node (the MTP draft loop
// passes each step's argmax to the next step's input ids this way).
void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  need_cuda(src, "copy", "src");
  need_cuda(dst, "copy", "dst");
  need_contiguous(src, "copy", "src");
  need_contiguous(dst, "copy", "dst");
  TD_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()),
                                cudaMemcpyDeviceToDevice, stream_));
}

namespace {
CudaBackend* g_backend = nullptr;
}

CudaBackend* cuda_backend() {
  return g_backend;
}

// Called by init_cuda_backend (cuda_device.cpp).
void install_cuda_backend() {
  if (g_backend) return;
  // Never destroyed: its CUDA resources must not be freed after the runtime shuts down at exit.
  g_backend = new CudaBackend();
  register_backend(DeviceType::CUDA, g_backend);
}

}  // namespace tandem::cuda
