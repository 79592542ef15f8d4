// Adaptive speculation depth on the GPU (tests/model/engine_test.cpp checks the same on the CPU).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/init.h"
#include "gpu_engine_util.h"
#include "model/model.h"
#include "runtime/engine.h"

namespace tandem::test {
namespace {

// Adaptive depth on the GPU, forced through every depth and plain steps (0: the target's hidden
// states are stashed inside the decode graph, then the draft catches up from them): with
// batch-invariant kernels, greedy and seeded sampled outputs equal plain decoding, captured or
// eager.
TEST(GpuGraphs, AdaptiveDepthScheduleMatchesPlainDecoding) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  std::shared_ptr<const Model> model = gpu_austen();
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {  // a bucket of 8 with padding
    Request r;
    for (int j = 0; j < 40 + 17 * i; ++j) r.prompt.push_back((37 * i + 11 * j) % 4000);
    r.max_new_tokens = 40;
    if (i >= 4) {
      r.sampling.temperature = 0.9f;
      r.sampling.seed = 70 + static_cast<uint64_t>(i);
    }
    reqs.push_back(r);
  }
  auto run = [&](bool spec, bool graphs) {
    EngineOptions o;
    o.page_size = 64;
    o.workspace_mb = 512;
    o.deterministic = true;
    o.disable_cuda_graph = !graphs;
    const std::vector<int64_t> schedule = {3, 0, 0, 1, 5, 0, 2, 0, 0, 0, 4, 4, 0, 1};
    size_t step = 0;
    if (spec) {
      o.spec.algorithm = "EAGLE";
      o.spec.num_steps = 3;
      o.spec.max_steps = 5;
      o.spec.depth_override = [&](int64_t, int64_t) { return schedule[step++ % schedule.size()]; };
    }
    Engine e(model, o);
    const auto out = run_to_length(e, reqs, spec ? "adaptive" : "plain");
    if (spec) {
      const EngineMetrics m = e.metrics();
      EXPECT_GT(m.spec_depth_steps.at(0), 0u);
      EXPECT_GT(m.spec_depth_steps.at(5), 0u);
      EXPECT_GT(m.avg_spec_accept_length(), 1.5);  // the draft still drafts well after catch-ups
    }
    return out;
  };
  const auto plain = run(false, true);
  for (bool graphs : {true, false}) {
    const auto got = run(true, graphs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(got[i], plain[i]) << (graphs ? "graphs" : "eager") << " request " << i;
  }
}

}  // namespace
}  // namespace tandem::test
