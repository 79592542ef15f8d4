#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_validate.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/lt_fp8.h"
#include "backends/cuda/lt_gemm.h"
#include "backends/cuda/quant_kernels.h"
#include "core/error.h"
#include "core/log.h"

namespace tandem::cuda {

using namespace check;
using k::DT;

namespace {
// TANDEM_CUDA_SYNC: how a host thread waits for the GPU (cudaSetDeviceFlags). CUDA's default with
// more cores than GPUs spins, which keeps the engine thread on its core while it waits; a thread
// it wakes (a client's, the server's) may then wait for that core. A diagnostic: bench-offline's
// rows at concurrency 32 read a 3 ms or a 9 ms TTFT from one engine instance to the next.
void apply_sync_mode() {
  const char* v = std::getenv("TANDEM_CUDA_SYNC");
  if (!v || !*v) return;
  const std::string mode = v;
  unsigned flags = 0;
  if (mode == "spin")
    flags = cudaDeviceScheduleSpin;
  else if (mode == "yield")
    flags = cudaDeviceScheduleYield;
  else if (mode == "block")
    flags = cudaDeviceScheduleBlockingSync;
  else
    fail("TANDEM_CUDA_SYNC={}: expected spin, yield or block", mode);
  TD_CUDA_CHECK(cudaSetDeviceFlags(flags));
  log_info("TANDEM_CUDA_SYNC={}: how host threads wait for the GPU", mode);
}
}  // namespace

CudaBackend::CudaBackend() : lt_(std::make_unique<LtGemm>()) {
  apply_sync_mode();
  int dev = 0;
  TD_CUDA_CHECK(cudaGetDevice(&dev));
  TD_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, dev));
  const heuristics::Switches sw = heuristics::read_switches();
  mla_tensor_cores_ = sw.mla_tensor_cores;
  side_stream_on_ = sw.side_stream;
  last_block_reduce_ = sw.last_block_reduce;
  moe_tc_mode_ = sw.moe_tc_mode;
  mla_min_split_ = sw.mla_min_split;
  mla_det_split_ = sw.mla_det_split;
  mla_wide_mode_ = sw.mla_wide_mode;
  mla_wgmma_ = sw.mla_wgmma;
  mla_column_parts_ = sw.mla_column_parts;
  mla_chain_value_cols_ = sw.mla_chain_value_cols;
  mla_chain_mode_ = sw.mla_chain_mode;
  moe_row_groups_ = sw.moe_row_groups;
  quant_ring_ = sw.quant_ring;
  expert_streams_used_ = sw.expert_streams;
  moe_grouped_ = sw.moe_grouped;
  moe_fused_prepare_ = sw.moe_fused_prepare;
  det_tc_max_weights_ = sw.det_tc_max_weights;
  moe_wgmma_mode_ = sw.moe_wgmma_mode;
  moe_fp8_wgmma_mode_ = sw.moe_fp8_wgmma_mode;
  fp8_linear_wgmma_mode_ = sw.fp8_linear_wgmma_mode;
  k::set_fp8_wgmma_shape(sw.fp8_wgmma_k_stage, sw.fp8_wgmma_small_box);
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
  for (cudaStream_t s : expert_streams_)
    if (s) cudaStreamDestroy(s);
  for (cudaEvent_t e : expert_events_)
    if (e) cudaEventDestroy(e);
  if (expert_fork_) cudaEventDestroy(expert_fork_);
  if (fork_event_) cudaEventDestroy(fork_event_);
  if (join_event_) cudaEventDestroy(join_event_);
}

