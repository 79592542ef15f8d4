// engine_kernels: what the GPU spends a whole engine's decode steps on, kernel by kernel, with the
// default kernels and with the batch-invariant ones (--enable-deterministic-inference) side by
// side. kernel_bench times one real-shape GLM-5.2 layer; on a small model (the shipped default,
// hidden 256) a step is ~40 launches of a few microseconds each and what differs between the
// modes is which kernels run and how many, which only a whole step shows.
//
// Each mode gets its own engine (start-up warm-up included), one untimed pass over the prompts
// (graphs captured, GEMM algorithms chosen), then the same pass again with CUPTI recording every
// kernel (graph nodes included). Per mode: wall time, output tokens/s, forward steps, and the
// GPU's kernel time per forward step; then one row per kernel name: launches and microseconds per
// forward step in each mode, sorted by the larger time.
//
// Usage: engine_kernels [--model DIR] [--prompts FILE.json] [--num-prompts N]
//          [--prompt-tokens P] [--max-new-tokens M] [--concurrency C]
//          [--speculative-num-steps S] [--top K]
// FILE.json: a list of strings (tokenized with the model's tokenizer.json, cut to P tokens) or
// of token-id lists. Without it, random token ids. S = 0 (default): plain decoding.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/init.h"
#include "bench_util.h"
#include "core/error.h"
#include "core/rng.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string model = std::string(TANDEM_SOURCE_DIR) + "/models/tandem-austen";
  std::string prompts;
  int64_t num_prompts = 16, prompt_tokens = 64, max_new = 96, concurrency = 1, spec_steps = 0;
  int top = 40;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const auto is = [&](const char* f) { return std::strcmp(argv[i], f) == 0 && i + 1 < argc; };
    if (is("--model"))
      a.model = argv[++i];
    else if (is("--prompts"))
      a.prompts = argv[++i];
    else if (is("--num-prompts"))
      a.num_prompts = std::atoll(argv[++i]);
    else if (is("--prompt-tokens"))
      a.prompt_tokens = std::atoll(argv[++i]);
    else if (is("--max-new-tokens"))
      a.max_new = std::atoll(argv[++i]);
    else if (is("--concurrency"))
      a.concurrency = std::atoll(argv[++i]);
    else if (is("--speculative-num-steps"))
      a.spec_steps = std::atoll(argv[++i]);
    else if (is("--top"))
      a.top = std::atoi(argv[++i]);
    else
      fail("engine_kernels: unknown or incomplete argument '{}'", argv[i]);
  }
  if (a.num_prompts < 1 || a.prompt_tokens < 1 || a.max_new < 1 || a.concurrency < 1 ||
      a.spec_steps < 0)
    fail("engine_kernels: counts must be positive (--speculative-num-steps 0 or more)");
  return a;
}

std::vector<std::vector<int32_t>> make_prompts(const Args& a, int64_t vocab) {
  std::vector<std::vector<int32_t>> prompts;
  if (!a.prompts.empty()) {
    std::ifstream in(a.prompts);
    if (!in) fail("cannot open {}", a.prompts);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::optional<Tokenizer> tok;
    for (const auto& p : j) {
      std::vector<int32_t> ids;
      if (p.is_string()) {
        if (!tok)
          tok = Tokenizer::from_file((std::filesystem::path(a.model) / "tokenizer.json").string());
        ids = tok->encode(p.get<std::string>());
      } else {
        ids = p.get<std::vector<int32_t>>();
      }
      if (static_cast<int64_t>(ids.size()) > a.prompt_tokens)
        ids.resize(static_cast<size_t>(a.prompt_tokens));
      prompts.push_back(ids);
      if (static_cast<int64_t>(prompts.size()) == a.num_prompts) break;
    }
    if (prompts.empty()) fail("{}: no prompts", a.prompts);
  } else {
    Rng rng(1);
    for (int64_t i = 0; i < a.num_prompts; ++i) {
      std::vector<int32_t> p;
      for (int64_t t = 0; t < a.prompt_tokens; ++t)
        p.push_back(static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(vocab)));
      prompts.push_back(p);
    }
  }
  return prompts;
}

