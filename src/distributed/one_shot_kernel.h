// The one-shot all-reduce kernel (one_shot_kernel.cu) and the layout of the peer-visible buffer
// it works in. Plain types only: the .cu includes this and must not see core headers (fmt).
//
// One launch does the whole all-reduce: each block copies its share of x into this rank's
// buffer, meets the same block of every other rank at a flag barrier, then reads that share
// from every rank's buffer and sums it in rank order into x. Every rank adds the same values in
// the same order, so every rank ends with the same bits. Nothing is allocated and nothing waits
// on the host, so the launch can be captured into a CUDA graph; the call count lives on the
// device (the per-block epochs), so a replayed graph keeps the protocol in step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tandem::oneshot {

constexpr int kMaxRanks = 8;
// Blocks per launch, the same for every size: every call runs every block, so the per-block
// epochs stay equal and every block of a call agrees on the data slot it uses (see below).
constexpr int kBlocks = 32;
constexpr int kThreads = 512;

// One rank's buffer, written by this rank (data, epochs) and by its peers (flags):
//   flags  u32 [kBlocks][kMaxRanks]  flags[b][r]: the last epoch block b of rank r reached
//   epochs u32 [kBlocks]             calls this rank has made, per block
//   data   u8  [2][slot_bytes]       the inputs of the calls of even / odd epoch
// Two data slots: a rank may be one call ahead of a peer that is still reading the previous
// call's inputs; it can never be two ahead (it would have needed that peer at the barrier of
// the call in between), so two slots are never written while read.
constexpr size_t kFlagsOffset = 0;
constexpr size_t kEpochsOffset = kFlagsOffset + sizeof(uint32_t) * kBlocks * kMaxRanks;
constexpr size_t kDataOffset = 4096;
static_assert(kEpochsOffset + sizeof(uint32_t) * kBlocks <= kDataOffset, "layout overlaps");
inline size_t buffer_bytes(size_t slot_bytes) {
  return kDataOffset + 2 * slot_bytes;
}

enum class DType : int { F32, BF16 };

// What the kernel writes to Args::status when it gives up waiting (0 while all is well).
constexpr int kTimedOut = 1 << 16;  // | the rank it was waiting for
constexpr int kAborted = 2 << 16;

struct Args {
  char* bufs[kMaxRanks];  // every rank's buffer as this process sees it; bufs[rank] is its own
  int rank = 0, world = 1;
  void* x = nullptr;  // [n] elements of dtype, contiguous; summed in place
  int64_t n = 0;
  DType dtype = DType::F32;
  size_t slot_bytes = 0;                // >= n elements rounded up to 16 bytes
  const volatile int* abort = nullptr;  // host-mapped: nonzero makes waiting blocks give up
  volatile int* status = nullptr;       // host-mapped: kTimedOut | rank or kAborted
  uint64_t timeout_ns = 0;              // how long a block waits for a peer before giving up
};

// Enqueues one all-reduce on `stream`. Returns the launch's error (cudaSuccess once queued).
cudaError_t launch(const Args& a, cudaStream_t stream);

}  // namespace tandem::oneshot
