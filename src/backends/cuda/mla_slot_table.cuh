// The key slots of one (token, split) of the 64-heads-per-block mma.sync MLA decode kernel
// (attention_wide.cu): looked up a span of 32 chunks of 32 keys at a time
// into one of two shared tables (the next span's is filled while this one's chunks are copied),
// with one bit per key saying whether it exists, so no chunk waits on a top-k or page-table load.
//
// Span s's entry e = r * 256 + tid is key e % 32 of chunk e / 32 (= 8 r + warp), so a warp's
// ballot is that chunk's key bits. A fill takes three steps, each in its own chunk iteration of
// the caller so no warp waits on a load: the key positions (keys), their pages (pages), the
// slots and bits into shared memory (store). Span s's table (s % 2) is stored in iteration
// 32 s - 30 (before the loop for span 0), read by the copies of its chunks (iterations 32 s - 2
// .. 32 s + 29) and by their math (32 s .. 32 s + 31), and refilled in iteration 32 s + 34,
// barriers after the last of those.
#pragma once

#include "backends/cuda/common.cuh"

namespace tandem::cuda::k {

struct MlaSlotTable {
  static constexpr int kSpan = 32;      // chunks per table
  static constexpr int kChunk = 32;     // keys per chunk
  static constexpr int kThreads = 256;  // of the block; each thread fills 4 entries
  static_assert(kSpan * kChunk == 4 * kThreads);
  static constexpr size_t kSmemBytes = 2 * kSpan * kChunk * 4 + 2 * kSpan * 4;

  int32_t* table;            // [2][kSpan * kChunk] slot, -1 = none
  uint32_t* kmask;           // [2][kSpan] key bits
  const int32_t* topk_row;   // the token's top-k row, or null (dense: the entries are positions)
  const int32_t* pages_row;  // the sequence's page-table row
  int32_t page_size;
  int tid, lane, warp;
  int64_t pos, it0, it1;  // the token's position; its split's entries [it0, it1)
  int64_t kp[4] = {};
  int32_t pg[4] = {};

  // smem: the caller's kSmemBytes for the tables (4-byte aligned).
  __device__ MlaSlotTable(const MlaDecodeParams& p, void* smem, int t, int64_t pos_, int64_t it0_,
                          int64_t it1_)
      : table(static_cast<int32_t*>(smem)),
        kmask(reinterpret_cast<uint32_t*>(table + 2 * kSpan * kChunk)),
        topk_row(p.topk ? p.topk + t * p.topk_k : nullptr),
        pages_row(p.meta.page_table + p.meta.token_seq[t] * p.meta.max_pages),
        page_size(p.meta.page_size),
        tid(static_cast<int>(threadIdx.x)),
        lane(tid & 31),
        warp(tid >> 5),
        pos(pos_),
        it0(it0_),
        it1(it1_) {}

  __device__ void keys(int s) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int64_t it = it0 + static_cast<int64_t>(s) * kSpan * kChunk + r * kThreads + tid;
      kp[r] = it >= it1 ? -1 : topk_row ? topk_row[it] : it;
    }
  }
  __device__ void pages() {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      if (kp[r] < 0 || kp[r] > pos) kp[r] = -1;
      pg[r] = kp[r] >= 0 ? pages_row[kp[r] / page_size] : 0;
    }
  }
  __device__ void store(int s) {
    int32_t* tab = table + (s & 1) * kSpan * kChunk;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int32_t sl =
          kp[r] >= 0
              ? static_cast<int32_t>(static_cast<int64_t>(pg[r]) * page_size + kp[r] % page_size)
              : -1;
      tab[r * kThreads + tid] = sl;
      const uint32_t bits = __ballot_sync(0xffffffffu, sl >= 0);
      if (lane == 0) kmask[(s & 1) * kSpan + 8 * r + warp] = bits;
    }
  }
  // Span 0, before the loop (the caller's barrier follows).
  __device__ void fill_first() {
    keys(0);
    pages();
    store(0);
  }
  // The next span's lookups, in iterations 32 s, 32 s + 1 and 32 s + 2 of span s. keys and
  // pages go before the iteration's math (their loads land during it), store after it.
  __device__ void before_math(int i, int nchunks) {
    const int f = stage(i, nchunks);
    if (f == 0) keys(i / kSpan + 1);
    if (f == 1) pages();
  }
  __device__ void after_math(int i, int nchunks) {
    if (stage(i, nchunks) == 2) store(i / kSpan + 1);
  }
  __device__ int32_t slot(int ci, int j) const {
    return table[((ci / kSpan) & 1) * kSpan * kChunk + (ci % kSpan) * kChunk + j];
  }
  __device__ uint32_t bits(int ci) const {
    return kmask[((ci / kSpan) & 1) * kSpan + ci % kSpan];
  }

 private:
  __device__ static int stage(int i, int nchunks) {
    return i % kSpan < 3 && i - i % kSpan + kSpan < nchunks ? i % kSpan : -1;
  }
};

}  // namespace tandem::cuda::k
