// The serving engine: continuous batching against the plain generator, and MTP speculative
// decoding that is lossless: greedy output identical to plain decoding for several S, batch
// sizes and prompts crossing index_topk; forced full acceptance and full rejection; sampling
// that matches the target distribution.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <unistd.h>

#include "core/rng.h"
#include "engine_test_util.h"
#include "model/presets.h"
#include "model_test_util.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace tandem::test {
namespace {

TEST(Engine, ContinuousBatchingMatchesThePlainGenerator) {
  auto model = load_model("models/tandem-austen", false);
  EngineOptions o;
  o.max_running_requests = 5;   // more requests than slots: they queue
  o.chunked_prefill_size = 24;  // prompts arrive in chunks
  o.max_prefill_tokens = 40;
  auto reqs = prompts(model->config(), 9, 10, 90, 20, 1);
  Engine e(model, o);
  const auto got = run_all(e, reqs);
  Generator g(*model, 256, 16);
  for (size_t i = 0; i < reqs.size(); ++i) {
    GenerateRequest gr;
    gr.prompt = reqs[i].prompt;
    gr.max_new_tokens = reqs[i].max_new_tokens;
    EXPECT_EQ(got[i].tokens, g.generate(gr).tokens) << "request " << i;
    EXPECT_EQ(got[i].reason, FinishReason::kLength);
  }
  const EngineMetrics m = e.metrics();
  EXPECT_EQ(m.requests_finished, reqs.size());
  EXPECT_EQ(m.kv_pages_used, m.kv_pages_cached);  // only the prefix cache holds pages now
}

// The start-up warm-up (EngineOptions::warm_up_tokens; on by default on GPUs only) runs
// forwards of throwaway tokens into KV pages no request holds yet, then throwaway requests at
// every decode batch bucket (and every depth the engine may run) through the engine's own step:
// afterwards plain and speculative engines, fixed and adaptive depth, graphed prefill or not,
// still answer exactly as the plain generator; no request, token, step or depth of the warm-up
// is counted, no page is held, and the depth policy saw none of it.
TEST(Engine, WarmUpForwardsChangeNoAnswerAndCountNoRequest) {
  auto model = load_model("models/tandem-austen");
  auto reqs = prompts(model->config(), 7, 10, 70, 12, 17);
  const std::vector<Result> ref = run_plain(model, reqs);
  uint64_t prompt_tokens = 0;
  for (const Request& r : reqs) prompt_tokens += r.prompt.size();
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("warm_up_" + std::to_string(::getpid()) + ".trace"))
                                .string();
  for (int steps : {0, 3})
    for (bool adaptive : {false, true})
      for (bool graphs : {false, true}) {
        if (steps == 0 && adaptive) continue;
        EngineOptions o;
        o.max_running_requests = 6;
        o.max_prefill_tokens = 40;
        o.warm_up_tokens = 40;
        o.static_batches = graphs;
        o.cuda_graph_max_prefill_tokens = graphs ? 64 : 0;
        if (steps > 0) {
          o.spec.algorithm = "EAGLE";
          o.spec.num_steps = steps;
          o.spec.num_draft_tokens = steps + 1;
          o.spec.adaptive = adaptive;
        }
        const std::string what = "S=" + std::to_string(steps) + (adaptive ? " adaptive" : "") +
                                 (graphs ? " static batches" : "");
        std::filesystem::remove(trace);
        ::setenv("TANDEM_SPEC_DEPTH_TRACE", trace.c_str(), 1);
        Engine e(model, o);
        ::unsetenv("TANDEM_SPEC_DEPTH_TRACE");
        // The prefill forwards alone: the target's at each of 1, 2, 3, 4, 6, 8, 12, 16, 24, 32
        // and 40 tokens and at 2, 3, 4 and 6 one-token sequences, the draft's after each when
        // speculating; then the steps of the throwaway requests.
        const uint64_t prefill_forwards = (11 + 4) * (steps > 0 ? 2 : 1);
        const EngineMetrics w = e.metrics();
        EXPECT_GT(w.warm_up_forwards, prefill_forwards) << what;
        EXPECT_EQ(w.forward_steps_total, 0u) << what;
        EXPECT_EQ(w.requests_total, 0u) << what;
        EXPECT_EQ(w.generation_tokens_total, 0u) << what;
        EXPECT_EQ(w.spec_verify_steps, 0u) << what;
        EXPECT_EQ(w.kv_pages_used, 0) << what << ": the prefix cache was flushed";
        for (uint64_t n : w.spec_depth_steps) EXPECT_EQ(n, 0u) << what;
        if (steps > 0) {  // the depth trace: only the engine's opening line so far
          std::this_thread::sleep_for(std::chrono::milliseconds(100));  // an idle step flushes
          std::ifstream in(trace);
          std::string first, more;
          std::getline(in, first);
          EXPECT_EQ(first.substr(0, 2), "e ") << what;
          EXPECT_FALSE(std::getline(in, more)) << what << ": " << more;
        }
        const auto got = run_all(e, reqs);
        for (size_t i = 0; i < reqs.size(); ++i)
          EXPECT_EQ(got[i].tokens, ref[i].tokens) << what << " request " << i;
        // The totals of a finished request are added just after its last message is sent.
        EngineMetrics m = e.metrics();
        for (int i = 0; i < 500 && m.requests_finished < reqs.size(); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          m = e.metrics();
        }
        EXPECT_EQ(m.requests_total, reqs.size()) << what;
        EXPECT_EQ(m.prompt_tokens_total, prompt_tokens) << what;
      }
  std::filesystem::remove(trace);
}

