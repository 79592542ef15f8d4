// The ranks of one sharded model and the host messages between them: the step each rank runs
// (rank 0 schedules, the others follow), the NCCL bootstrap id, and the CPU backend's
// collectives. Two implementations: ThreadGroup (ranks as threads of one process, for tests)
// and SocketGroup (one process per rank, TCP through rank 0, within a node or across nodes).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"

namespace tandem {

// A peer that died, left, or did not answer in time. The message names the rank and what was
// waited for; the server stops on it (docs/parallelism.md, "Failures").
class PeerError : public Error {
 public:
  using Error::Error;
};

using Bytes = std::vector<uint8_t>;

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;

  // Rank 0's bytes to every rank: rank 0 passes its message, the others receive into `bytes`.
  // The others wait as long as it takes (an idle server sends nothing); a peer that goes away
  // throws PeerError.
  virtual void broadcast(Bytes& bytes) = 0;
  // Every rank's bytes (any length), in rank order, on every rank. Throws PeerError when a rank
  // does not contribute within the collective timeout.
  virtual std::vector<Bytes> all_gather(const Bytes& mine) = 0;
  // Rank 0, between steps: throws PeerError if a peer has gone away (its connection closed).
  virtual void check_peers() {}
  // Unblocks every pending and future call on this rank with PeerError(why) (shutdown, a
  // failure elsewhere).
  virtual void abort(const std::string& why) = 0;
};

// The timeout of one collective: how long a rank waits for the others inside a step.
std::chrono::milliseconds collective_timeout();
void set_collective_timeout(std::chrono::milliseconds t);

}  // namespace tandem
