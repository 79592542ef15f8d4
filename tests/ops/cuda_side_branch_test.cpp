// The CUDA backend's side branch (a second stream forked and joined with events): work split
// between the main line and a branch gives bit for bit what the same ops give in order, while
// both lines use op scratch (split-K partials) and cuBLASLt workspaces, and the main line sees
// the branch's results after join_side.
#include <cstring>

#include "core/error.h"
#include "ops_test_util.h"

namespace tandem::test {
namespace {

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = to_float_vector(a), y = to_float_vector(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

TEST_F(CudaOps, SideBranchMatchesInOrderExecution) {
  auto ws = ops::make_workspace(Device::cuda(), size_t{512} << 20);
  // M = 1: the skinny kernel with K splits (scratch); M = 4: cuBLASLt (workspace, split-K).
  for (int64_t M : {1, 4, 33}) {
    for (int rep = 0; rep < 4; ++rep) {
      ws->reset();
      Pair x = rand({M, 6144});
      Pair w_main = rand({576, 6144}, 0.05f), w_side = rand({4096, 6144}, 0.05f),
           w_side2 = rand({6144, 4096}, 0.05f);
      const Weight wm{w_main.gpu, {}, WeightFormat::kDense},
          ws1{w_side.gpu, {}, WeightFormat::kDense}, ws2{w_side2.gpu, {}, WeightFormat::kDense};
      // In order.
      const Tensor want_main = ops::linear(*ws, x.gpu, wm);                          // [M, 576]
      const Tensor want_side = ops::linear(*ws, ops::linear(*ws, x.gpu, ws1), ws2);  // [M, 6144]
      Tensor want_sum = ops::linear(*ws, x.gpu, ws1);
      ops::add_inplace(want_sum, ops::linear(*ws, want_side, ws1));  // [M, 4096]
      // Split: the long chain on the branch, the short GEMV on the main line, then the main line
      // consumes the branch's output (wrong without the join: the branch is still running).
      Tensor side, side_first;
      {
        ops::SideBranch branch(Device::cuda());
        side_first = ops::linear(*ws, x.gpu, ws1);
        side = ops::linear(*ws, side_first, ws2);
      }
      const Tensor got_main = ops::linear(*ws, x.gpu, wm);
      ops::join_side(Device::cuda());
      ops::add_inplace(side_first, ops::linear(*ws, side, ws1));
      const std::string what = "M=" + std::to_string(M) + " rep " + std::to_string(rep);
      EXPECT_TRUE(bitwise_equal(got_main, want_main)) << "main line " << what;
      EXPECT_TRUE(bitwise_equal(side, want_side)) << "branch " << what;
      EXPECT_TRUE(bitwise_equal(side_first, want_sum)) << "after join " << what;
    }
  }
}

TEST_F(CudaOps, SideBranchesDoNotNest) {
  ops::SideBranch outer(Device::cuda());
  EXPECT_THROW(ops::SideBranch inner(Device::cuda()), Error);
}

}  // namespace
}  // namespace tandem::test