// --enable-mixed-chunk: decoding sequences ride along in prefill steps as one-token chunks. The
// output is still the plain generator's, and the engine runs fewer forward steps (a decode step
// saved wherever prompts were being prefilled).
TEST(Engine, MixedChunksMatchThePlainGeneratorInFewerSteps) {
  auto model = load_model("models/tandem-austen", false);
  EngineOptions o;
  o.max_running_requests = 5;
  o.chunked_prefill_size = 24;
  o.max_prefill_tokens = 40;
  auto reqs = prompts(model->config(), 9, 10, 90, 20, 1);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].max_new_tokens = 6 + 5 * (i % 4);  // staggered
  Generator g(*model, 256, 16);
  std::map<bool, uint64_t> steps;
  for (bool mixed : {false, true}) {
    o.enable_mixed_chunk = mixed;
    Engine e(model, o);
    const auto got = run_all(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      GenerateRequest gr;
      gr.prompt = reqs[i].prompt;
      gr.max_new_tokens = reqs[i].max_new_tokens;
      EXPECT_EQ(got[i].tokens, g.generate(gr).tokens) << "request " << i << " mixed " << mixed;
    }
    const EngineMetrics m = e.metrics();
    EXPECT_EQ(m.requests_finished, reqs.size());
    EXPECT_EQ(m.kv_pages_used, m.kv_pages_cached);
    steps[mixed] = m.forward_steps_total;
  }
  std::printf("forward steps: %llu separate, %llu mixed\n",
              static_cast<unsigned long long>(steps[false]),
              static_cast<unsigned long long>(steps[true]));
  EXPECT_LT(steps[true], steps[false]);
}

// TANDEM_STEP_TRACE: one line per forward step, and the lines account for every prompt token and
// every generated token (mixed steps carry decoding sequences as one-token chunks).
TEST(Engine, StepTraceAccountsForEveryStepAndToken) {
  auto model = load_model("models/tandem-austen", false);
  EngineOptions o;
  o.max_running_requests = 5;
  o.chunked_prefill_size = 24;
  o.max_prefill_tokens = 40;
  o.enable_mixed_chunk = true;
  o.enable_prefix_cache = false;  // every prompt token is prefilled
  auto reqs = prompts(model->config(), 9, 10, 90, 20, 3);
  int64_t prompt_tokens = 0, later_tokens = 0;  // generated after each prompt's first token
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].max_new_tokens = 6 + 5 * (i % 4);
    prompt_tokens += static_cast<int64_t>(reqs[i].prompt.size());
    later_tokens += reqs[i].max_new_tokens - 1;
  }
  const std::string path = ::testing::TempDir() + "step_trace_test.txt";
  std::remove(path.c_str());
  ::setenv("TANDEM_STEP_TRACE", path.c_str(), 1);
  uint64_t steps = 0;
  {
    Engine e(model, o);
    run_all(e, reqs);
    steps = e.metrics().forward_steps_total;
  }  // the engine closes the file
  ::unsetenv("TANDEM_STEP_TRACE");
  std::FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char line[256];
  uint64_t lines = 0, prefills = 0;
  int64_t traced_prompt = 0, traced_decode = 0, last_start = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    long long start, pseqs, ptok, dseqs, waiting, running, busy;
    char kind[16];
    ASSERT_EQ(std::sscanf(line, "%lld %15s %lld %lld %lld %lld %lld %lld", &start, kind, &pseqs,
                          &ptok, &dseqs, &waiting, &running, &busy),
              8)
        << line;
    ++lines;
    EXPECT_GE(start, last_start);
    EXPECT_GE(busy, 0);
    EXPECT_LE(running, o.max_running_requests);
    last_start = start;
    if (std::string(kind) == "prefill") {
      ++prefills;
      EXPECT_LE(ptok + dseqs, o.max_prefill_tokens);
    } else {
      EXPECT_EQ(std::string(kind), "decode");
      EXPECT_EQ(pseqs, 0);
    }
    traced_prompt += ptok;
    traced_decode += dseqs;
  }
  std::fclose(f);
  EXPECT_EQ(lines, steps);
  EXPECT_GT(prefills, 0u);
  EXPECT_EQ(traced_prompt, prompt_tokens);
  EXPECT_EQ(traced_decode, later_tokens);
}

