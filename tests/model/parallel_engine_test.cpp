// The serving engine under tensor and expert parallelism on the CPU: rank 0's engine schedules
// and sends every step to follower ranks (threads here, processes in `tandem serve`). Greedy
// output must equal the unsharded engine's, with and without MTP; seeded sampling too. (The
// shipped model has 4 heads: 8-way splits are covered by parallel_model_test.cpp.)
#include <thread>

#include "core/rng.h"
#include "distributed/cpu_collectives.h"
#include "distributed/thread_group.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/follower.h"

namespace tandem::test {
namespace {

const char* kModel = "models/tandem-austen";

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
};

std::vector<Result> run_all(Engine& e, const std::vector<Request>& reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(e.submit(r));
  std::vector<Result> out;
  for (auto& s : streams) {
    Result r;
    RequestOutput o;
    for (;;) {
      if (!s->next(o, std::chrono::seconds(120))) {
        ADD_FAILURE() << "request " << s->id() << " timed out";
        break;
      }
      r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) {
        r.reason = o.finish_reason;
        break;
      }
    }
    out.push_back(r);
  }
  return out;
}

std::shared_ptr<Model> load(const ShardSpec& s, bool mtp) {
  init_backends();
  LoadOptions lo;
  lo.show_progress = false;
  lo.load_mtp = mtp;
  lo.shard = s;
  return std::shared_ptr<Model>(Model::load(source_path(kModel), lo));
}

// Runs reqs on (tp, ep) ranks: rank 0's engine in this thread, followers in others.
std::vector<Result> run_parallel(int64_t tp, int64_t ep, const EngineOptions& o,
                                 const std::vector<Request>& reqs) {
  auto groups = ThreadHub::make(static_cast<int>(tp));
  std::vector<std::shared_ptr<Model>> models;
  std::vector<std::unique_ptr<CpuCollectives>> comms;
  for (int64_t r = 0; r < tp; ++r) {
    models.push_back(load(ShardSpec{r, tp, ep}, o.spec.enabled()));
    comms.push_back(std::make_unique<CpuCollectives>(*groups[static_cast<size_t>(r)]));
    models.back()->set_collectives(comms.back().get());
  }
  std::vector<std::thread> followers;
  std::vector<std::string> errors(static_cast<size_t>(tp));
  for (int64_t r = 1; r < tp; ++r)
    followers.emplace_back([&, r] {
      try {
        run_follower(models[static_cast<size_t>(r)], o, *groups[static_cast<size_t>(r)]);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  std::vector<Result> out;
  {
    Engine e(models[0], o, groups[0].get());
    out = run_all(e, reqs);
  }  // the engine's destructor tells the followers to stop
  for (auto& t : followers) t.join();
  for (int64_t r = 1; r < tp; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return out;
}

std::vector<Result> run_single(const EngineOptions& o, const std::vector<Request>& reqs) {
  Engine e(load(ShardSpec{}, o.spec.enabled()), o);
  return run_all(e, reqs);
}

std::vector<Request> prompts(int n, int64_t max_new, uint64_t seed, bool sampled) {
  Rng rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    const int len = 20 + static_cast<int>(rng.next_u64() % 80);  // crosses index_topk (64)
    for (int j = 0; j < len; ++j) r.prompt.push_back(static_cast<int32_t>(rng.next_u64() % 4000));
    r.max_new_tokens = max_new;
    if (sampled) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.95f;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    }
    out.push_back(r);
  }
  return out;
}

EngineOptions options(int64_t spec_steps) {
  EngineOptions o;
  o.max_running_requests = 4;   // more requests than slots: queueing and admission on rank 0
  o.chunked_prefill_size = 32;  // prompts in chunks: the step message carries each chunk
  o.max_prefill_tokens = 48;
  if (spec_steps > 0) {
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = spec_steps;
    o.spec.num_draft_tokens = spec_steps + 1;
  }
  return o;
}

class ParallelEngine : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ParallelEngine, GreedyMatchesUnshardedWithAndWithoutMtp) {
  const auto [tp, ep] = GetParam();
  const auto reqs = prompts(6, 24, 3, false);
  const std::vector<Result> want = run_single(options(0), reqs);
  const std::vector<Result> plain = run_parallel(tp, ep, options(0), reqs);
  const std::vector<Result> spec = run_parallel(tp, ep, options(3), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(plain[i].tokens, want[i].tokens) << "tp " << tp << " ep " << ep << " request " << i;
    EXPECT_EQ(spec[i].tokens, plain[i].tokens)
        << "tp " << tp << " ep " << ep << " request " << i << " with MTP";
    EXPECT_EQ(spec[i].reason, FinishReason::kLength);
  }
}

TEST_P(ParallelEngine, SeededSamplingMatchesUnsharded) {
  const auto [tp, ep] = GetParam();
  const auto reqs = prompts(4, 16, 5, true);
  const std::vector<Result> want = run_single(options(2), reqs);
  const std::vector<Result> got = run_parallel(tp, ep, options(2), reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "tp " << tp << " ep " << ep << " request " << i;
}

INSTANTIATE_TEST_SUITE_P(Splits, ParallelEngine,
                         ::testing::Values(std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2},
                                           std::pair{4, 4}, std::pair{4, 2}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.first) + "_ep" +
                                  std::to_string(info.param.second);
                         });

}  // namespace
}  // namespace tandem::test
