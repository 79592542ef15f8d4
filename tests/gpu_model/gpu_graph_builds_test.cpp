// Engine::graph_builds on the GPU: forwards that ran instead of replaying a captured graph. A
// shape's first use runs eagerly, its second captures, later ones replay, so the same single
// request run three times builds in the first two passes (the second captures what the first met
// once, such as its prefill) and replays everything in the third. bench-offline reads this count
// to tell whether a timed pass paid for captures.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/init.h"
#include "gpu_engine_util.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace tandem::test {
namespace {

TEST(GpuGraphs, GraphBuildsCountForwardsThatDidNotReplay) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  std::shared_ptr<const Model> model = gpu_austen();
  Request r;
  for (int j = 0; j < 57; ++j) r.prompt.push_back((29 + 13 * j) % 4000);
  r.max_new_tokens = 24;
  for (bool spec : {false, true}) {
    EngineOptions o;
    o.page_size = 64;
    o.workspace_mb = 512;
    o.deterministic = true;
    o.warm_up_tokens = 0;  // the warm-up's own forwards build graphs too (WarmUpChangesNoAnswer)
    if (spec) {            // a fixed depth: the same steps in every pass
      o.spec.algorithm = "EAGLE";
      o.spec.num_steps = 3;
      o.spec.adaptive = false;
    }
    const char* what = spec ? "S = 3" : "plain";
    Engine e(model, o);
    EXPECT_EQ(e.graph_builds(), 0u) << what;
    std::vector<uint64_t> builds;
    std::vector<std::vector<int32_t>> outputs;
    for (int pass = 0; pass < 3; ++pass) {
      outputs.push_back(run_to_length(e, {r}, what).at(0));
      builds.push_back(e.graph_builds());
      ASSERT_TRUE(e.flush_cache()) << what;  // the next pass prefills the whole prompt again
    }
    EXPECT_GT(builds[0], 0u) << what << ": the first pass ran every shape eagerly";
    EXPECT_GT(builds[1], builds[0]) << what << ": the second captured the prefill met once";
    EXPECT_EQ(builds[2], builds[1]) << what << ": the third replayed every step";
    EXPECT_EQ(outputs[1], outputs[0]) << what;
    EXPECT_EQ(outputs[2], outputs[0]) << what;
  }
  // Without graphs nothing is counted.
  EngineOptions eager;
  eager.page_size = 64;
  eager.workspace_mb = 512;
  eager.disable_cuda_graph = true;
  Engine e(model, eager);
  run_to_length(e, {r}, "eager");
  EXPECT_EQ(e.graph_builds(), 0u);
}

// The start-up warm-up (on by default on GPUs) runs forwards of throwaway tokens at every row
// bucket, capturing graphs of its prefill shapes with its own inputs: requests that replay those
// graphs afterwards, and the speculative rounds after them, answer exactly as an engine without
// it (deterministic kernels: the same bits whatever the batch).
TEST(GpuGraphs, WarmUpChangesNoAnswer) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  std::shared_ptr<const Model> model = gpu_austen();
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {
    Request r;
    for (int j = 0; j < 9 + 23 * i; ++j) r.prompt.push_back((31 + 17 * j + 5 * i) % 4000);
    r.max_new_tokens = 16;
    reqs.push_back(r);
  }
  for (bool spec : {false, true}) {
    std::vector<std::vector<std::vector<int32_t>>> outputs;
    for (bool warm : {false, true}) {
      EngineOptions o;
      o.page_size = 64;
      o.workspace_mb = 512;
      o.deterministic = true;
      o.max_prefill_tokens = 256;
      o.warm_up_tokens = warm ? -1 : 0;  // -1: max_prefill_tokens on a GPU
      if (spec) {
        o.spec.algorithm = "EAGLE";
        o.spec.num_steps = 3;
        o.spec.adaptive = false;
      }
      const std::string what = std::string(spec ? "S = 3" : "plain") + (warm ? " warmed" : "");
      Engine e(model, o);
      if (warm) {
        EXPECT_GT(e.metrics().warm_up_forwards, 0u) << what;
      } else {
        EXPECT_EQ(e.metrics().warm_up_forwards, 0u) << what;
      }
      outputs.push_back(run_to_length(e, reqs, what));
    }
    EXPECT_EQ(outputs[1], outputs[0]) << (spec ? "S = 3" : "plain");
  }
}

// An adaptive engine's steps that built a graph (a shape's eager first use, its capture) are not
// shown to the depth policy as measurements of their depth: the trace writes them as `g` lines,
// every chosen step is an `o` or a `g`, and there are no more `g` lines than graph builds.
TEST(GpuGraphs, StepsThatBuiltAGraphAreNotMeasurements) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  std::shared_ptr<const Model> model = gpu_austen();
  const std::string trace = ::testing::TempDir() + "gpu_built_steps.trace";
  std::filesystem::remove(trace);
  ::setenv("TANDEM_SPEC_DEPTH_TRACE", trace.c_str(), 1);
  std::vector<Request> reqs;
  for (int i = 0; i < 5; ++i) {
    Request r;
    for (int j = 0; j < 12 + 19 * i; ++j) r.prompt.push_back((7 + 11 * j + 3 * i) % 4000);
    r.max_new_tokens = 20 + 4 * i;
    reqs.push_back(r);
  }
  uint64_t builds = 0;
  {
    EngineOptions o;
    o.page_size = 64;
    o.workspace_mb = 512;
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = 3;
    o.spec.max_steps = 5;  // adaptive by default
    o.warm_up_tokens = 0;  // the warm-up would build every decode shape before the requests
    Engine e(model, o);
    ::unsetenv("TANDEM_SPEC_DEPTH_TRACE");  // read when the engine starts
    for (int pass = 0; pass < 2; ++pass) run_to_length(e, reqs, "adaptive");
    builds = e.graph_builds();
  }
  std::ifstream in(trace);
  std::map<char, int64_t> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) ++lines[l[0]];
  std::filesystem::remove(trace);
  EXPECT_GT(lines['g'], 0) << "the first decode steps of each shape build graphs";
  EXPECT_GT(lines['o'], 0);
  EXPECT_EQ(lines['c'], lines['o'] + lines['g']);
  EXPECT_LE(static_cast<uint64_t>(lines['g']), builds);
}

}  // namespace
}  // namespace tandem::test
