// The one-shot all-reduce for small messages (a decode step's hidden states, 12-48 KB): one
// kernel launch instead of NCCL's ring steps, which at these sizes are all latency. Every rank
// owns a device buffer that every other rank maps (CUDA IPC handles exchanged through the
// ProcessGroup, at construction); the kernel and its flag protocol are in one_shot_kernel.h.
//
// Needs every rank on one host (IPC) and at most oneshot::kMaxRanks ranks; available() says
// whether setup succeeded on every rank (all ranks agree, so they all pick the same path).
// Two ranks may share a GPU (separate processes): NCCL refuses that, IPC does not, which is how
// the tests run it on one card.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/tensor.h"
#include "distributed/process_group.h"

namespace tandem {

class OneShotAllReduce {
 public:
  // Collective over pg: every rank constructs it, with the same max_bytes (checked), for the
  // CUDA device `device` that holds its tensors.
  OneShotAllReduce(ProcessGroup& pg, int device, size_t max_bytes);
  ~OneShotAllReduce();
  OneShotAllReduce(const OneShotAllReduce&) = delete;
  OneShotAllReduce& operator=(const OneShotAllReduce&) = delete;

  // False when some rank could not map the others' buffers (another host, too many ranks):
  // then run() must not be called, on any rank.
  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  size_t max_bytes() const { return max_bytes_; }

  // x = the sum of x over the ranks, in place, enqueued on `stream` (capturable: no allocation,
  // no host synchronization). x: contiguous bf16 or f32 on this rank's device, at most
  // max_bytes. Every rank must make the same sequence of calls with the same sizes.
  void run(Tensor& x, cudaStream_t stream);

  // Makes every waiting and future launch give up (x is left unfinished): shutdown, or a
  // failure seen elsewhere. Safe from any thread.
  void abort();
  // Empty while all is well; once a launch gave up, why ("timed out waiting for rank 1").
  std::string failure() const;

 private:
  int rank_, world_, device_;
  size_t max_bytes_, slot_bytes_;
  bool available_ = false;
  std::string reason_;
  char* own_ = nullptr;        // this rank's buffer [oneshot::buffer_bytes(slot_bytes_)]
  std::vector<char*> bufs_;    // [world] every rank's buffer as mapped here; [rank] = own_
  std::vector<bool> opened_;   // [world] which of bufs_ came from cudaIpcOpenMemHandle
  int* host_words_ = nullptr;  // pinned, mapped [2]: [0] abort, [1] status (see one_shot_kernel.h)
  int* dev_words_ = nullptr;   // the same two words as the device addresses them
};

}  // namespace tandem