// Speculation runs decode rounds, so the options turn mixed chunks off (with a warning).
TEST(Engine, MixedChunksAreOffWhenSpeculating) {
  EngineOptions o;
  o.enable_mixed_chunk = true;
  o.spec.algorithm = "EAGLE";
  std::vector<std::string> notes;
  o.validate(&notes);
  EXPECT_FALSE(o.enable_mixed_chunk);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("--enable-mixed-chunk"), std::string::npos);
}

class SpecLossless : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Greedy speculative decoding commits exactly the tokens plain decoding does. The CPU backend's
// decode and verify compute each token identically (fixed reduction order), so this is exact.
TEST_P(SpecLossless, GreedyOutputIdenticalToPlainDecoding) {
  const auto [steps, batch] = GetParam();
  auto model = load_model("models/tandem-austen");
  // Prompts of 40..120 tokens cross index_topk (64): the indexer selects while decoding.
  auto reqs = prompts(model->config(), batch, 40, 120, 40, 100 + steps);
  EngineOptions plain;
  plain.max_running_requests = 32;
  EngineOptions sp = plain;
  sp.spec.algorithm = "EAGLE";
  sp.spec.num_steps = steps;
  sp.spec.num_draft_tokens = steps + 1;
  std::vector<Result> a, b;
  {
    Engine e(model, plain);
    a = run_all(e, reqs);
  }
  {
    Engine e(model, sp);
    b = run_all(e, reqs);
    const EngineMetrics m = e.metrics();
    EXPECT_GT(m.spec_verify_steps, 0u);
    std::printf("  S=%d batch=%d: accept length %.3f over %llu verify steps\n", steps, batch,
                m.avg_spec_accept_length(), static_cast<unsigned long long>(m.spec_verify_steps));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i << " with S=" << steps;
    EXPECT_EQ(a[i].reason, b[i].reason);
  }
}

// The GPU path: decode-shaped forwards from padded static batches (captured as CUDA graphs on
// GPUs) must give exactly the tokens of the dynamic path; so must prefill steps run as padded
// static batches (graphed prefill: 11 prompts of 40-100 tokens pad to 16 x 128 in the first
// step, and later steps prefill one or a few at a time as requests finish).
TEST(Spec, StaticPaddedBatchesChangeNothing) {
  auto model = load_model("models/tandem-austen");
  auto reqs = prompts(model->config(), 11, 40, 100, 24, 77);  // 11 pads to a bucket of 16
  const std::vector<Result> ref = run_plain(model, reqs);
  // Speculating, the draft's prompt reads (a fixed depth: with each prefill) and catch-ups
  // (adaptive depth: before a sequence's first round) take the padded static batches too; at a
  // fixed depth the drafts, so the accepted counts, must not change either.
  std::map<int, uint64_t> accepted;  // fixed depth S -> accepted drafts without prefill graphs
  for (int64_t prefill_graph_tokens : {0, 4096})
    for (int steps : {0, 3, 5})  // 0: plain decoding
      for (bool adaptive : {true, false}) {
        if (steps == 0 && !adaptive) continue;
        EngineOptions o;
        o.static_batches = true;
        o.cuda_graph_max_prefill_tokens = prefill_graph_tokens;
        o.max_running_requests = 8;  // the last three prefill as others finish
        if (steps > 0) {
          o.spec.algorithm = "EAGLE";
          o.spec.num_steps = steps;
          o.spec.num_draft_tokens = steps + 1;
          o.spec.adaptive = adaptive;
        }
        Engine e(model, o);
        const auto got = run_all(e, reqs);
        for (size_t i = 0; i < reqs.size(); ++i)
          EXPECT_EQ(got[i].tokens, ref[i].tokens)
              << "S=" << steps << (adaptive ? " adaptive" : " fixed") << " prefill graphs "
              << prefill_graph_tokens << " request " << i;
        const EngineMetrics m = e.metrics();
        if (prefill_graph_tokens > 0) {
          EXPECT_GT(m.graphed_prefill_steps, 0u);
        }
        if (steps > 0 && !adaptive) {
          if (prefill_graph_tokens == 0)
            accepted[steps] = m.spec_accepted_tokens;
          else
            EXPECT_EQ(m.spec_accepted_tokens, accepted[steps]) << "S=" << steps;
        }
      }
}

