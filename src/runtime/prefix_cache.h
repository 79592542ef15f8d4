// A page-granular prefix cache. A full page of tokens is identified by the chain of its token
// contents from the start of the sequence (a hash of the page's tokens and its parent's key, with
// the tokens stored to rule out collisions). A cached page holds one reference in the page
// allocator; requests that reuse it take more. Pages nobody else holds are evicted least
// recently used first (deepest first among equals), so a chain loses its tail before its head.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "runtime/page_allocator.h"

namespace tandem {

class PrefixCache {
 public:
  PrefixCache(PageAllocator& pages, int64_t page_size) : pages_(pages), page_size_(page_size) {}

  // The longest run of cached full pages that prefixes tokens[0, limit). Each returned page is
  // retained for the caller (release it like any other page). draft_pages (if given): how many
  // of the returned pages, from the first, also hold the MTP draft's KV.
  std::vector<int32_t> match(const std::vector<int32_t>& tokens, int64_t limit,
                             int64_t* draft_pages = nullptr);
  // Offers the full pages of a sequence whose KV covers tokens[0, computed) and whose draft KV
  // covers tokens[0, draft_computed) (an adaptive-depth engine's draft may lag its target).
  // Pages already cached under the same key are skipped, except that a cached page this
  // sequence shares gains its draft flag once the sequence's draft has covered it; new pages are
  // retained by the cache.
  void insert(const std::vector<int32_t>& tokens, int64_t computed,
              const std::vector<int32_t>& pages, int64_t draft_computed);
  // Frees cached pages that nobody else holds until `want` pages are free or none are left.
  // Returns the number of pages freed.
  int64_t evict(int64_t want);
  // Drops every entry (pages still held by requests stay allocated to them).
  void clear();

  int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  // Cached pages held by nobody else: what evict() could free.
  int64_t evictable() const;

 private:
  struct Entry {
    int32_t page;
    uint64_t parent;
    std::vector<int32_t> tokens;
    uint64_t last_use;
    int64_t depth;
    bool draft;  // the page's draft KV is written too
  };
  uint64_t key(uint64_t parent, const int32_t* tokens) const;

  PageAllocator& pages_;
  int64_t page_size_;
  std::unordered_map<uint64_t, Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace tandem
