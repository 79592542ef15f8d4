// A thread that notices when this rank's GPU collectives stop making progress: a peer died or
// hangs, so a kernel waits forever and the step that launched it never returns. It polls, every
// 100 ms:
//   - the oldest collective enqueued eagerly (enqueued()) that has not completed: past
//     collective_timeout() (process_group.h) it is a failure;
//   - `probe`, the owner's own checks (NCCL's asynchronous error, the one-shot kernel's status);
// and on the first failure calls `on_fail(why)` once, from its thread, then stops polling.
// Collectives replayed inside CUDA graphs are not enqueued one by one, so only the probe covers
// them (the one-shot kernel times itself out on the device; see nccl_collectives.h).
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tandem {

class CollectiveWatchdog {
 public:
  using Probe = std::function<std::string()>;
  using OnFail = std::function<void(const std::string&)>;
  // device: the CUDA device the collectives run on (the thread binds to it).
  CollectiveWatchdog(int device, Probe probe, OnFail on_fail);
  ~CollectiveWatchdog();  // stops the thread (waits at most one poll)

  // Call right after enqueuing a collective on `stream`, never while it is being captured:
  // records an event behind it and watches until that event completes. `op` must be a string
  // literal (kept by pointer); bytes is only for the message.
  void enqueued(cudaStream_t stream, const char* op, int64_t bytes);

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    cudaEvent_t done;
    Clock::time_point since;
    const char* op;
    int64_t bytes;
  };
  void loop();
  // Drops completed entries from the front; a reason when the front is overdue or broken.
  std::string check_pending();

  int device_;
  Probe probe_;
  OnFail on_fail_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::deque<Pending> pending_;     // in enqueue order (one stream: completes in order)
  std::vector<cudaEvent_t> spare_;  // completed events, reused
  std::thread thread_;
};

}  // namespace tandem