// Which prefill steps replay graphs: the padded size (batch bucket x token bucket) against the
// limit; prompt logprobs (every row's logits) stay eager.
TEST(Spec, GraphedPrefillTakesSmallStepsOnly) {
  auto model = load_model("models/tandem-austen");
  auto reqs = prompts(model->config(), 3, 40, 60, 8, 5);
  const std::vector<Result> ref = run_plain(model, reqs);
  // 3 prompts of 40-60 tokens in one step: a batch of 4 x 64 tokens = 256.
  for (int64_t limit : {255, 256}) {
    EngineOptions o;
    o.static_batches = true;
    o.cuda_graph_max_prefill_tokens = limit;
    // The engine thread may plan a step before the last prompts arrive, and then prefill the
    // first alone (64 tokens, graphed under either limit): such a run is repeated, its answers
    // still checked, until the three share one prefill step.
    for (int attempt = 0;; ++attempt) {
      Engine e(model, o);
      const auto got = run_all(e, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, ref[i].tokens) << limit;
      const EngineMetrics m = e.metrics();
      const uint64_t prefill_steps = m.forward_steps_total - m.decode_loop_steps;
      if (prefill_steps != 1 && attempt < 20) continue;
      ASSERT_EQ(prefill_steps, 1u) << "the prompts never shared a prefill step in 21 runs";
      EXPECT_EQ(m.graphed_prefill_steps, limit >= 256 ? 1u : 0u) << limit;
      break;
    }
  }
}

class DraftLoop : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

// With static batches the S - 1 draft steps of a round run as one forward (one CUDA graph on
// GPUs; the argmax passes to the next step on the device). It must draft exactly what the
// per-step dynamic path drafts, with IndexShare (GLM-5.2: every step reuses the draft-extend
// token's top-k) and without (GLM-5: the MTP indexer runs at every step; DeepSeek-V3: no
// indexer), and greedy output stays that of plain decoding. Random weights: few drafts are
// accepted, so most rounds run all S - 1 steps from fresh positions.
TEST_P(DraftLoop, DraftsEqualTheDynamicPath) {
  const auto [preset, steps] = GetParam();
  init_backends();
  LoadOptions lo;
  lo.show_progress = false;
  const ModelConfig c = preset_config(preset);
  std::shared_ptr<const Model> model = Model::dummy(c, lo, 5);
  ASSERT_TRUE(model->has_mtp());
  EXPECT_EQ(c.index_share_for_mtp_iteration, preset == "tiny-glm5.2");
  auto reqs = prompts(c, 11, 12, 60, 20, 40 + steps);  // 11 sequences pad to a bucket of 16
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
  }
  DraftLog logs[2];
  for (bool stat : {false, true}) {
    EngineOptions o;
    o.static_batches = stat;
    o.profile_spec_phases = stat;  // must not change anything either
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = steps;
    o.spec.num_draft_tokens = steps + 1;
    o.spec.adaptive = false;  // both paths draft S per round, so the drafts compare one to one
    logs[stat].attach(o);
    Engine e(model, o);
    const auto got = run_all(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(got[i].tokens, plain[i].tokens) << (stat ? "static " : "dynamic ") << i;
    const EngineMetrics m = e.metrics();
    EXPECT_GT(m.spec_verify_steps, 0u);
    if (stat) {
      EXPECT_GT(m.spec_profiled_rounds, 0u);
      double total = 0;
      for (double s : m.spec_phase_seconds) total += s;
      EXPECT_GT(total, 0.0);
    }
  }
  EXPECT_FALSE(logs[0].drafts.empty());
  EXPECT_EQ(logs[0].drafts.size(), logs[1].drafts.size());
  int64_t differ = 0;
  for (const auto& [at, d] : logs[0].drafts) {
    const auto it = logs[1].drafts.find(at);
    differ += it == logs[1].drafts.end() || it->second != d;
  }
  EXPECT_EQ(differ, 0) << "positions whose drafts differ between the static and dynamic paths";
}

INSTANTIATE_TEST_SUITE_P(
    PresetsAndSteps, DraftLoop,
    ::testing::Values(std::make_tuple("tiny-glm5.2", 4), std::make_tuple("tiny-glm5.2", 5),
                      std::make_tuple("tiny-glm5", 5), std::make_tuple("tiny-deepseek-v3", 4)),
    [](const auto& info) {
      return test_name(std::get<0>(info.param) + "_S" + std::to_string(std::get<1>(info.param)));
    });

INSTANTIATE_TEST_SUITE_P(StepsAndBatch, SpecLossless,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(3, 1),
                                           std::make_tuple(3, 8), std::make_tuple(2, 5),
                                           std::make_tuple(5, 3), std::make_tuple(3, 32)));

