// The CUDA backend's collectives: NCCL, plus a one-shot kernel for small all-reduces
// (one_shot_all_reduce.h), both enqueued on the backend's current stream so that a forward
// captured into a CUDA graph captures them too.
//
//   all_reduce_sum   bf16 / f32, in place. Up to one_shot_max_bytes: the one-shot kernel (sums in
//                    rank order, f32 accumulation); above: ncclAllReduce. Both give every rank the
//                    same bits, but not the same bits as each other: a run that must not depend
//                    on batch size (deterministic mode) should keep every all-reduce on one path
//                    (one_shot_max_bytes = 0 for NCCL only, or a threshold above the largest).
//                    World 1: nothing to do.
//   all_gather_cols  any NCCL dtype: ncclAllGather into a [world, R, C] scratch from the
//                    workspace, then one 2-D copy per rank into [R, world * C] (R = 1: straight
//                    into out).
//
// Failures. A collective whose peer died or hangs never completes, and the thread waiting for
// it (a synchronize after the step) never returns. A watchdog thread (collective_watchdog.h)
// watches eagerly enqueued collectives against collective_timeout(), NCCL's asynchronous error
// and the one-shot kernel's own timeout (which also covers graph replays). On the first
// failure, or on abort(why) from outside (e.g. the process group saw a peer disconnect), it
//   1. makes the one-shot kernels give up and calls ncclCommAbort, which ends NCCL's kernels,
//      so the stuck synchronize returns;
//   2. calls the on_failure callback, from the watchdog thread, with "rank R: <what>" (wire it
//      to stop the server: the model's outputs are garbage from here on);
//   3. makes every later call on this object, and check(), throw PeerError with that message
//      from the caller's thread.
// An NCCL collective inside a graph replay whose peer silently hangs is only caught by NCCL's
// own error or by abort(): the runtime should call check() after each step and abort() when
// its process group reports a peer gone.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "distributed/process_group.h"
#include "ops/collectives.h"

namespace tandem {

class CollectiveWatchdog;
class OneShotAllReduce;

struct NcclOptions {
  // all_reduce_sum's one-shot threshold in bytes (0: NCCL only); TANDEM_ONE_SHOT_MAX_BYTES
  // overrides it. Must be the same on every rank (checked at construction). 256 KiB covers a
  // decode step's hidden states (12-48 KB) with room for verify batches; above, one-shot reads
  // world times the message per rank while NCCL's ring moves about twice it, so NCCL wins on
  // bandwidth. Not tuned on NVLink yet: see docs/parallelism.md.
  size_t one_shot_max_bytes = 256 << 10;
  // Start the watchdog thread (tests that drive failures by hand may turn it off).
  bool watchdog = true;
};

class NcclCollectives final : public Collectives {
 public:
  // Collective over pg: every rank constructs it for the CUDA device that holds its tensors.
  // Rank 0 makes the NCCL id and broadcasts it through pg; then ncclCommInitRank on `device`.
  NcclCollectives(ProcessGroup& pg, Device device, NcclOptions o = {});
  ~NcclCollectives() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void all_reduce_sum(Tensor& x) override;
  void all_gather_cols(Workspace& ws, const Tensor& in, Tensor& out) override;

  // The two all-reduce paths by name, for tests and benchmarks (all_reduce_sum picks by size).
  void all_reduce_nccl(Tensor& x);
  void all_reduce_one_shot(Tensor& x);
  bool one_shot_available() const;
  size_t one_shot_max_bytes() const { return one_shot_max_bytes_; }

  // Called once, from the watchdog thread (or abort()'s caller), after the teardown above.
  // Set it before the first collective.
  void set_on_failure(std::function<void(const std::string& why)> cb) override {
    on_failure_ = std::move(cb);
  }
  // Tears down as on a failure (idempotent, any thread). `why` says what happened elsewhere.
  void abort(const std::string& why) override;
  // Throws PeerError once a failure happened.
  void check() const override;

 private:
  class Call;
  void fail(const std::string& why);
  // The watchdog's own checks: a reason once something failed, else empty.
  std::string probe();
  // After enqueuing op on the current stream: hands it to the watchdog (eager calls only).
  void watch(const char* op, int64_t bytes);

  int rank_, world_;
  Device device_;
  size_t one_shot_max_bytes_;
  std::atomic<void*> comm_{nullptr};  // ncclComm_t; null once aborted
  // Held while a call uses comm_, and by the abort that frees it. A call stuck inside NCCL
  // (which connects to peers lazily, in the first collective) holds it forever: the watchdog
  // sees that through call_started_ns_ and aborts without it, which NCCL's abort flag allows.
  std::timed_mutex comm_mu_;
  std::atomic<int64_t> call_started_ns_{0};  // steady clock; 0 while no NCCL call is running
  std::atomic<const char*> call_op_{""};
  std::unique_ptr<OneShotAllReduce> one_shot_;
  std::function<void(const std::string&)> on_failure_;
  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string failure_;
  std::unique_ptr<CollectiveWatchdog> watchdog_;  // last: stopped first
};

}  // namespace tandem
