// Prefix cache bookkeeping, on the host alone.
#include <gtest/gtest.h>

#include <vector>

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
  c.insert(toks, 11, pages);  // two full pages; the third (3 tokens) is not cached
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

TEST(PrefixCache, EvictsLeastRecentlyUsedUnheldPagesTailFirst) {
  PageAllocator a(6);
  PrefixCache c(a, 2);
  std::vector<int32_t> p1, p2;
  ASSERT_TRUE(a.allocate(3, p1));
  c.insert(seq(6), 6, p1);
  a.release(p1);
  ASSERT_TRUE(a.allocate(3, p2));
  c.insert(seq(6, 100), 6, p2);
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

}  // namespace
}  // namespace tandem