// Drafts replaced by the true continuation (all accepted) or by a token that never matches (all
// rejected): the output is unchanged and the counters show the extremes.
TEST(Spec, ForcedFullAcceptanceAndFullRejection) {
  auto model = load_model("models/tandem-austen");
  auto reqs = prompts(model->config(), 4, 20, 70, 30, 7);
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
  }
  // Request ids are assigned 1, 2, ... in submission order.
  std::map<uint64_t, std::vector<int32_t>> truth;
  for (size_t i = 0; i < reqs.size(); ++i) {
    truth[i + 1] = reqs[i].prompt;
    truth[i + 1].insert(truth[i + 1].end(), plain[i].tokens.begin(), plain[i].tokens.end());
  }
  for (bool all : {true, false}) {
    EngineOptions o;
    o.spec.algorithm = "NEXTN";
    o.spec.num_steps = 3;
    o.spec.num_draft_tokens = 4;
    o.spec.adaptive = false;  // the counts below assume S = 3 in every round
    o.spec.draft_override = [&](uint64_t id, int64_t pos, int32_t) {
      const auto& t = truth.at(id);
      const int32_t right = pos < static_cast<int64_t>(t.size()) ? t[pos] : 0;
      return all ? right : static_cast<int32_t>((right + 1) % model->config().vocab_size);
    };
    Engine e(model, o);
    const auto got = run_all(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].tokens, plain[i].tokens)
          << (all ? "full acceptance" : "full rejection") << " request " << i;
      if (all) {
        // Every round commits S + 1 tokens except where the length limit cuts it short.
        EXPECT_EQ(got[i].verify_steps, (static_cast<int64_t>(got[i].tokens.size()) - 1 + 3) / 4)
            << i;
      } else {
        EXPECT_EQ(got[i].accepted, 0) << i;
        EXPECT_EQ(got[i].verify_steps, static_cast<int64_t>(got[i].tokens.size()) - 1) << i;
      }
    }
    const EngineMetrics m = e.metrics();
    if (all)
      EXPECT_GT(m.avg_spec_accept_length(), 3.5);
    else
      EXPECT_DOUBLE_EQ(m.avg_spec_accept_length(), 1.0);
  }
}

// Engine::pin_depth (bench-offline's graph warm-up): while pinned every decode step runs that
// depth, the output stays plain decoding's, and the policy is not asked; it is shown the steps
// as calibration (`p` lines in the depth trace, never a choice), and settles once when -1 hands
// the choice back (one `s` line). An engine that does not speculate refuses a depth.
TEST(Spec, PinnedDepthRunsEveryStepAndCalibratesThePolicy) {
  auto model = load_model("models/tandem-austen");
  auto reqs = prompts(model->config(), 4, 20, 60, 24, 17);
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
    EXPECT_THROW(e.pin_depth(2), Error);
    e.pin_depth(-1);  // no depth: nothing to refuse
  }
  const std::string trace = (std::filesystem::temp_directory_path() /
                             ("pinned_depth_" + std::to_string(::getpid()) + ".trace"))
                                .string();
  std::filesystem::remove(trace);
  ::setenv("TANDEM_SPEC_DEPTH_TRACE", trace.c_str(), 1);
  EngineOptions o;
  o.spec.algorithm = "EAGLE";
  o.spec.num_steps = 3;
  o.spec.max_steps = 5;  // adaptive by default
  {
    Engine e(model, o);
    ::unsetenv("TANDEM_SPEC_DEPTH_TRACE");  // read when the engine starts
    for (int64_t d : {0, 2, 5}) {
      e.pin_depth(d);
      const EngineMetrics before = e.metrics();
      const auto got = run_all(e, reqs);
      for (size_t i = 0; i < reqs.size(); ++i)
        EXPECT_EQ(got[i].tokens, plain[i].tokens) << "pinned at " << d << ", request " << i;
      const EngineMetrics m = e.metrics();
      uint64_t steps = 0, at_d = 0;
      for (size_t k = 0; k < m.spec_depth_steps.size(); ++k) {
        const uint64_t n = m.spec_depth_steps[k] - before.spec_depth_steps.at(k);
        steps += n;
        if (static_cast<int64_t>(k) == d) at_d = n;
      }
      EXPECT_GT(steps, 0u);
      EXPECT_EQ(at_d, steps) << "every decode step at the pinned depth " << d;
    }
    e.pin_depth(-1);
    const auto got = run_all(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(got[i].tokens, plain[i].tokens) << "the policy's depths, request " << i;
  }
  // The trace: pinned steps only as `p` lines, then one `s` before the policy's own steps, each
  // a `c` and an `o`; an `x` for every finished request (the batch fill's), wherever it ended.
  std::ifstream in(trace);
  std::map<char, int64_t> lines;
  std::string order;  // the kinds in order, runs collapsed
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) {
      ++lines[l[0]];
      if (l[0] != '#' && l[0] != 'x' && (order.empty() || order.back() != l[0])) order += l[0];
    }
  std::filesystem::remove(trace);
  EXPECT_GT(lines['p'], 0);
  EXPECT_EQ(lines['f'], 0);
  EXPECT_EQ(lines['s'], 1);
  EXPECT_GT(lines['o'], 0);
  EXPECT_EQ(lines['c'], lines['o']);
  EXPECT_EQ(lines['x'], static_cast<int64_t>(4 * reqs.size()));  // three pinned runs and one free
  EXPECT_EQ(order.substr(0, 3), "eps") << order;                 // no choice before the settle
}

