#include "runtime/prefix_cache.h"

#include <algorithm>

namespace tandem {

namespace {
constexpr uint64_t kRoot = 0x9e3779b97f4a7c15ull;
}

uint64_t PrefixCache::key(uint64_t parent, const int32_t* tokens) const {
  // FNV-1a over the parent key and the page's tokens; collisions are caught by comparing tokens.
  uint64_t h = 1469598103934665603ull ^ parent;
  for (int64_t i = 0; i < page_size_; ++i) {
    uint32_t t = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b, t >>= 8) h = (h ^ (t & 0xff)) * 1099511628211ull;
  }
  return h ? h : 1;
}

std::vector<int32_t> PrefixCache::match(const std::vector<int32_t>& tokens, int64_t limit,
                                        int64_t* draft_pages) {
  std::vector<int32_t> out;
  bool draft = true;  // every page so far holds draft KV
  if (draft_pages) *draft_pages = 0;
  const uint64_t now = ++clock_;
  uint64_t parent = kRoot;
  for (int64_t p = 0; (p + 1) * page_size_ <= limit; ++p) {
    const int32_t* t = tokens.data() + p * page_size_;
    const uint64_t k = key(parent, t);
    auto it = entries_.find(k);
    if (it == entries_.end() || it->second.parent != parent ||
        !std::equal(t, t + page_size_, it->second.tokens.begin()))
      break;
    it->second.last_use = now;
    pages_.retain(it->second.page);
    out.push_back(it->second.page);
    draft = draft && it->second.draft;
    if (draft && draft_pages) ++*draft_pages;
    parent = k;
  }
  return out;
}

void PrefixCache::insert(const std::vector<int32_t>& tokens, int64_t computed,
                         const std::vector<int32_t>& pages, int64_t draft_computed) {
  const uint64_t now = ++clock_;
  uint64_t parent = kRoot;
  for (int64_t p = 0; (p + 1) * page_size_ <= computed && p < static_cast<int64_t>(pages.size());
       ++p) {
    const int32_t* t = tokens.data() + p * page_size_;
    const uint64_t k = key(parent, t);
    auto it = entries_.find(k);
    const bool draft = (p + 1) * page_size_ <= draft_computed;
    if (it == entries_.end()) {
      pages_.retain(pages[p]);
      pages_.mark_cached(pages[p], true);
      entries_.emplace(
          k, Entry{pages[p], parent, std::vector<int32_t>(t, t + page_size_), now, p, draft});
    } else if (it->second.parent != parent ||
               !std::equal(t, t + page_size_, it->second.tokens.begin())) {
      break;  // a hash collision: leave the existing chain alone
    } else {
      it->second.last_use = now;
      // Only the sequence that holds the cached page itself has written its draft KV; another
      // page with the same tokens says nothing about it.
      if (draft && it->second.page == pages[p]) it->second.draft = true;
    }
    parent = k;
  }
}

int64_t PrefixCache::evictable() const {
  return pages_.cached_alone();
}

int64_t PrefixCache::evict(int64_t want) {
  if (pages_.num_free() >= want) return 0;
  std::vector<std::pair<std::pair<uint64_t, int64_t>, uint64_t>>
      order;  // ((last_use, -depth), key)
  for (const auto& [k, e] : entries_)
    if (pages_.refcount(e.page) == 1) order.push_back({{e.last_use, -e.depth}, k});
  std::sort(order.begin(), order.end());
  int64_t freed = 0;
  for (const auto& [rank, k] : order) {
    if (pages_.num_free() >= want) break;
    auto it = entries_.find(k);
    pages_.mark_cached(it->second.page, false);
    pages_.release(it->second.page);
    entries_.erase(it);
    ++freed;
  }
  return freed;
}

void PrefixCache::clear() {
  for (const auto& [k, e] : entries_) {
    pages_.mark_cached(e.page, false);
    pages_.release(e.page);
  }
  entries_.clear();
}

}  // namespace tandem
