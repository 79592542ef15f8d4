// A fixed pool of worker threads and parallel_for over an index range.
// The CPU backend splits work into contiguous chunks; each index is processed by exactly one
// thread with no cross-thread reduction, so results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace tandem {

// Calls fn(begin, end) on disjoint chunks covering [0, n). Blocks until all chunks finish.
// min_chunk keeps tiny ranges on one thread, where spawning work costs more than it saves.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                  int64_t min_chunk = 1);

// Number of threads parallel_for uses (TANDEM_NUM_THREADS or the hardware count).
int num_threads();
void set_num_threads(int n);

}  // namespace tandem