// Adaptive depth forced through a schedule of every depth, plain steps (0) included: greedy and
// seeded sampled outputs equal plain decoding's, static (padded, graph-shaped) batches or not.
// After plain steps the draft catches up from the stashed target hidden states: its first
// drafts then equal those of an engine that never paused (a hole in its KV would change them).
TEST(Spec, AdaptiveDepthScheduleIsLossless) {
  auto model = load_model("models/tandem-austen");
  auto reqs = prompts(model->config(), 7, 30, 90, 40, 21);
  for (size_t i = 3; i < reqs.size(); ++i) {  // a mix of greedy and seeded sampled requests
    reqs[i].sampling.temperature = 0.9f;
    reqs[i].sampling.top_k = 40;
    reqs[i].sampling.seed = 500 + i;
  }
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
  }
  // Every depth in turn; then only 0 and 1, whose drafts are all first drafts (d_1) to compare
  // with the never-paused run (depth 1 throughout).
  const std::vector<int64_t> every = {3, 0, 0, 1, 5, 0, 2, 0, 0, 0, 4, 4, 0, 1};
  const std::vector<int64_t> zero_one = {1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1};
  const std::vector<int64_t> ones = {1};
  struct Run {
    const char* name;
    bool stat;
    const std::vector<int64_t>* schedule;
    DraftLog* log;
  };
  DraftLog never_paused, paused;
  for (const Run& r : {Run{"static, every depth", true, &every, nullptr},
                       Run{"dynamic, every depth", false, &every, nullptr},
                       Run{"dynamic, 0 and 1", false, &zero_one, &paused},
                       Run{"dynamic, never paused", false, &ones, &never_paused}}) {
    EngineOptions o;
    o.static_batches = r.stat;
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = 1;
    o.spec.max_steps = 5;
    size_t step = 0;
    o.spec.depth_override = [&](int64_t, int64_t) {
      return (*r.schedule)[step++ % r.schedule->size()];
    };
    if (r.log) r.log->attach(o);
    Engine e(model, o);
    const auto got = run_all(e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      EXPECT_EQ(got[i].tokens, plain[i].tokens) << r.name << ": request " << i;
    const EngineMetrics m = e.metrics();
    ASSERT_EQ(m.spec_depth_steps.size(), 6u);
    if (r.schedule == &every) {
      EXPECT_GT(m.spec_depth_steps[0], 0u) << r.name;
      EXPECT_GT(m.spec_depth_steps[5], 0u) << r.name;
    }
    // Nothing leaks: with the prefix cache dropped no page is in use.
    EXPECT_TRUE(e.flush_cache());
    EXPECT_EQ(e.metrics().kv_pages_used, 0) << r.name;
  }
  // The paused run's drafts against the never-paused run's at the same positions.
  int64_t compared = 0, same = 0;
  for (const auto& [at, d] : paused.drafts) {
    const auto it = never_paused.drafts.find(at);
    if (it == never_paused.drafts.end() || d.empty()) continue;
    ++compared;
    same += it->second[0] == d[0];
  }
  std::printf(
      "  first drafts after plain steps equal the never-paused run's at %lld of %lld positions\n",
      static_cast<long long>(same), static_cast<long long>(compared));
  EXPECT_GT(compared, 50);
  EXPECT_GE(same, compared * 95 / 100) << same << " of " << compared;
}

