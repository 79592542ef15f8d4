#include "distributed/one_shot_all_reduce.h"

#include <unistd.h>

#include <cstring>

#include "backends/cuda/cuda_check.h"
#include "distributed/one_shot_kernel.h"

namespace tandem {

namespace {

// What each rank tells the others at setup (plain bytes through the ProcessGroup).
struct Hello {
  char host[64] = {};
  int64_t pid = 0;
  int32_t device = 0;
  int32_t handle_ok = 0;
  uint64_t max_bytes = 0;
  uint64_t ptr = 0;  // the buffer's address: used as is by ranks in the same process
  cudaIpcMemHandle_t handle{};
};

Bytes to_bytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return Bytes(b, b + n);
}

}  // namespace

OneShotAllReduce::OneShotAllReduce(ProcessGroup& pg, int device, size_t max_bytes)
    : rank_(pg.rank()),
      world_(pg.world()),
      device_(device),
      max_bytes_(max_bytes),
      // The kernel moves whole 16-byte vectors: room for the last partial one, 256-aligned.
      slot_bytes_((max_bytes + 16 + 255) / 256 * 256),
      bufs_(static_cast<size_t>(world_), nullptr),
      opened_(static_cast<size_t>(world_), false) {
  TD_CUDA_CHECK(cudaSetDevice(device_));
  // Zeroed before any peer can see it: the all-gather below is the barrier that orders this
  // before every peer's first flag write.
  TD_CUDA_CHECK(cudaMalloc(&own_, oneshot::buffer_bytes(slot_bytes_)));
  TD_CUDA_CHECK(cudaMemset(own_, 0, oneshot::buffer_bytes(slot_bytes_)));
  TD_CUDA_CHECK(cudaDeviceSynchronize());
  TD_CUDA_CHECK(cudaHostAlloc(&host_words_, 2 * sizeof(int), cudaHostAllocMapped));
  host_words_[0] = host_words_[1] = 0;
  TD_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_words_), host_words_, 0));
  bufs_[static_cast<size_t>(rank_)] = own_;

  Hello me;
  gethostname(me.host, sizeof me.host - 1);
  me.pid = getpid();
  me.device = device_;
  me.max_bytes = max_bytes_;
  me.ptr = reinterpret_cast<uint64_t>(own_);
  me.handle_ok = cudaIpcGetMemHandle(&me.handle, own_) == cudaSuccess;
  cudaGetLastError();
  const std::vector<Bytes> all = pg.all_gather(to_bytes(&me, sizeof me));
  std::vector<Hello> peers(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    TD_CHECK(all[r].size() == sizeof(Hello), "one-shot all-reduce: rank {} sent {} bytes", r,
             all[r].size());
    std::memcpy(&peers[r], all[r].data(), sizeof(Hello));
    // Different sizes would make ranks pick different paths for one call and hang.
    if (peers[r].max_bytes != max_bytes_)
      throw InvalidArgument(
          fmt::format("one-shot all-reduce: rank {} has max_bytes {}, rank {} has {} (set the same "
                      "threshold on every rank)",
                      r, peers[r].max_bytes, rank_, max_bytes_));
  }

  // Every rank sees the same hellos, so every rank reaches the same verdict here.
  if (world_ > oneshot::kMaxRanks)
    reason_ = fmt::format("{} ranks, the kernel handles at most {}", world_, oneshot::kMaxRanks);
  for (int r = 0; r < world_ && reason_.empty(); ++r) {
    const Hello& h = peers[static_cast<size_t>(r)];
    if (std::strncmp(h.host, me.host, sizeof me.host) != 0)
      reason_ = fmt::format("rank {} is on host {}, rank 0 on {}", r, h.host, peers[0].host);
    else if (!h.handle_ok && h.pid != me.pid)
      reason_ = fmt::format("rank {} could not export its buffer over CUDA IPC", r);
  }

  // Map the peers' buffers. This can still fail on one rank only, so the verdict is shared.
  bool ok = reason_.empty();
  std::string why;
  for (int r = 0; r < world_ && ok; ++r) {
    if (r == rank_) continue;
    const Hello& h = peers[static_cast<size_t>(r)];
    void* p = nullptr;
    if (h.pid == me.pid) {
      // Ranks as threads of one process: the pointer is valid here already; another device's
      // memory needs peer access.
      p = reinterpret_cast<void*>(h.ptr);
      if (h.device != device_) {
        int can = 0;
        cudaDeviceCanAccessPeer(&can, device_, h.device);
        const cudaError_t e =
            can ? cudaDeviceEnablePeerAccess(h.device, 0) : cudaErrorPeerAccessUnsupported;
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
          ok = false;
          why = fmt::format("no peer access from device {} to device {}", device_, h.device);
        }
        cudaGetLastError();
      }
    } else {
      const cudaError_t e = cudaIpcOpenMemHandle(&p, h.handle, cudaIpcMemLazyEnablePeerAccess);
      if (e != cudaSuccess) {
        cudaGetLastError();
        ok = false;
        why = fmt::format("rank {} could not map rank {}'s buffer: {}", rank_, r,
                          cudaGetErrorString(e));
      } else {
        opened_[static_cast<size_t>(r)] = true;
      }
    }
    bufs_[static_cast<size_t>(r)] = static_cast<char*>(p);
  }
  const uint8_t mine = ok ? 1 : 0;
  const std::vector<Bytes> verdicts = pg.all_gather(Bytes{mine});
  for (size_t r = 0; r < verdicts.size() && reason_.empty(); ++r)
    if (verdicts[r].empty() || verdicts[r][0] != 1)
      reason_ = r == static_cast<size_t>(rank_) ? why : fmt::format("rank {} failed to map", r);
  available_ = reason_.empty();
}

