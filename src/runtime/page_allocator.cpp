#include "runtime/page_allocator.h"

#include "core/error.h"

namespace tandem {

PageAllocator::PageAllocator(int64_t num_pages)
    : refs_(static_cast<size_t>(num_pages), 0), cached_(static_cast<size_t>(num_pages), 0) {
  TD_CHECK(num_pages > 0, "page allocator needs pages, got {}", num_pages);
  free_.reserve(static_cast<size_t>(num_pages));
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

bool PageAllocator::allocate(int64_t n, std::vector<int32_t>& out) {
  if (n > num_free()) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    refs_[static_cast<size_t>(p)] = 1;
    out.push_back(p);
  }
  return true;
}

void PageAllocator::retain(int32_t page) {
  TD_CHECK(page >= 0 && page < num_pages() && refs_[static_cast<size_t>(page)] > 0,
           "retain of page {} that is not allocated", page);
  const size_t i = static_cast<size_t>(page);
  if (cached_[i] && refs_[i] == 1) --cached_alone_;
  ++refs_[i];
}

void PageAllocator::release(int32_t page) {
  TD_CHECK(page >= 0 && page < num_pages() && refs_[static_cast<size_t>(page)] > 0,
           "release of page {} that is not allocated (double free?)", page);
  const size_t i = static_cast<size_t>(page);
  TD_CHECK(!(cached_[i] && refs_[i] == 1),
           "release of the prefix cache's own hold on page {} "
           "while it is still marked cached",
           page);
  if (--refs_[i] == 0) free_.push_back(page);
  if (cached_[i] && refs_[i] == 1) ++cached_alone_;
}

void PageAllocator::mark_cached(int32_t page, bool cached) {
  TD_CHECK(page >= 0 && page < num_pages() && refs_[static_cast<size_t>(page)] > 0,
           "mark_cached of page {} that is not allocated", page);
  const size_t i = static_cast<size_t>(page);
  if (static_cast<bool>(cached_[i]) == cached) return;
  cached_[i] = cached;
  if (refs_[i] == 1) cached_alone_ += cached ? 1 : -1;
}

void PageAllocator::release(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) release(p);
}

}  // namespace tandem