// Closed loop: `concurrency` greedy requests in flight until every prompt has run. Returns the
// output tokens.
int64_t pass(Engine& e, const std::vector<std::vector<int32_t>>& prompts, int64_t max_new,
             int64_t concurrency) {
  std::vector<std::shared_ptr<RequestStream>> live;
  size_t next = 0;
  int64_t tokens = 0;
  while (next < prompts.size() || !live.empty()) {
    while (next < prompts.size() && static_cast<int64_t>(live.size()) < concurrency) {
      Request r;
      r.prompt = prompts[next++];
      r.max_new_tokens = max_new;
      live.push_back(e.submit(r));
    }
    for (size_t i = 0; i < live.size();) {
      RequestOutput o;
      bool finished = false;
      while (live[i]->next(o, std::chrono::milliseconds(0))) {
        tokens += static_cast<int64_t>(o.new_tokens.size());
        if (o.finished) {
          if (o.finish_reason == FinishReason::kError) fail("request failed: {}", o.error);
          finished = true;
          break;
        }
      }
      if (finished)
        live.erase(live.begin() + static_cast<long>(i));
      else
        ++i;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return tokens;
}

struct ModeResult {
  std::string label;
  double seconds = 0;
  int64_t tokens = 0;
  uint64_t steps = 0, graph_builds = 0;
  double kernel_us = 0;                                       // all kernels, all streams
  std::map<std::string, std::pair<int64_t, double>> by_name;  // launches, us
};

ModeResult run_mode(const std::shared_ptr<const Model>& model, const Args& a,
                    const std::vector<std::vector<int32_t>>& prompts, bool deterministic) {
  EngineOptions o;
  o.max_running_requests = std::max<int64_t>(a.concurrency, 1);
  o.page_size = 64;
  o.deterministic = deterministic;
  if (a.spec_steps > 0) {
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = a.spec_steps;
    o.spec.adaptive = false;
    o.spec.num_draft_tokens = 0;
  }
  Engine e(model, o);
  pass(e, prompts, a.max_new, a.concurrency);  // untimed: graphs, algorithms
  e.flush_cache();
  const EngineMetrics before = e.metrics();
  const uint64_t builds_before = e.graph_builds();
  ModeResult r;
  r.label = deterministic ? "deterministic" : "default";
  std::vector<KernelRecord> recs;
  const auto t0 = Clock::now();
  if (!record_kernels([&] { r.tokens = pass(e, prompts, a.max_new, a.concurrency); }, recs))
    fail("engine_kernels needs CUPTI");
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.steps = e.metrics().forward_steps_total - before.forward_steps_total;
  r.graph_builds = e.graph_builds() - builds_before;
  for (const KernelRecord& k : recs) {
    const double us = (k.end - k.start) / 1e3;
    r.kernel_us += us;
    auto& [n, t] = r.by_name[k.name];
    ++n;
    t += us;
  }
  return r;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem;
  using namespace tandem::bench;
  try {
    const Args a = parse(argc, argv);
    if (!init_backends()) {
      std::fprintf(stderr, "engine_kernels: no CUDA device\n");
      return 1;
    }
    LoadOptions lo;
    lo.load_mtp = a.spec_steps > 0;
    lo.device = Device::cuda();
    lo.dtype = DType::BF16;
    std::shared_ptr<const Model> model = Model::load(a.model, lo);
    const auto prompts = make_prompts(a, model->config().vocab_size);
    std::printf(
        "engine_kernels: %s, %zu prompts of <= %lld tokens, %lld new, concurrency %lld, %s\n",
        a.model.c_str(), prompts.size(), static_cast<long long>(a.prompt_tokens),
        static_cast<long long>(a.max_new), static_cast<long long>(a.concurrency),
        a.spec_steps > 0 ? fmt::format("MTP S={}", a.spec_steps).c_str() : "plain");
    const ModeResult m[2] = {run_mode(model, a, prompts, false), run_mode(model, a, prompts, true)};
    std::printf("\n%-14s %9s %9s %7s %7s %12s %12s\n", "mode", "seconds", "tok/s", "steps",
                "builds", "us/step wall", "us/step GPU");
    for (const ModeResult& r : m)
      std::printf("%-14s %9.3f %9.0f %7llu %7llu %12.1f %12.1f\n", r.label.c_str(), r.seconds,
                  r.tokens / r.seconds, static_cast<unsigned long long>(r.steps),
                  static_cast<unsigned long long>(r.graph_builds), 1e6 * r.seconds / r.steps,
                  r.kernel_us / r.steps);
    // One row per kernel name: per forward step, launches and us in each mode.
    struct Row {
      std::string name;
      double n[2] = {0, 0}, us[2] = {0, 0};
    };
    std::map<std::string, Row> rows;
    for (int i = 0; i < 2; ++i)
      for (const auto& [name, v] : m[i].by_name) {
        Row& row = rows[name];
        row.name = name;
        row.n[i] = static_cast<double>(v.first) / m[i].steps;
        row.us[i] = v.second / m[i].steps;
      }
    std::vector<Row> sorted;
    for (auto& [_, row] : rows) sorted.push_back(row);
    std::sort(sorted.begin(), sorted.end(), [](const Row& x, const Row& y) {
      return std::max(x.us[0], x.us[1]) > std::max(y.us[0], y.us[1]);
    });
    std::printf("\nper forward step: %-44s %8s %8s %8s %8s %8s\n", "kernel", "n dflt", "us dflt",
                "n det", "us det", "det-dflt");
    int shown = 0;
    for (const Row& row : sorted) {
      if (shown++ == a.top) break;
      std::printf("                  %-44.44s %8.2f %8.2f %8.2f %8.2f %+8.2f\n", row.name.c_str(),
                  row.n[0], row.us[0], row.n[1], row.us[1], row.us[1] - row.us[0]);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_kernels: %s\n", e.what());
    return 1;
  }
}