OneShotAllReduce::~OneShotAllReduce() {
  cudaSetDevice(device_);
  for (size_t r = 0; r < bufs_.size(); ++r)
    if (opened_[r]) cudaIpcCloseMemHandle(bufs_[r]);
  if (own_) cudaFree(own_);
  if (host_words_) cudaFreeHost(host_words_);
}

void OneShotAllReduce::run(Tensor& x, cudaStream_t stream) {
  TD_CHECK(available_, "one-shot all-reduce is unavailable: {}", reason_);
  TD_CHECK(x.device().is_cuda() && x.device().index == device_ && x.is_contiguous() &&
               (x.dtype() == DType::BF16 || x.dtype() == DType::F32),
           "one-shot all-reduce: x must be a contiguous bf16 or f32 tensor on cuda:{}, got {}",
           device_, x.str());
  TD_CHECK(static_cast<size_t>(x.nbytes()) <= max_bytes_,
           "one-shot all-reduce: {} bytes, the buffers hold {}", x.nbytes(), max_bytes_);
  if (x.numel() == 0) return;
  oneshot::Args a;
  for (int r = 0; r < world_; ++r) a.bufs[r] = bufs_[static_cast<size_t>(r)];
  a.rank = rank_;
  a.world = world_;
  a.x = x.raw();
  a.n = x.numel();
  a.dtype = x.dtype() == DType::BF16 ? oneshot::DType::BF16 : oneshot::DType::F32;
  a.slot_bytes = slot_bytes_;
  a.abort = dev_words_;
  a.status = dev_words_ + 1;
  a.timeout_ns = static_cast<uint64_t>(collective_timeout().count()) * 1000000ull;
  TD_CUDA_CHECK(oneshot::launch(a, stream));
}

void OneShotAllReduce::abort() {
  reinterpret_cast<volatile int*>(host_words_)[0] = 1;
}

std::string OneShotAllReduce::failure() const {
  const int s = reinterpret_cast<volatile int*>(host_words_)[1];
  if (s == 0) return {};
  if (s == oneshot::kAborted) return "the one-shot all-reduce was aborted";
  if ((s & ~0xffff) == oneshot::kTimedOut)
    return fmt::format("the one-shot all-reduce timed out after {} s waiting for rank {}",
                       collective_timeout().count() / 1000.0, s & 0xffff);
  return fmt::format("the one-shot all-reduce failed (status {:#x})", s);
}

}  // namespace tandem
