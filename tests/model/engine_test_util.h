// Helpers shared by the engine tests: loading the default model, draining request streams,
// random prompts, and the chi-square test that checks sampled tokens against exact
// distributions.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/init.h"
#include "core/rng.h"
#include "model/model.h"
#include "model_test_util.h"
#include "runtime/engine.h"

namespace tandem::test {

inline std::shared_ptr<const Model> load_model(const std::string& rel, bool mtp = true) {
  init_backends();
  LoadOptions lo;
  lo.load_mtp = mtp;
  lo.show_progress = false;
  return std::shared_ptr<const Model>(Model::load(source_path(rel), lo));
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kNone;
  int64_t verify_steps = 0, accepted = 0;
};

inline Result drain(RequestStream& s) {
  Result r;
  RequestOutput o;
  for (;;) {
    if (!s.next(o, std::chrono::seconds(60))) {
      ADD_FAILURE() << "request " << s.id() << " timed out";
      return r;
    }
    r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
    r.verify_steps = o.spec_verify_steps;
    r.accepted = o.spec_accepted_drafts;
    if (o.finished) {
      r.reason = o.finish_reason;
      return r;
    }
  }
}

inline std::vector<Result> run_all(Engine& e, const std::vector<Request>& reqs) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : reqs) streams.push_back(e.submit(r));
  std::vector<Result> out;
  for (auto& s : streams) out.push_back(drain(*s));
  return out;
}

// The requests' results on a fresh engine with default options (plain decoding): the reference
// the speculative and padded paths are held to.
inline std::vector<Result> run_plain(std::shared_ptr<const Model> model,
                                     const std::vector<Request>& reqs) {
  Engine e(std::move(model), EngineOptions{});
  return run_all(e, reqs);
}

// Every draft token the engine proposes, per (request, position) in round order, seen through
// the draft_override hook (which returns it unchanged).
struct DraftLog {
  std::mutex mu;
  std::map<std::pair<uint64_t, int64_t>, std::vector<int32_t>> drafts;
  void attach(EngineOptions& o) {
    o.spec.draft_override = [this](uint64_t id, int64_t pos, int32_t d) {
      std::lock_guard<std::mutex> g(mu);
      drafts[{id, pos}].push_back(d);
      return d;
    };
  }
};

inline std::vector<Request> prompts(const ModelConfig& c, int n, int min_len, int max_len,
                                    int64_t max_new, uint64_t seed) {
  Rng rng(seed);
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    const int len =
        min_len + static_cast<int>(rng.next_u64() % static_cast<uint64_t>(max_len - min_len + 1));
    for (int j = 0; j < len; ++j)
      r.prompt.push_back(static_cast<int32_t>(
          rng.next_u64() % static_cast<uint64_t>(std::min<int64_t>(c.vocab_size, 4000))));
    r.max_new_tokens = max_new;
    out.push_back(r);
  }
  return out;
}