// Adaptive depth reads prompts with the draft while they are prefilled (where the policy
// speculates), and a reused prefix whose pages hold draft KV needs no catch-up: a multi-turn
// conversation that always speculates never stalls a round on one. Where the draft fell behind
// (an answer decoded plainly), the prefix cache marks those pages, and the next turn catches up
// from the first of them on. Every output equals plain decoding's.
TEST(Spec, DraftReadsPromptsAsTheyArePrefilledAndReusesPrefixesWithDraftKv) {
  auto model = load_model("models/tandem-austen");
  constexpr int64_t kPage = 16;
  // Turn 1's KV ends on a page boundary (prompt + answer - 1 = a multiple of the page), so the
  // positions of its last round fill a page that turn 2 reuses.
  auto turn1 = prompts(model->config(), 8, 90, 91, 24, 33);
  for (size_t i = 0; i < turn1.size(); ++i) {
    turn1[i].max_new_tokens = i < 4 ? 24 : 28;
    turn1[i].prompt.resize(static_cast<size_t>((i < 4 ? 41 : 37) + 16 * (i % 4)));
  }
  // Turn 2 of each conversation: its turn-1 prompt and answer, then new tokens.
  std::vector<Result> plain1, plain2;
  std::vector<Request> turn2 = turn1;
  {
    Engine e(model, EngineOptions{});
    plain1 = run_all(e, turn1);
    for (size_t i = 0; i < turn2.size(); ++i) {
      turn2[i].prompt.insert(turn2[i].prompt.end(), plain1[i].tokens.begin(),
                             plain1[i].tokens.end());
      for (int t = 0; t < 9; ++t) turn2[i].prompt.push_back(300 + 17 * static_cast<int>(i) + t);
    }
    plain2 = run_all(e, turn2);
  }
  uint64_t prompts1 = 0, prompts2 = 0, lagging2 = 0;
  for (size_t i = 0; i < turn1.size(); ++i) {
    const int64_t n1 = static_cast<int64_t>(turn1[i].prompt.size());
    const int64_t n2 = static_cast<int64_t>(turn2[i].prompt.size());
    prompts1 += static_cast<uint64_t>(n1);
    prompts2 += static_cast<uint64_t>(n2);
    // Turn 1 answered plainly: its pages hold draft KV up to the end of its prompt; turn 2 reuses
    // the pages its answer's KV fills (the last answer token has none), the last position
    // recomputed, and lags from the first page without draft KV on if there is one.
    const int64_t answer = turn1[i].max_new_tokens;
    const int64_t pages = std::min(n1 + answer - 1, n2 - 1) / kPage, draft_pages = n1 / kPage;
    if (pages > draft_pages) lagging2 += static_cast<uint64_t>(n2 - draft_pages * kPage);
  }
  struct Case {
    const char* name;
    bool adaptive;
    int64_t turn1_depth;  // forced depth of every decode step of turn 1 (turn 2: 3)
  };
  for (const Case& c :
       {Case{"adaptive, always speculating", true, 3},
        Case{"adaptive, turn 1 answered plainly", true, 0}, Case{"fixed depth", false, 3}}) {
    EngineOptions o;
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = 3;
    o.spec.adaptive = c.adaptive;
    o.spec.draft_reads_prompts = true;  // off by default (engine_options.h)
    o.page_size = kPage;
    o.chunked_prefill_size = 24;  // prompts in several chunks
    o.max_prefill_tokens = 48;
    int64_t forced = c.turn1_depth;
    if (c.adaptive) o.spec.depth_override = [&](int64_t, int64_t) { return forced; };
    // The draft KV of reused pages is what a fresh prefill would have written: turn 2 drafts
    // exactly what an engine without the prefix cache drafts (a stale position would change them).
    DraftLog log, fresh;
    if (c.turn1_depth > 0) {
      EngineOptions f = o;
      f.enable_prefix_cache = false;
      fresh.attach(f);
      Engine ref(model, f);
      run_all(ref, turn1);
      run_all(ref, turn2);
      log.attach(o);
    }
    Engine e(model, o);
    // The totals of finished requests are added just after their last output is sent.
    const auto settled = [&](uint64_t finished) {
      for (int i = 0; i < 2000 && e.metrics().requests_finished < finished; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return e.metrics();
    };
    const auto got1 = run_all(e, turn1);
    const EngineMetrics m1 = settled(turn1.size());
    forced = 3;
    const auto got2 = run_all(e, turn2);
    const EngineMetrics m2 = settled(turn1.size() + turn2.size());
    for (size_t i = 0; i < turn1.size(); ++i) {
      EXPECT_EQ(got1[i].tokens, plain1[i].tokens) << c.name << ": turn 1, request " << i;
      EXPECT_EQ(got2[i].tokens, plain2[i].tokens) << c.name << ": turn 2, request " << i;
    }
    const uint64_t catch_up2 = m2.spec_draft_catch_up_tokens - m1.spec_draft_catch_up_tokens;
    const uint64_t prefill2 = m2.spec_draft_prefill_tokens - m1.spec_draft_prefill_tokens;
    const uint64_t cached2 = m2.cached_tokens_total - m1.cached_tokens_total;
    std::printf(
        "  %s: turn 1: the draft read %llu positions with the prefill, %llu in catch-ups; turn "
        "2: %llu reused, %llu read with the prefill, %llu in catch-ups\n",
        c.name, static_cast<unsigned long long>(m1.spec_draft_prefill_tokens),
        static_cast<unsigned long long>(m1.spec_draft_catch_up_tokens),
        static_cast<unsigned long long>(cached2), static_cast<unsigned long long>(prefill2),
        static_cast<unsigned long long>(catch_up2));
    // The policy starts at depth 3, so the draft reads every prompt position as it is prefilled.
    EXPECT_EQ(m1.spec_draft_prefill_tokens, prompts1) << c.name;
    EXPECT_EQ(m1.spec_draft_catch_up_tokens, 0u) << c.name;
    EXPECT_GT(cached2, 0u) << c.name << ": turn 2 reuses turn 1's pages";
    if (c.turn1_depth > 0) {
      // Rounds leave the draft's KV complete, finishing ones too: turn 2 needs no catch-up.
      EXPECT_EQ(catch_up2, 0u) << c.name;
      EXPECT_EQ(prefill2, prompts2 - cached2) << c.name;
      int64_t compared = 0;
      for (const auto& [at, d] : log.drafts) {
        if (at.first <= turn1.size()) continue;  // turn 2's requests only
        const auto it = fresh.drafts.find(at);
        ASSERT_NE(it, fresh.drafts.end())
            << c.name << ": request " << at.first << " position " << at.second;
        EXPECT_EQ(d, it->second) << c.name << ": request " << at.first << " position " << at.second;
        ++compared;
      }
      EXPECT_GT(compared, 20) << c.name;
    } else {
      ASSERT_GT(lagging2, 0u) << "the test needs an answer that fills a page";
      EXPECT_EQ(catch_up2, lagging2) << c.name;
    }
  }
}

}  // namespace
}  // namespace tandem::test