void CudaBackend::set_deterministic(bool on) {
  deterministic_ = on;
  lt_->set_batch_invariant(on);
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

void CudaBackend::embedding(const Tensor& ids, const Tensor& table, int64_t vocab_start, bool shard,
                            Tensor& out) {
  (void)shard;  // ids outside the table give zero rows either way
  const DT dt = kdt(table, "embedding", "table");
  need_dtype(out, table.dtype(), "embedding", "out");
  need_contiguous(table, "embedding", "table");
  need_contiguous(ids, "embedding", "ids");
  k::embedding(ids.data<int32_t>(), ids.size(0), table.raw(), vocab_start, table.size(0),
               table.size(1), out.raw(), dt, stream_);
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
  need_all_contiguous({&a, &b, &out}, "add", "every operand");
  k::add(a.raw(), b.raw(), out.raw(), a.numel(), dt, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::add_rms_norm(Tensor& h, const Tensor& b, const Tensor& w, float eps,
                               Tensor& out) {
  const DT dt = kdt(h, "add_rms_norm", "h");
  need_f32_param(w, "add_rms_norm", "w");
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
  const int64_t es = copy_elem_bytes(a, "concat_cols", "elements");
  k::concat_cols(a.raw(), a.stride(0), b.raw(), b.stride(0), out.raw(), a.size(0), a.size(1),
                 b.size(1), es, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::gather_rows(const Tensor& src, const Tensor& rows, Tensor& out) {
  need_unit_last(src, "gather_rows", "src");
  need_contiguous(rows, "gather_rows", "rows");
  need_contiguous(out, "gather_rows", "out");
  const int64_t es = copy_elem_bytes(src, "gather_rows", "elements");
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
  CudaGraphRunner(CudaBackend* be, ArenaWorkspace& ws) : graphs_(be, ws) {}
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
  return std::make_unique<CudaGraphRunner>(this, *arena);
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

void CudaBackend::mask_logits(Tensor& logits, const Tensor& allowed) {
  need_dtype(logits, DType::F32, "mask_logits", "logits");
  need_cuda(logits, "mask_logits", "logits");
  need_unit_last(logits, "mask_logits", "logits");
  need_cuda(allowed, "mask_logits", "allowed");
  need_contiguous(allowed, "mask_logits", "allowed");
  k::mask_logits(logits.data<float>(), logits.stride(0), logits.size(0), logits.size(1),
                 static_cast<const uint32_t*>(allowed.raw()), stream_);
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
  if (pool.dtype() == DType::F8_E4M3) {  // the FP8 indexer-key rows: rotate and quantize
    const char* op = "kv_store";
    need_dtype(rows, DType::BF16, op, "rows");
    need_unit_last(rows, op, "rows");
    need_contiguous(pool, op, "pool");
    need_device_index(slot_mapping, op, "slot_mapping");
    const int64_t D = rows.size(1);
    TD_CHECK(D >= 2 && D <= 128 && (D & (D - 1)) == 0 && pool.size(1) == D + 4,
             "cuda kv_store: FP8 key rows need a power-of-two width up to 128 and a pool of "
             "width + 4 bytes, got rows {} and pool {}",
             rows.str(), pool.str());
    k::index_key_store_fp8(rows.raw(), rows.stride(0), slot_mapping.data<int32_t>(), pool.raw(),
                           rows.size(0), pool.size(0), D, 1.0f / std::sqrt(static_cast<float>(D)),
                           stream_);
    TD_CUDA_LAUNCH_CHECK();
    return;
  }
  need_dtype(rows, pool.dtype(), "kv_store", "rows");
  need_contiguous(pool, "kv_store", "pool");
  need_device_index(slot_mapping, "kv_store", "slot_mapping");
  const int64_t es = copy_elem_bytes(pool, "kv_store", "rows");
  k::kv_store(rows.raw(), rows.stride(0), slot_mapping.data<int32_t>(), pool.raw(), rows.size(0),
              pool.size(0), pool.size(1), es, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::mla_kv_store(const Tensor& x, const Tensor& w, float eps, const Tensor& positions,
                               const Tensor& inv_freq, const RopeParams& p,
                               const Tensor& slot_mapping, Tensor& pool) {
  const char* op = "mla_kv_store";
  need_dtype(x, DType::BF16, op, "x");
  const bool fp8 = pool.dtype() == DType::F8_E4M3;
  if (!fp8)
    need_dtype(pool, DType::BF16, op, "pool (the latent cache must be bf16 or FP8 on the GPU)");
  need_dtype(w, DType::F32, op, "w");
  need_contiguous(pool, op, "pool");
  need_contiguous(w, op, "w");
  need_contiguous(positions, op, "positions");
  need_contiguous(inv_freq, op, "inv_freq");
  need_device_index(slot_mapping, op, "slot_mapping");
  const int64_t n = w.size(0);
  TD_CHECK(!fp8 || n % 8 == 0, "cuda mla_kv_store: FP8 rows need kv_lora_rank {} a multiple of 8",
           n);
  k::mla_kv_store(x.raw(), x.stride(0), w.data<float>(), eps, n, x.size(1) - n,
                  positions.data<int32_t>(), inv_freq.data<float>(), p.interleaved,
                  p.attention_factor, slot_mapping.data<int32_t>(), pool.raw(), x.size(0),
                  pool.size(0), fp8, pool.size(1), stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::kv_gather(const Tensor& pool, const AttentionMeta& meta, int64_t fp8_nope,
                            Tensor& out) {
  if (pool.dtype() == DType::F8_E4M3) {  // dequantized into the bf16 rows prefill reads
    const char* op = "kv_gather";
    need_dtype(out, DType::BF16, op, "out");
    need_contiguous(pool, op, "pool");
    need_contiguous(out, op, "out");
    need_vec(out, {out.size(1)}, op, "out");
    const int64_t n = fp8_nope, dr = out.size(1) - n;
    TD_CHECK(n % 8 == 0 && dr % 8 == 0 && dr >= 0,
             "cuda kv_gather: FP8 rows need kv_lora_rank {} and rope dim {} multiples of 8", n, dr);
    k::kv_gather_fp8(pool.raw(), paged(meta, op), meta.max_seq_len, out.raw(), n, dr, stream_);
    TD_CUDA_LAUNCH_CHECK();
    return;
  }
  need_dtype(out, pool.dtype(), "kv_gather", "out");
  need_contiguous(pool, "kv_gather", "pool");
  need_contiguous(out, "kv_gather", "out");
  const int64_t es = copy_elem_bytes(pool, "kv_gather", "rows");
  k::kv_gather(pool.raw(), paged(meta, "kv_gather"), meta.max_seq_len, out.raw(), pool.size(1), es,
               stream_);
  TD_CUDA_LAUNCH_CHECK();
}

// ---- device copy -----------------------------------------------------------------------------

// On the compute stream, so a graph capture records it as a memcpy node (the MTP draft loop
// passes each step's argmax to the next step's input ids this way).
void CudaBackend::copy(const Tensor& src, Tensor& dst) {
  need_cuda(src, "copy", "src");
  need_cuda(dst, "copy", "dst");
  if (src.is_contiguous() && dst.is_contiguous()) {
    TD_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), static_cast<size_t>(src.nbytes()),
                                  cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  need_unit_last(src, "copy", "src");  // [R, C] rows at any stride (ops::copy)
  need_unit_last(dst, "copy", "dst");
  const size_t es = static_cast<size_t>(dtype_size(src.dtype()));
  TD_CUDA_CHECK(cudaMemcpy2DAsync(
      dst.raw(), static_cast<size_t>(dst.stride(0)) * es, src.raw(),
      static_cast<size_t>(src.stride(0)) * es, static_cast<size_t>(src.size(1)) * es,
      static_cast<size_t>(src.size(0)), cudaMemcpyDeviceToDevice, stream_));
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
