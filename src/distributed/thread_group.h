// Ranks as threads of one process: ThreadHub::make(world) gives each thread its ProcessGroup.
// Messages are exchanged through shared memory under one mutex; every exchange is a barrier.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "distributed/process_group.h"

namespace tandem {

class ThreadHub {
 public:
  // One group per rank; the hub lives as long as any of them.
  static std::vector<std::unique_ptr<ProcessGroup>> make(int world);

  explicit ThreadHub(int world);
  // Deposits rank's bytes and returns every rank's, once all have arrived. kind names the
  // collective ("a broadcast", "an all-gather"): ranks that meet in different ones have parted
  // ways, and every rank gets PeerError saying so instead of the other's bytes.
  std::vector<Bytes> exchange(int rank, const Bytes& mine, bool wait_forever, const char* kind);
  void abort(const std::string& why);
  int world() const { return world_; }

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t round_ = 0;  // completed exchanges
  int arrived_ = 0;
  int departed_ = 0;
  std::vector<Bytes> slots_, result_;
  std::vector<const char*> kinds_;
  std::string aborted_;
};

}  // namespace tandem
