// Where this process sits among the ranks of `tandem serve --tp-size N` (docs/parallelism.md):
// one process per rank. The process started on a node is its local rank 0; it spawns the node's
// other ranks as children running this same program with the same flags, plus
// --dist-local-rank i (and, on one node without --dist-init-addr, the loopback port rank 0
// listens on). Global rank 0 serves HTTP and schedules; every other rank follows its steps.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "server/server_args.h"

namespace tandem::server {

struct RankLayout {
  int world = 1;       // --tp-size
  int rank = 0;        // global: node_rank * per_node + local_rank
  int local_rank = 0;  // on this node
  int per_node = 1;    // --tp-size / --nnodes
  int gpu = 0;         // --base-gpu-id + local_rank
  bool distributed() const { return world > 1; }
};
RankLayout rank_layout(const ServerArgs& a);

// The children of one node's launcher. They get SIGKILL if the launcher dies (PR_SET_PDEATHSIG);
// the destructor gives them a few seconds to exit after rank 0 told them to stop, then kills
// them.
class LocalRanks {
 public:
  // argv: this process's command line. extra: flags appended for every child (before its
  // --dist-local-rank).
  LocalRanks(const RankLayout& me, const std::vector<std::string>& argv,
             const std::vector<std::string>& extra);
  ~LocalRanks();
  // Throws PeerError naming the first child that has already exited (before the group formed, a
  // child that failed at start-up: its own error is above in the log).
  void check_alive();
  LocalRanks(const LocalRanks&) = delete;
  LocalRanks& operator=(const LocalRanks&) = delete;

 private:
  std::vector<pid_t> pids_;
  std::vector<bool> reaped_;
};

// This process's command line (from /proc/self/cmdline).
std::vector<std::string> own_command_line();

}  // namespace tandem::server
