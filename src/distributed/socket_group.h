// One process per rank, connected through rank 0 over TCP (a star): rank 0 listens on
// --dist-init-addr, every other rank connects and says who it is. Broadcasts go out from rank 0;
// an all-gather collects at rank 0 (in rank order) and goes back out. Small messages (a step's
// batch, the NCCL id, a CPU model's activations), so the star's extra hop is cheap next to the
// simplicity; GPU tensors never travel here (NCCL carries them).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "distributed/process_group.h"
#include "distributed/tcp.h"

namespace tandem {

class SocketGroup final : public ProcessGroup {
 public:
  // Rank 0 listens on addr (or takes `listener`, already bound, e.g. to a free port it handed
  // to the ranks it spawned) and waits for world - 1 ranks; the others connect. Throws PeerError
  // naming the address and the missing ranks when join_timeout passes.
  // while_waiting (rank 0): called a few times a second while ranks are missing; it may throw
  // to give up early (a rank this node spawned has already exited).
  static std::unique_ptr<SocketGroup> join(int rank, int world, const tcp::Address& addr,
                                           std::chrono::milliseconds join_timeout,
                                           tcp::Socket listener = {},
                                           const std::function<void()>& while_waiting = {});
  ~SocketGroup() override;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  void broadcast(Bytes& bytes) override;
  std::vector<Bytes> all_gather(const Bytes& mine) override;
  void check_peers() override;
  void abort(const std::string& why) override;

 private:
  SocketGroup(int rank, int world) : rank_(rank), world_(world) {}
  void throw_if_aborted() const;
  std::string peer_name(int r) const { return fmt::format("rank {}", r); }

  int rank_, world_;
  std::vector<tcp::Socket> peers_;  // rank 0: [world] (index = rank, 0 unused); others: [1]
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mu_;  // guards abort_reason_ (abort() may come from another thread)
  std::string abort_reason_;
};

}  // namespace tandem
