#include "distributed/nccl_collectives.h"

#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "core/log.h"
#include "distributed/collective_watchdog.h"
#include "distributed/one_shot_all_reduce.h"

namespace tandem {

namespace {

ncclComm_t as_comm(void* p) {
  return static_cast<ncclComm_t>(p);
}

cudaStream_t current_stream() {
  return cuda::cuda_backend()->stream();
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t one_shot_threshold(size_t fallback) {
  const char* env = std::getenv("TANDEM_ONE_SHOT_MAX_BYTES");
  if (!env || !*env) return fallback;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(env, &end, 10);
  if (*end != '\0')
    throw InvalidArgument(fmt::format("TANDEM_ONE_SHOT_MAX_BYTES={}: expected a byte count", env));
  return static_cast<size_t>(v);
}

void need_device_tensor(const Tensor& t, Device d, const char* op, const char* name) {
  TD_CHECK(t.device() == d && t.is_contiguous(), "nccl {}: {} must be contiguous on {}, got {}", op,
           name, d.str(), t.str());
}

ncclDataType_t reduce_type(const Tensor& x) {
  TD_CHECK(x.dtype() == DType::BF16 || x.dtype() == DType::F32,
           "nccl all_reduce_sum: bf16 or f32, got {}", x.str());
  return x.dtype() == DType::BF16 ? ncclBfloat16 : ncclFloat32;
}

}  // namespace

// One NCCL call: holds comm_mu_ and tells the watchdog when it started and what it is.
class NcclCollectives::Call {
 public:
  Call(NcclCollectives& c, const char* op) : c_(c), lock_(c.comm_mu_) {
    c_.call_op_.store(op);
    c_.call_started_ns_.store(now_ns());
  }
  ~Call() { c_.call_started_ns_.store(0); }
  ncclComm_t comm() const {
    void* p = c_.comm_.load();
    if (!p) c_.check();  // aborted: throws with the failure's message
    return as_comm(p);
  }
  // A failed NCCL return: the failure's message if the communicator was aborted meanwhile.
  [[noreturn]] void failed(ncclResult_t e, const char* op) const {
    c_.check();
    throw PeerError(fmt::format("rank {}: {} failed: {}: {}", c_.rank_, op, ncclGetErrorString(e),
                                ncclGetLastError(as_comm(c_.comm_.load()))));
  }

