#include "distributed/collective_watchdog.h"

#include <fmt/format.h>

#include "backends/cuda/cuda_check.h"
#include "distributed/process_group.h"

namespace tandem {

namespace {
constexpr auto kPoll = std::chrono::milliseconds(100);
}

CollectiveWatchdog::CollectiveWatchdog(int device, Probe probe, OnFail on_fail)
    : device_(device), probe_(std::move(probe)), on_fail_(std::move(on_fail)) {
  thread_ = std::thread([this] { loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  for (const Pending& p : pending_) cudaEventDestroy(p.done);
  for (cudaEvent_t e : spare_) cudaEventDestroy(e);
}

void CollectiveWatchdog::enqueued(cudaStream_t stream, const char* op, int64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  cudaEvent_t e = nullptr;
  if (!spare_.empty()) {
    e = spare_.back();
    spare_.pop_back();
  } else {
    TD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  TD_CUDA_CHECK(cudaEventRecord(e, stream));
  pending_.push_back({e, Clock::now(), op, bytes});
}

std::string CollectiveWatchdog::check_pending() {
  std::lock_guard<std::mutex> l(mu_);
  while (!pending_.empty()) {
    const Pending& p = pending_.front();
    const cudaError_t q = cudaEventQuery(p.done);
    if (q == cudaSuccess) {
      spare_.push_back(p.done);
      pending_.pop_front();
      continue;
    }
    if (q != cudaErrorNotReady)
      return fmt::format("{} of {} bytes failed on the device: {}", p.op, p.bytes,
                         cudaGetErrorString(q));
    const auto waited = Clock::now() - p.since;
    if (waited > collective_timeout())
      return fmt::format(
          "{} of {} bytes has not completed after {:.0f} s (a peer is gone or stuck; the timeout "
          "is collective_timeout())",
          p.op, p.bytes, std::chrono::duration<double>(waited).count());
    break;
  }
  return {};
}

void CollectiveWatchdog::loop() {
  cudaSetDevice(device_);
  // A capture in global mode on another thread forbids "unsafe" CUDA calls on every thread that
  // is not relaxed; this thread's queries must neither fail nor break that capture.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, kPoll, [this] { return stop_; });
    if (stop_) break;
    l.unlock();
    std::string why = probe_ ? probe_() : std::string();
    if (why.empty()) why = check_pending();
    if (!why.empty()) {
      on_fail_(why);
      return;  // one report; the owner has torn the communicator down
    }
    l.lock();
  }
}

}  // namespace tandem
