// The model's collective path on one GPU: the engine with NCCL collectives at world size 1 (the
// vocab-parallel head's all-gather, the row-parallel all-reduces) inside its captured CUDA graphs
// (decode, verify, the draft loop, draft extend) must give the tokens it gives without them.
#include <gtest/gtest.h>

#include "../gpu_model/gpu_engine_util.h"
#include "backends/init.h"
#include "distributed/nccl_collectives.h"
#include "distributed/thread_group.h"
#include "model/presets.h"
#include "runtime/engine.h"

namespace tandem::test {
namespace {

std::vector<std::vector<int32_t>> run(std::shared_ptr<const Model> model, bool spec) {
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {  // a bucket of 8 with padding
    Request r;
    for (int j = 0; j < 20 + 9 * i; ++j) r.prompt.push_back((37 * i + 11 * j) % 256);
    r.max_new_tokens = 24;
    reqs.push_back(r);
  }
  EngineOptions o;
  o.page_size = 64;
  o.workspace_mb = 512;
  if (spec) {
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = 3;
    o.spec.num_draft_tokens = 4;
    // Default kernels are not batch-invariant: both runs must take the same shapes.
    o.spec.adaptive = false;
  }
  Engine e(model, o);
  return run_to_length(e, reqs, spec ? "MTP" : "plain");
}

TEST(GpuTensorParallel, NcclAtWorldOneInsideGraphsChangesNoToken) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  LoadOptions lo;
  lo.device = Device::cuda();
  lo.dtype = DType::BF16;
  lo.show_progress = false;
  std::shared_ptr<Model> model = Model::dummy(preset_config("tiny-glm5.2"), lo, 5);
  auto groups = ThreadHub::make(1);
  for (bool spec : {false, true}) {
    model->set_collectives(nullptr);
    const auto want = run(model, spec);
    NcclCollectives nccl(*groups[0], lo.device);
    model->set_collectives(&nccl);
    const auto got = run(model, spec);
    model->set_collectives(nullptr);
    nccl.check();
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i], want[i]) << (spec ? "MTP" : "plain") << " request " << i;
  }
}

}  // namespace
}  // namespace tandem::test
