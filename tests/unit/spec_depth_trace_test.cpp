// TANDEM_SPEC_DEPTH_TRACE: what the adaptive depth policy was asked and shown, one line each, in
// the format the header documents (a replay reads it back), appended across engines.
#include "runtime/spec_depth_trace.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tandem {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

TEST(SpecDepthTrace, OffUnlessTheVariableNamesAFile) {
  ::unsetenv("TANDEM_SPEC_DEPTH_TRACE");
  SpecDepthTrace t(SpecDepthOptions{});
  EXPECT_FALSE(t.on());
  t.choose(1, 2, 3, 4);  // a no-op, not a crash
  ::setenv("TANDEM_SPEC_DEPTH_TRACE", "/nonexistent-dir/trace.txt", 1);
  SpecDepthTrace bad(SpecDepthOptions{});  // reported once, stays off
  EXPECT_FALSE(bad.on());
  ::unsetenv("TANDEM_SPEC_DEPTH_TRACE");
}

TEST(SpecDepthTrace, WritesOneLinePerCallAndAppendsAcrossEngines) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("spec_depth_trace_" + std::to_string(::getpid()) + ".txt"))
                               .string();
  std::filesystem::remove(path);
  ::setenv("TANDEM_SPEC_DEPTH_TRACE", path.c_str(), 1);
  {
    SpecDepthOptions o;
    o.max_depth = 5;
    o.initial_depth = 3;
    o.batch_fill = true;
    o.catch_up_alpha = 0.02;
    SpecDepthTrace t(o);
    ASSERT_TRUE(t.on());
    t.choose(32, 640, 3000, 2, 96);
    t.observe(2, 32, 0.00123456789, 0.0005, 640, {2, 0, 1});
    t.observe(0, 32, 0.0004, 0.0, 0, {});
    t.observe(1, 32, 0.0005, 0.0, 0, {1}, SpecDepthTrace::Step::kForced);
    t.observe(3, 8, 0.0007, 0.0, 0, {3}, SpecDepthTrace::Step::kPinned);
    t.observe(4, 8, 0.0031, 0.0, 0, {0}, SpecDepthTrace::Step::kBuilt);
    t.settle();
    t.prompt_reads(0.002, 512);
    t.prompt_reads(0.002, 0);  // nothing read: no line
    t.finish(96);
    t.change("batch class 32: speculative depth 3 -> 2");
  }
  {
    SpecDepthOptions o;
    o.max_depth = 4;
    o.initial_depth = 0;
    o.adaptive = false;
    o.accept_relax = true;
    SpecDepthTrace second(o);
  }
  ::unsetenv("TANDEM_SPEC_DEPTH_TRACE");
  const std::vector<std::string> l = lines_of(path);
  ASSERT_EQ(l.size(), 12u);
  EXPECT_EQ(l[0], "e 5 3 1 1 1 0.02");  // relaxation is the default
  EXPECT_EQ(l[1], "c 32 640 3000 2 96");
  EXPECT_EQ(l[2], "o 2 32 0.001234568 0.000500000 640 2 0 1");
  EXPECT_EQ(l[3], "o 0 32 0.000400000 0.000000000 0");
  EXPECT_EQ(l[4], "f 1 32 0.000500000 0.000000000 0 1");  // forced: the replay skips it
  EXPECT_EQ(l[5], "p 3 8 0.000700000 0.000000000 0 3");   // pinned: the replay calibrates
  EXPECT_EQ(l[6], "g 4 8 0.003100000 0.000000000 0 0");   // built a graph: overridden
  EXPECT_EQ(l[7], "s");
  EXPECT_EQ(l[8], "r 0.002000000 512");
  EXPECT_EQ(l[9], "x 96");
  EXPECT_EQ(l[10], "# batch class 32: speculative depth 3 -> 2");
  EXPECT_EQ(l[11], "e 4 0 0 0 1 0.01");  // the default catch-up weight
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tandem
