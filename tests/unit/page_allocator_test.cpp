#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "runtime/page_allocator.h"

namespace tandem {
namespace {

TEST(PageAllocator, AllocatesDistinctPagesAndRefusesWhenShort) {
  PageAllocator a(8);
  std::vector<int32_t> p;
  ASSERT_TRUE(a.allocate(5, p));
  EXPECT_EQ(std::set<int32_t>(p.begin(), p.end()).size(), 5u);
  EXPECT_EQ(a.num_free(), 3);
  std::vector<int32_t> q;
  EXPECT_FALSE(a.allocate(4, q));
  EXPECT_TRUE(q.empty());  // all or nothing
  EXPECT_EQ(a.num_free(), 3);
  a.release(p);
  EXPECT_EQ(a.num_free(), 8);
}

TEST(PageAllocator, RefcountsShareAndFreeOnLastRelease) {
  PageAllocator a(4);
  std::vector<int32_t> p;
  ASSERT_TRUE(a.allocate(1, p));
  a.retain(p[0]);
  EXPECT_EQ(a.refcount(p[0]), 2);
  a.release(p[0]);
  EXPECT_EQ(a.num_free(), 3);
  a.release(p[0]);
  EXPECT_EQ(a.num_free(), 4);
  EXPECT_THROW(a.release(p[0]), Error);  // double free is caught
  EXPECT_THROW(a.retain(p[0]), Error);
}

TEST(PageAllocator, RandomisedInvariant) {
  PageAllocator a(64);
  std::vector<std::vector<int32_t>> held;
  uint64_t s = 1;
  for (int step = 0; step < 5000; ++step) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    if ((s >> 33) % 2 == 0 || held.empty()) {
      std::vector<int32_t> p;
      if (a.allocate(static_cast<int64_t>((s >> 40) % 5), p)) held.push_back(p);
    } else {
      const size_t i = (s >> 40) % held.size();
      a.release(held[i]);
      held.erase(held.begin() + static_cast<long>(i));
    }
    std::set<int32_t> all;
    size_t n = 0;
    for (const auto& h : held) {
      all.insert(h.begin(), h.end());
      n += h.size();
    }
    ASSERT_EQ(all.size(), n);  // no page held twice
    ASSERT_EQ(a.num_free() + static_cast<int64_t>(n), 64);
  }
}

}  // namespace
}  // namespace tandem
