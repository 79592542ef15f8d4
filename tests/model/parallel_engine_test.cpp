// The serving engine under tensor and expert parallelism on the CPU: rank 0's engine schedules
// and sends every step to follower ranks (threads here, processes in `tandem serve`). Greedy
// output must equal the unsharded engine's, with and without MTP; seeded sampling too. (The
// shipped model has 4 heads: 8-way splits are covered by parallel_model_test.cpp.)
#include <atomic>
#include <filesystem>
#include <thread>

#include "core/rng.h"
#include "distributed/cpu_collectives.h"
#include "distributed/thread_group.h"
#include "model/random_checkpoint.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/follower.h"
#include "table_constraint.h"

namespace tandem::test {
namespace {

const char* kModel = "models/tandem-austen";

// The model the engines load: the shipped one, or (8-way splits) a widened random checkpoint.
std::string g_model_dir;

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
  return std::shared_ptr<Model>(
      Model::load(g_model_dir.empty() ? source_path(kModel) : g_model_dir, lo));
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
        run_follower(models[static_cast<size_t>(r)], o, *groups[static_cast<size_t>(r)],
                     TableConstraint::parse);
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

std::vector<Request> prompts(int n, int64_t max_new, uint64_t seed, bool sampled,
                             int32_t vocab = 4000) {
  Rng rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    const int len = 20 + static_cast<int>(rng.next_u64() % 80);  // crosses index_topk (64)
    for (int j = 0; j < len; ++j)
      r.prompt.push_back(static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab)));
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

// The start-up warm-up (forced here: on the CPU it is off by default) runs on every rank: rank
// 0's engine and each follower the same forwards, whose collectives must pair up, or the
// engine would hang or answer wrongly. Greedy output, with and without MTP, stays the unsharded
// engine's.
TEST_P(ParallelEngine, WarmUpOnEveryRankChangesNoAnswer) {
  const auto [tp, ep] = GetParam();
  const auto reqs = prompts(4, 12, 5, false);
  const std::vector<Result> want = run_single(options(0), reqs);
  for (int steps : {0, 3}) {
    EngineOptions o = options(steps);
    o.warm_up_tokens = 40;
    const std::vector<Result> got = run_parallel(tp, ep, o, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(got[i].tokens, want[i].tokens)
          << "tp " << tp << " ep " << ep << " S " << steps << " request " << i;
  }
}

// Mixed prefill and decode steps reach the other ranks as ordinary chunks (a decoding
// sequence's one-token chunk of its last token) and change nothing in the output.
TEST_P(ParallelEngine, MixedChunksMatchUnsharded) {
  const auto [tp, ep] = GetParam();
  auto reqs = prompts(6, 24, 5, false);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].max_new_tokens = 8 + 6 * (i % 3);
  const std::vector<Result> want = run_single(options(0), reqs);
  EngineOptions o = options(0);
  o.enable_mixed_chunk = true;
  const std::vector<Result> mixed = run_parallel(tp, ep, o, reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    EXPECT_EQ(mixed[i].tokens, want[i].tokens) << "tp " << tp << " ep " << ep << " request " << i;
}

TEST_P(ParallelEngine, SeededSamplingMatchesUnsharded) {
  const auto [tp, ep] = GetParam();
  const auto reqs = prompts(4, 16, 5, true);
  // Seeded sampling commits the tokens plain sampling would (spec_accept.h), whatever depths
  // the adaptive policy picks on either side.
  const std::vector<Result> want = run_single(options(0), reqs);
  const std::vector<Result> single = run_single(options(2), reqs);
  const std::vector<Result> got = run_parallel(tp, ep, options(2), reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(single[i].tokens, want[i].tokens) << "unsharded MTP, request " << i;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "tp " << tp << " ep " << ep << " request " << i;
  }
}

// Constrained decoding under tensor parallelism: each follower builds its own copy of every
// constraint from rank 0's replica spec, so all ranks mask alike and draft, verify and accept
// the same tokens; the output equals one rank's, with and without MTP.
TEST_P(ParallelEngine, ConstrainedGreedyMatchesUnsharded) {
  const auto [tp, ep] = GetParam();
  const auto base = prompts(5, 20, 9, false);
  auto fresh = [&] {
    auto reqs = base;
    for (size_t i = 0; i < reqs.size(); ++i)
      if (i != 2)  // one free request among constrained ones
        reqs[i].constraint = std::make_shared<TableConstraint>(mix(i + 3), 35, 4, 18);
    return reqs;
  };
  const std::vector<Result> want = run_single(options(0), fresh());
  const std::vector<Result> plain = run_parallel(tp, ep, options(0), fresh());
  const std::vector<Result> spec = run_parallel(tp, ep, options(3), fresh());
  for (size_t i = 0; i < base.size(); ++i) {
    EXPECT_EQ(plain[i].tokens, want[i].tokens) << "tp " << tp << " ep " << ep << " request " << i;
    EXPECT_EQ(spec[i].tokens, want[i].tokens)
        << "tp " << tp << " ep " << ep << " request " << i << " with MTP";
    if (i != 2) {
      EXPECT_EQ(want[i].tokens.size(), 18u) << "the constraint ends each at 18 tokens";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Splits, ParallelEngine,
                         ::testing::Values(std::pair{2, 1}, std::pair{4, 1}, std::pair{2, 2},
                                           std::pair{4, 4}, std::pair{4, 2}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.first) + "_ep" +
                                  std::to_string(info.param.second);
                         });

// A rank that cannot run rank 0's steps (here: built without speculation): rank 0 stops through
// on_fatal within the collective timeout, every request ends with an error, nothing hangs.
TEST(ParallelEngineFailure, ARankThatFailsStopsRankZeroWithOneError) {
  const auto old = collective_timeout();
  set_collective_timeout(std::chrono::milliseconds(1500));
  auto groups = ThreadHub::make(2);
  std::vector<std::shared_ptr<Model>> models;
  std::vector<std::unique_ptr<CpuCollectives>> comms;
  for (int64_t r = 0; r < 2; ++r) {
    models.push_back(load(ShardSpec{r, 2, 1}, true));
    comms.push_back(std::make_unique<CpuCollectives>(*groups[static_cast<size_t>(r)]));
    models.back()->set_collectives(comms.back().get());
  }
  std::string follower_error;
  std::thread follower([&] {
    try {
      run_follower(models[1], options(0), *groups[1]);  // no speculation: cannot follow
    } catch (const std::exception& e) {
      follower_error = e.what();
    }
  });
  EngineOptions o = options(3);
  std::atomic<int> fatal_calls{0};
  std::string why;
  o.on_fatal = [&](const std::string& w) {
    why = w;
    ++fatal_calls;
  };
  std::vector<Result> got;
  const auto t0 = std::chrono::steady_clock::now();
  {
    Engine e(models[0], o, groups[0].get());
    got = run_all(e, prompts(2, 8, 1, false));
  }
  follower.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(fatal_calls.load(), 1);
  EXPECT_NE(why, "");
  EXPECT_NE(follower_error, "");
  for (const Result& r : got) EXPECT_EQ(r.reason, FinishReason::kError);
  EXPECT_LT(secs, 30.0);
  std::printf("  rank 0 stopped after %.1f s: %s\n  rank 1: %s\n", secs, why.c_str(),
              follower_error.c_str());
  set_collective_timeout(old);
}

// Eight ranks: the golden GLM-5.2 configuration widened to 8 heads and 16 experts, random
// weights (MTP accepts little on them, but a round must still commit exactly what plain decoding
// does).
TEST(ParallelEngineWide, EightWaysGreedyWithAndWithoutMtpAndSampling) {
  ModelConfig c = ModelConfig::from_file(source_path("tests/data/golden/glm5.2/config.json"));
  c.num_attention_heads = 8;
  c.n_routed_experts = 16;
  const std::string dir =
      (std::filesystem::temp_directory_path() / "tandem_parallel_engine_wide").string();
  RandomCheckpointOptions o;
  o.seed = 3;
  o.dtype = "f32";
  write_random_checkpoint(c, dir, o);
  g_model_dir = dir;
  const auto greedy = prompts(4, 12, 9, false, static_cast<int32_t>(c.vocab_size));
  const auto sampled = prompts(3, 10, 10, true, static_cast<int32_t>(c.vocab_size));
  const std::vector<Result> want = run_single(options(0), greedy);
  const std::vector<Result> want_s = run_single(options(2), sampled);
  for (auto [tp, ep] : {std::pair{8, 8}, std::pair{8, 2}}) {
    const std::vector<Result> plain = run_parallel(tp, ep, options(0), greedy);
    const std::vector<Result> spec = run_parallel(tp, ep, options(3), greedy);
    const std::vector<Result> samp = run_parallel(tp, ep, options(2), sampled);
    for (size_t i = 0; i < greedy.size(); ++i) {
      EXPECT_EQ(plain[i].tokens, want[i].tokens) << "tp " << tp << " ep " << ep << " request " << i;
      EXPECT_EQ(spec[i].tokens, plain[i].tokens)
          << "tp " << tp << " ep " << ep << " request " << i << " with MTP";
    }
    for (size_t i = 0; i < sampled.size(); ++i)
      EXPECT_EQ(samp[i].tokens, want_s[i].tokens)
          << "tp " << tp << " ep " << ep << " sampled request " << i;
  }
  g_model_dir.clear();
}

}  // namespace
}  // namespace tandem::test