namespace tandem::test {
namespace {

// Speculative sampling is lossless: with temperature 1 and top-k 8, the joint distribution of the
// first two generated tokens and the marginal of the third match the target's exact
// distribution (computed by enumeration), with and without speculation.
TEST(Spec, SampledTokensFollowTheTargetDistribution) {
  auto model = load_model("models/tandem-austen");
  const ModelConfig& c = model->config();
  const std::vector<int32_t> prompt = {263,  2318, 295, 1120, 302, 276,
                                       1535, 13,   291, 3145, 272, 344};
  SamplingParams sp{1.0f, 8, 1.0f, 0};
  // Exact distributions by enumeration with the plain generator.
  Generator g(*model, 64, 16);
  const ThreeTokenLaw law = three_token_law(
      [&](const std::vector<int32_t>& generated) {
        GenerateRequest r;
        r.prompt = prompt;
        r.prompt.insert(r.prompt.end(), generated.begin(), generated.end());
        r.max_new_tokens = 1;
        std::vector<float> p;
        const auto logits = g.generate(r).logits[0];
        sampling_distribution(logits.data(), c.vocab_size, sp, p);
        return p;
      },
      c.vocab_size);
  expect_three_token_law(model, prompt, sp, law, 3000, 1000);
}

// Quantized weights keep speculative decoding lossless: with dummy FP8 weights (W8A8 on every
// projection, MLP and expert) and Quark-layout MXFP4 experts (W4A4, MTP layer bf16), greedy MTP
// output equals plain decoding.
class QuantizedSpec : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizedSpec, MtpGreedyEqualsPlain) {
  init_backends();
  LoadOptions lo;
  lo.show_progress = false;
  ModelConfig c = preset_config("tiny-glm5.2");
  c.quant.method = GetParam();
  std::shared_ptr<const Model> model = Model::dummy(c, lo, 5);
  const auto& layers = model->weights().layers;
  const auto moe = std::find_if(layers.begin(), layers.end(),
                                [](const LayerWeights& l) { return l.moe.has_value(); });
  ASSERT_NE(moe, layers.end());
  EXPECT_TRUE(moe->moe->experts_gate_up.quantized());
  EXPECT_EQ(layers[0].attn.o_proj.quantized(), GetParam() == "fp8");
  auto reqs = prompts(c, 5, 12, 40, 24, 3);
  std::vector<Result> plain;
  {
    Engine e(model, EngineOptions{});
    plain = run_all(e, reqs);
  }
  EngineOptions o;
  o.spec.algorithm = "EAGLE";
  o.spec.num_steps = 3;
  o.spec.num_draft_tokens = 4;
  Engine e(model, o);
  const auto got = run_all(e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, plain[i].tokens) << GetParam() << " request " << i;
    EXPECT_EQ(got[i].tokens.size(), 24u);
  }
  EXPECT_GT(e.metrics().spec_verify_steps, 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedSpec, ::testing::Values("fp8", "quark"));

}  // namespace
}  // namespace tandem::test