// Upper critical value of chi-square with df degrees of freedom at a one-sided 1e-6 tail
// (Wilson-Hilferty). A correct sampler fails this test about once in a million runs.
inline double chi2_critical_1e6(double df) {
  const double z = 4.7534, a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Pearson chi-square of observed counts against exact probabilities, merging cells whose
// expected count is under 5 into one.
inline std::pair<double, double> chi_square(const std::map<std::vector<int32_t>, double>& probs,
                                            const std::map<std::vector<int32_t>, int>& counts,
                                            int n) {
  double stat = 0, small_p = 0, small_obs = 0;
  int cells = 0;
  for (const auto& [k, p] : probs) {
    const auto it = counts.find(k);
    const double obs = it == counts.end() ? 0 : it->second;
    if (p * n < 5) {
      small_p += p;
      small_obs += obs;
      continue;
    }
    stat += (obs - p * n) * (obs - p * n) / (p * n);
    ++cells;
  }
  double outside = 0;  // samples of cells the exact distribution gives probability 0
  for (const auto& [k, c] : counts)
    if (!probs.count(k)) outside += c;
  small_obs += outside;
  if (small_p * n >= 1) {
    stat += (small_obs - small_p * n) * (small_obs - small_p * n) / (small_p * n);
    ++cells;
  } else if (small_obs > 5) {
    stat += 1e9;  // mass where the target has (almost) none
  }
  return {stat, std::max(1, cells - 1)};
}

// The exact law of a three-token continuation, by enumeration: the joint distribution of the
// first two generated tokens and the marginal of the third. dist(generated) is the (processed)
// distribution of the token after the prompt and `generated`.
struct ThreeTokenLaw {
  std::map<std::vector<int32_t>, double> joint12, marg3;
};
inline ThreeTokenLaw three_token_law(
    const std::function<std::vector<float>(const std::vector<int32_t>&)>& dist, int64_t V) {
  ThreeTokenLaw law;
  const auto p1 = dist({});
  for (int32_t t1 = 0; t1 < V; ++t1) {
    if (p1[t1] <= 0) continue;
    const auto p2 = dist({t1});
    for (int32_t t2 = 0; t2 < V; ++t2) {
      if (p2[t2] <= 0) continue;
      law.joint12[{t1, t2}] += p1[t1] * p2[t2];
      const auto p3 = dist({t1, t2});
      for (int32_t t3 = 0; t3 < V; ++t3)
        if (p3[t3] > 0) law.marg3[{t3}] += p1[t1] * p2[t2] * p3[t3];
    }
  }
  return law;
}

// Samples n three-token continuations of prompt (seeds seed0, seed0 + 1, ...), plain and with MTP
// (S = 3), and checks both against law with chi-square at a 1e-6 tail. constraint: a fresh one
// per request, or none.
inline void expect_three_token_law(
    std::shared_ptr<const Model> model, const std::vector<int32_t>& prompt,
    const SamplingParams& sp, const ThreeTokenLaw& law, int n, uint64_t seed0,
    const std::function<std::shared_ptr<TokenConstraint>()>& constraint = {}) {
  for (bool spec : {false, true}) {
    EngineOptions o;
    o.max_running_requests = 64;
    if (spec) {
      o.spec.algorithm = "EAGLE";
      o.spec.num_steps = 3;
      o.spec.num_draft_tokens = 4;
    }
    Engine e(model, o);
    std::map<std::vector<int32_t>, int> c12, c3;
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < n; ++i) {
      Request r;
      r.prompt = prompt;
      r.max_new_tokens = 3;
      r.sampling = sp;
      r.sampling.seed = seed0 + static_cast<uint64_t>(i);
      if (constraint) r.constraint = constraint();
      streams.push_back(e.submit(r));
    }
    for (auto& s : streams) {
      const Result r = drain(*s);
      ASSERT_EQ(r.tokens.size(), 3u);
      ++c12[{r.tokens[0], r.tokens[1]}];
      ++c3[{r.tokens[2]}];
    }
    const auto [s12, df12] = chi_square(law.joint12, c12, n);
    const auto [s3, df3] = chi_square(law.marg3, c3, n);
    std::printf(
        "  %s: chi2(tokens 1-2) = %.1f on %.0f df (critical %.1f); chi2(token 3) = %.1f on %.0f df "
        "(critical %.1f); accept length %.2f\n",
        spec ? "speculative" : "plain", s12, df12, chi2_critical_1e6(df12), s3, df3,
        chi2_critical_1e6(df3), e.metrics().avg_spec_accept_length());
    EXPECT_LT(s12, chi2_critical_1e6(df12)) << (spec ? "speculative" : "plain");
    EXPECT_LT(s3, chi2_critical_1e6(df3)) << (spec ? "speculative" : "plain");
    if (spec) {
      EXPECT_GT(e.metrics().spec_verify_steps, 0u);
    }
  }
}

}  // namespace tandem::test
