// Hands out KV-cache pages. Pages are reference-counted so that sequences sharing a cached
// prefix can hold the same pages; a page returns to the free list when its last holder lets go.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tandem {

class PageAllocator {
 public:
  explicit PageAllocator(int64_t num_pages);

  int64_t num_pages() const { return static_cast<int64_t>(refs_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  // n fresh pages with refcount 1, or false (and nothing taken) if fewer than n are free.
  bool allocate(int64_t n, std::vector<int32_t>& out);
  void retain(int32_t page);   // another holder of an allocated page
  void release(int32_t page);  // drop one hold; frees the page at zero
  void release(const std::vector<int32_t>& pages);
  int32_t refcount(int32_t page) const { return refs_.at(static_cast<size_t>(page)); }
  // The prefix cache marks the pages it holds a reference to (before releasing that reference, it
  // unmarks them), so that the pages only it holds, the ones it could evict, are counted as
  // holds come and go instead of by a walk over the cache on every step.
  void mark_cached(int32_t page, bool cached);
  int64_t cached_alone() const { return cached_alone_; }  // marked pages with refcount 1

 private:
  std::vector<int32_t> refs_;
  std::vector<uint8_t> cached_;  // [num_pages] marked by the prefix cache
  int64_t cached_alone_ = 0;
  std::vector<int32_t> free_;  // a stack: recently freed pages are reused first (warm in cache)
};

}  // namespace tandem
