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
  EXPECT_GT(resident_anon_bytes(), 0);
  std::vector<char> block(64 * MiB, 1);  // touched: resident
  EXPECT_GE(resident_anon_bytes(), 64 * MiB) << static_cast<int>(block[12345]);
  trim_heap();
}

// The trimmer against a simulated process: resident memory is whatever the test sets, and a trim
// brings it down to what the test says is still in use.
TEST(MemoryPolicy, TrimmerFollowsTheReferences) {
  std::atomic<int64_t> resident{300 * MiB}, in_use{300 * MiB};
  std::atomic<bool> idle{false};
  std::atomic<int> trims{0}, reads{0};
  TrimPolicy p;
  p.period = std::chrono::milliseconds(5);
  TrimHooks hooks{[&] {
                    ++reads;
                    return resident.load();
                  },
                  [&] {
                    resident = in_use.load();
                    ++trims;
                  }};
  MemoryTrimmer trimmer([&] { return idle.load(); }, p, hooks);
  // Lets the trimmer look a few times at the current value.
  const auto settle = [&] {
    const int r = reads;
    for (int i = 0; i < 1000 && reads < r + 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  };
  const auto wait_for = [&](int n) {
    for (int i = 0; i < 1000 && trims < n; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    settle();
    return trims.load();
  };
  settle();
  // Growth under the busy threshold with requests in flight: nothing.
  resident = 500 * MiB;
  settle();
  EXPECT_EQ(trims, 0);
  // 256 MiB above the start: trimmed even though busy; 500 MiB stays in use.
  in_use = 500 * MiB;
  resident = 556 * MiB;
  EXPECT_EQ(wait_for(1), 1);
  EXPECT_EQ(trimmer.trims(), 1);
  // Once idle, growth is judged against the last idle baseline (300), not the busy trim's 500.
  in_use = 310 * MiB;
  idle = true;
  EXPECT_EQ(wait_for(2), 2);
  EXPECT_EQ(resident, 310 * MiB);
  // Memory that stays in use is not trimmed again, and growth under 16 MiB is left alone.
  resident = 325 * MiB;
  settle();
  EXPECT_EQ(trims, 2);
  // Memory given back by itself lowers the baseline: growth from the low point counts.
  resident = 200 * MiB;
  settle();
  in_use = 200 * MiB;
  resident = 216 * MiB;
  EXPECT_EQ(wait_for(3), 3);
  EXPECT_EQ(trimmer.trims(), 3);
}

}  // namespace
}  // namespace tandem::server
