#include "server/memory_policy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace tandem::server {
namespace {

constexpr int64_t MiB = int64_t{1} << 20;

TEST(MemoryPolicy, TrimsAfterGrowthWhenIdleOrWhenGrowthIsLarge) {
  const TrimPolicy p;  // 16 MiB idle, 256 MiB busy
  const int64_t base = 300 * MiB;
  const TrimReference ref{base, base};
  EXPECT_FALSE(should_trim(p, base, ref, true));
  EXPECT_FALSE(should_trim(p, base + 16 * MiB - 1, ref, true));
  EXPECT_TRUE(should_trim(p, base + 16 * MiB, ref, true));
  EXPECT_FALSE(should_trim(p, base + 255 * MiB, ref, false));  // requests in flight: wait
  EXPECT_TRUE(should_trim(p, base + 256 * MiB, ref, false));
  EXPECT_FALSE(should_trim(p, base - 100 * MiB, ref, true));  // shrank by itself
  EXPECT_FALSE(should_trim(p, -1, ref, true));                // statm unreadable
  EXPECT_FALSE(should_trim(p, base, TrimReference{}, true));
  // After a trim under load left 550 MiB in use, the idle baseline still decides once idle.
  const TrimReference after_busy{base, 550 * MiB};
  EXPECT_FALSE(should_trim(p, 400 * MiB, after_busy, false));
  EXPECT_TRUE(should_trim(p, 400 * MiB, after_busy, true));
  EXPECT_TRUE(should_trim(p, 806 * MiB, after_busy, false));
}

TEST(MemoryPolicy, ResidentMemoryIsReadable) {
  const int64_t r = resident_anon_bytes();
  EXPECT_GT(r, 0);
  // Touching 64 MiB shows up.
  std::vector<char> block(64 * MiB, 1);
  EXPECT_GE(resident_anon_bytes(), r + 60 * MiB) << static_cast<int>(block[12345]);
}

// The trimmer trims after growth once no request is in flight, not while requests are, and
// not again for memory that is still in use.
TEST(MemoryPolicy, TrimmerTrimsWhenIdleAndOnce) {
  std::atomic<bool> idle{false};
  TrimPolicy p;
  p.period = std::chrono::milliseconds(20);
  MemoryTrimmer trimmer([&] { return idle.load(); }, p);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<char> held(64 * MiB, 1);  // 64 MiB in use: above the idle threshold
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(trimmer.trims(), 0);  // requests in flight, and 64 MiB is under the busy threshold
  idle = true;
  for (int i = 0; i < 200 && trimmer.trims() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(trimmer.trims(), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(trimmer.trims(), 1) << static_cast<int>(held[4096]);  // what is in use stays
}

}  // namespace
}  // namespace tandem::server
