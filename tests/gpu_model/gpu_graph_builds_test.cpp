// Engine::graph_builds on the GPU: forwards that ran instead of replaying a captured graph. A
// shape's first use runs eagerly, its second captures, later ones replay, so the same single
// request run three times builds in the first two passes (the second captures what the first met
// once, such as its prefill) and replays everything in the third. bench-offline reads this count
// to tell whether a timed pass paid for captures.
#include <gtest/gtest.h>

#include <memory>
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
    if (spec) {  // a fixed depth: the same steps in every pass
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

}  // namespace
}  // namespace tandem::test