 private:
  NcclCollectives& c_;
  std::lock_guard<std::timed_mutex> lock_;
};

NcclCollectives::NcclCollectives(ProcessGroup& pg, Device device, NcclOptions o)
    : rank_(pg.rank()),
      world_(pg.world()),
      device_(device),
      one_shot_max_bytes_(one_shot_threshold(o.one_shot_max_bytes)) {
  TD_CHECK(device.is_cuda(), "NcclCollectives needs a CUDA device, got {}", device.str());
  TD_CHECK(cuda::cuda_backend() != nullptr,
           "NcclCollectives: the CUDA backend is not initialised (init_backends)");
  TD_CUDA_CHECK(cudaSetDevice(device.index));

  // Rank 0 makes the id; the process group carries it to the others.
  Bytes id(sizeof(ncclUniqueId));
  if (rank_ == 0) {
    ncclUniqueId u;
    const ncclResult_t e = ncclGetUniqueId(&u);
    if (e != ncclSuccess)
      throw PeerError(fmt::format("rank 0: ncclGetUniqueId failed: {}", ncclGetErrorString(e)));
    std::memcpy(id.data(), &u, sizeof u);
  }
  pg.broadcast(id);
  TD_CHECK(id.size() == sizeof(ncclUniqueId), "rank {}: the NCCL id from rank 0 has {} bytes",
           rank_, id.size());
  ncclUniqueId u;
  std::memcpy(&u, id.data(), sizeof u);
  ncclComm_t comm = nullptr;
  const ncclResult_t e = ncclCommInitRank(&comm, world_, u, rank_);
  if (e != ncclSuccess)
    throw PeerError(fmt::format("rank {}: ncclCommInitRank ({} ranks, {}) failed: {}: {}", rank_,
                                world_, device.str(), ncclGetErrorString(e),
                                ncclGetLastError(nullptr)));
  comm_.store(comm);

  if (one_shot_max_bytes_ > 0) {
    one_shot_ = std::make_unique<OneShotAllReduce>(pg, device.index, one_shot_max_bytes_);
    if (!one_shot_->available())
      log_warn("rank {}: one-shot all-reduce off, NCCL for every size: {}", rank_,
               one_shot_->unavailable_reason());
  }
  if (o.watchdog)
    watchdog_ = std::make_unique<CollectiveWatchdog>(
        device.index, [this] { return probe(); }, [this](const std::string& why) { fail(why); });
}

NcclCollectives::~NcclCollectives() {
  watchdog_.reset();
  // Abort, not destroy: destroy waits for outstanding work, which never ends if a peer is gone.
  if (void* c = comm_.exchange(nullptr)) ncclCommAbort(as_comm(c));
  one_shot_.reset();
}

bool NcclCollectives::one_shot_available() const {
  return one_shot_ && one_shot_->available();
}

void NcclCollectives::all_reduce_sum(Tensor& x) {
  check();
  if (world_ == 1) return;  // the sum over one rank is x
  if (one_shot_available() && static_cast<size_t>(x.nbytes()) <= one_shot_max_bytes_)
    all_reduce_one_shot(x);
  else
    all_reduce_nccl(x);
}

void NcclCollectives::all_reduce_nccl(Tensor& x) {
  check();
  need_device_tensor(x, device_, "all_reduce_sum", "x");
  const ncclDataType_t t = reduce_type(x);
  {
    Call call(*this, "ncclAllReduce");
    const ncclResult_t e = ncclAllReduce(x.raw(), x.raw(), static_cast<size_t>(x.numel()), t,
                                         ncclSum, call.comm(), current_stream());
    if (e != ncclSuccess) call.failed(e, "ncclAllReduce");
  }
  watch("all_reduce_sum (NCCL)", x.nbytes());
}

void NcclCollectives::all_reduce_one_shot(Tensor& x) {
  check();
  TD_CHECK(one_shot_available(), "rank {}: the one-shot all-reduce is off{}", rank_,
           one_shot_ ? ": " + one_shot_->unavailable_reason() : std::string());
  need_device_tensor(x, device_, "all_reduce_sum", "x");
  one_shot_->run(x, current_stream());
  watch("all_reduce_sum (one-shot)", x.nbytes());
}

void NcclCollectives::all_gather_cols(Workspace& ws, const Tensor& in, Tensor& out) {
  check();
  need_device_tensor(in, device_, "all_gather_cols", "in");
  need_device_tensor(out, device_, "all_gather_cols", "out");
  TD_CHECK(in.ndim() == 2, "nccl all_gather_cols: in must be [R, C], got {}", in.str());
  const int64_t R = in.size(0), C = in.size(1), W = world_;
  TD_CHECK(out.ndim() == 2 && out.size(0) == R && out.size(1) == W * C && out.dtype() == in.dtype(),
           "nccl all_gather_cols: out must be {} [{}, {}], got {}", dtype_name(in.dtype()), R,
           W * C, out.str());
  if (in.numel() == 0) return;
  const size_t row = static_cast<size_t>(C * dtype_size(in.dtype()));  // bytes of one rank's row
  const cudaStream_t s = current_stream();
  // One row: rank r's block [1, C] is already where out wants it. Otherwise gather whole blocks
  // into scratch [W, R, C] and interleave them into out's rows.
  Tensor scratch;
  void* dst = out.raw();
  if (R > 1) {
    scratch = ws.alloc({W, R, C}, in.dtype());
    dst = scratch.raw();
  }
  {
    Call call(*this, "ncclAllGather");
    // As bytes: a gather does no arithmetic, so every dtype goes.
    const ncclResult_t e =
        ncclAllGather(in.raw(), dst, static_cast<size_t>(in.nbytes()), ncclUint8, call.comm(), s);
    if (e != ncclSuccess) call.failed(e, "ncclAllGather");
  }
  if (R > 1) {
    const auto* src = static_cast<const char*>(scratch.raw());
    auto* o = static_cast<char*>(out.raw());
    for (int64_t r = 0; r < W; ++r)
      TD_CUDA_CHECK(cudaMemcpy2DAsync(o + r * row, W * row, src + r * R * row, row, row,
                                      static_cast<size_t>(R), cudaMemcpyDeviceToDevice, s));
  }
  watch("all_gather_cols (NCCL)", out.nbytes());
}

void NcclCollectives::watch(const char* op, int64_t bytes) {
  if (watchdog_ && !cuda::cuda_backend()->capturing())
    watchdog_->enqueued(current_stream(), op, bytes);
}

std::string NcclCollectives::probe() {
  if (one_shot_) {
    std::string f = one_shot_->failure();
    if (!f.empty()) return f;
  }
  const int64_t started = call_started_ns_.load();
  if (started != 0) {
    const double s = (now_ns() - started) / 1e9;
    if (s * 1000 > collective_timeout().count())
      return fmt::format("{} has not returned after {:.0f} s (a peer is gone or stuck)",
                         call_op_.load(), s);
  }
  // NCCL's own failures (a broken connection, a peer's proxy gone). The lock keeps abort()
  // from freeing comm_ under the query; when a call holds it, the next poll asks.
  std::unique_lock<std::timed_mutex> l(comm_mu_, std::try_to_lock);
  void* c = comm_.load();
  if (l.owns_lock() && c) {
    ncclResult_t e = ncclSuccess;
    if (ncclCommGetAsyncError(as_comm(c), &e) == ncclSuccess && e != ncclSuccess &&
        e != ncclInProgress)
      return fmt::format("NCCL reported an asynchronous error: {}: {}", ncclGetErrorString(e),
                         ncclGetLastError(as_comm(c)));
  }
  return {};
}

void NcclCollectives::abort(const std::string& why) {
  fail(why);
}

void NcclCollectives::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> l(failure_mu_);
    if (failed_.load()) return;
    failure_ = fmt::format("rank {}: {}", rank_, why);
    failed_.store(true);
  }
  log_error("{}", failure_);
  // 1. Kernels stop waiting for peers: the one-shot ones at their next poll of the abort flag,
  // NCCL's through ncclCommAbort. Without the lock if a call is stuck inside NCCL holding it.
  if (one_shot_) one_shot_->abort();
  std::unique_lock<std::timed_mutex> l(comm_mu_, std::chrono::seconds(1));
  if (void* c = comm_.exchange(nullptr)) ncclCommAbort(as_comm(c));
  if (l.owns_lock()) l.unlock();
  // 2. Whoever runs the server hears it.
  if (on_failure_) on_failure_(failure_);
}

void NcclCollectives::check() const {
  if (!failed_.load()) return;
  std::lock_guard<std::mutex> l(failure_mu_);
  throw PeerError(failure_);
}

}  // namespace tandem
