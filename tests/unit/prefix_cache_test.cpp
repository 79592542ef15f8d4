// Prefix cache bookkeeping, on the host alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "runtime/prefix_cache.h"

namespace tandem {
namespace {

std::vector<int32_t> seq(int n, int base = 0) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(base + i);
  return v;
}

TEST(PrefixCache, MatchesFullPagesOfASharedPrefixOnly) {
  PageAllocator a(16);
  PrefixCache c(a, 4);
  std::vector<int32_t> pages;
  ASSERT_TRUE(a.allocate(3, pages));
  const auto toks = seq(11);
  c.insert(toks, 11, pages, 11);  // two full pages; the third (3 tokens) is not cached
  EXPECT_EQ(c.size(), 2);
  a.release(pages);  // the request finishes
  EXPECT_EQ(a.num_free(), 16 - 2);
  auto other = seq(11);
  other[9] = 99;  // diverges inside page 2: both full pages still match
  auto m = c.match(other, 10);
  EXPECT_EQ(m, (std::vector<int32_t>{pages[0], pages[1]}));
  EXPECT_EQ(a.refcount(pages[0]), 2);
  a.release(m);
  other[5] = 77;  // diverges in page 1: only page 0 matches
  m = c.match(other, 10);
  EXPECT_EQ(m.size(), 1u);
  a.release(m);
  EXPECT_TRUE(c.match(other, 3).empty());  // the limit leaves less than a page
}

// An adaptive-depth engine's draft may lag its target: a page is marked as holding draft KV only
// when the draft covered all of it, a match counts those pages from the first on, and a cached
// page gains the mark only from a sequence that holds that very page.
TEST(PrefixCache, CountsThePagesThatHoldDraftKvFromTheFirst) {
  PageAllocator a(16);
  PrefixCache c(a, 4);
  std::vector<int32_t> pages;
  ASSERT_TRUE(a.allocate(3, pages));
  const auto toks = seq(12);
  c.insert(toks, 12, pages, 7);  // the draft covered page 0 and part of page 1
  a.release(pages);
  int64_t draft = -1;
  auto m = c.match(toks, 12, &draft);
  EXPECT_EQ(m.size(), 3u);
  EXPECT_EQ(draft, 1);
  // The same pages, now with the draft caught up to page 2 but not page 1's end: a gap ends the
  // count even though page 2 is marked.
  c.insert(toks, 12, m, 6);
  auto m2 = c.match(toks, 12, &draft);
  EXPECT_EQ(draft, 1);
  a.release(m2);
  c.insert(toks, 12, m, 12);  // the holder's draft covered everything
  m2 = c.match(toks, 12, &draft);
  EXPECT_EQ(draft, 3);
  a.release(m2);
  a.release(m);
  // Another sequence with the same tokens in pages of its own cannot vouch for the cached ones.
  PrefixCache c2(a, 4);
  std::vector<int32_t> first, second;
  ASSERT_TRUE(a.allocate(2, first));
  ASSERT_TRUE(a.allocate(2, second));
  c2.insert(toks, 8, first, 0);
  c2.insert(toks, 8, second, 8);
  m = c2.match(toks, 8, &draft);
  EXPECT_EQ(m, first);
  EXPECT_EQ(draft, 0);
  a.release(m);
  a.release(first);
  a.release(second);
  c2.clear();
  c.clear();
  EXPECT_EQ(a.num_free(), 16);
}

TEST(PrefixCache, EvictsLeastRecentlyUsedUnheldPagesTailFirst) {
  PageAllocator a(6);
  PrefixCache c(a, 2);
  std::vector<int32_t> p1, p2;
  ASSERT_TRUE(a.allocate(3, p1));
  c.insert(seq(6), 6, p1, 6);
  a.release(p1);
  ASSERT_TRUE(a.allocate(3, p2));
  c.insert(seq(6, 100), 6, p2, 6);
  a.release(p2);
  EXPECT_EQ(a.num_free(), 0);
  auto held = c.match(seq(6, 100), 6);  // the second chain is in use and recent
  EXPECT_EQ(c.evictable(), 3);
  EXPECT_EQ(c.evict(2), 2);
  EXPECT_EQ(a.num_free(), 2);
  // The first chain lost its tail first: its head still matches.
  auto m = c.match(seq(6), 6);
  EXPECT_EQ(m.size(), 1u);
  a.release(m);
  a.release(held);
  c.clear();
  EXPECT_EQ(a.num_free(), 6);
}

// evictable() is kept as holds come and go (the engine reads it every step); it must always equal
// the count a walk over the cache gives, through random requests that share, reuse, finish and
// evict, and flushes.
TEST(PrefixCache, EvictableCountFollowsEveryHold) {
  PageAllocator a(64);
  PrefixCache c(a, 2);
  Rng rng(5);
  std::vector<std::vector<int32_t>> held;  // pages of the live requests
  for (int step = 0; step < 3000; ++step) {
    const uint64_t op = rng.next_u64() % 10;
    if (op < 5) {  // a request: a prompt from one of 6 families, reusing what is cached
      const int base = static_cast<int>(rng.next_u64() % 6) * 1000;
      const int len = 2 + static_cast<int>(rng.next_u64() % 10);
      const auto toks = seq(len, base);
      std::vector<int32_t> pages = c.match(toks, len);
      const int64_t need = (len + 1) / 2 - static_cast<int64_t>(pages.size());
      if (a.num_free() < need) c.evict(need);
      if (!a.allocate(need, pages)) {
        a.release(pages);
        continue;
      }
      c.insert(toks, len, pages, len);
      held.push_back(pages);
    } else if (op < 9 && !held.empty()) {  // one finishes
      const size_t i = rng.next_u64() % held.size();
      a.release(held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    } else if (op == 9 && rng.next_u64() % 20 == 0) {
      c.clear();
    }
    // The brute-force count: cached pages that only the cache holds.
    int64_t alone = 0;
    for (int32_t p = 0; p < a.num_pages(); ++p) {
      if (a.refcount(p) != 1) continue;
      bool by_request = false;
      for (const auto& h : held) by_request |= std::find(h.begin(), h.end(), p) != h.end();
      alone += !by_request;
    }
    ASSERT_EQ(c.evictable(), alone) << "step " << step;
  }
}

}  // namespace
}  // namespace tandem
