// Reads a TANDEM_SPEC_DEPTH_TRACE file (runtime/spec_depth_trace.h) and, for each engine in it,
// prints what the engine measured and what the adaptive depth policy made of it:
// - the measurements themselves: the batch fill of the decode steps (mean batch, the share at the
//   largest, tokens a step, a slot and a sequence); per batch class and depth, the steps and
//   their median seconds;
//   the draft's reads outside a round (catch-ups and prompt reads) in order of arrival, first
//   ones apart (the one-off costs of a process show there), and their median per position;
// - a replay of the same calls through this build's policy: where its choices differ from the
//   recorded ones (none, when the trace came from this policy), and its estimates at the end:
//   per class the settled depth and each depth's step seconds and tokens per second, the read
//   cost fit and the acceptance per draft position.
// Then, for the whole trace (every engine's steps pooled), a closed-loop simulation of this
// build's policy per batch class on the measured step times and acceptance
// (spec_depth_bootstrap.h): its rate against the best fixed depth's.
// So one GPU run's trace lets the policy be studied and changed on any machine.
//
// usage: spec_depth_replay [--batch-fill] [--relax] [--set NAME=VALUE ...] TRACE_FILE
// (--set: a numeric SpecDepthOptions field, e.g. margin=0.05, for every adaptive engine)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/spec_depth_policy.h"
#include "spec/spec_depth_bootstrap.h"

namespace {

using tandem::SpecDepthOptions;
using tandem::SpecDepthPolicy;

struct Engine {
  SpecDepthOptions opt;
  std::vector<std::string> lines;  // the engine's lines after its `e` line
};

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// What the trace's answers looked like to the draft (bootstrap's AnswerModel), gathered over the
// adaptive engines: at batch 1, each answer's first decode step (its remaining tokens above the
// step before's) gives the answer's tokens and the prompt positions the draft lags on; the adaptive
// engines' read cost fits give the price of reading them.
struct AnswerStats {
  std::vector<double> tokens, prompt_positions, read_fixed, read_per_position;
  // Each answer's first-position acceptance (rounds that accepted d_1 over rounds) at batch 1 in
  // the fixed-depth engines, where every round of an answer drafts.
  std::vector<double> first_accept;
  tandem::bench::AnswerModel model() const {
    tandem::bench::AnswerModel m;
    if (tokens.empty() || read_fixed.empty()) return m;
    m.tokens = static_cast<int64_t>(std::lround(median(tokens)));
    m.prompt_positions = static_cast<int64_t>(std::lround(median(prompt_positions)));
    m.read_fixed_seconds = median(read_fixed);
    m.read_seconds_per_position = median(read_per_position);
    double mean = 0;
    for (double a : first_accept) mean += a / static_cast<double>(first_accept.size());
    if (first_accept.size() >= 8 && mean > 0)
      for (double a : first_accept) m.accept_scales.push_back(a / mean);
    return m;
  }
};

void report(const Engine& e, int index, tandem::bench::SpecDepthSamples& pooled,
            AnswerStats& answers) {
  std::printf("== engine %d: max depth %lld, starts at %lld, %s%s%s\n", index,
              static_cast<long long>(e.opt.max_depth), static_cast<long long>(e.opt.initial_depth),
              e.opt.adaptive ? "adaptive" : "pinned", e.opt.batch_fill ? ", batch fill" : "",
              e.opt.accept_relax ? ", acceptance relaxed" : "");
  SpecDepthPolicy p(e.opt);
  std::map<std::pair<int64_t, int64_t>, std::vector<double>> step_s;  // (class, depth) -> seconds
  std::vector<std::pair<int64_t, double>> reads;                      // (positions, seconds)
  std::vector<int64_t> batches;
  std::vector<uint64_t> recorded(static_cast<size_t>(e.opt.max_depth + 1), 0);
  // Batch fill of the decode steps: a depth that staggers the requests' finishes runs more of
  // its steps below the engine's largest batch, which no per-step estimate sees.
  std::map<int64_t, int64_t> steps_at;  // batch -> decode steps
  int64_t step_tokens = 0;              // sequences + accepted drafts over the decode steps
  int64_t chosen = 0, differ = 0, changes = 0, finished = 0;
  int64_t last_remaining = -1;  // of the latest batch-1 step: an answer starts where it rises
  int64_t answer_rounds = 0, answer_hits = 0;  // of the answer in progress (fixed depths, batch 1)
  for (const std::string& line : e.lines) {
    std::istringstream in(line);
    char kind = 0;
    in >> kind;
    if (kind == 'c') {
      int64_t b = 0, lag = 0, remaining = 0, d = 0, max_remaining = -1;
      in >> b >> lag >> remaining >> d;
      if (!(in >> max_remaining)) max_remaining = -1;  // absent from older traces
      ++chosen;
      differ += p.choose(b, lag, remaining, max_remaining) != d;
      if (e.opt.adaptive && b == 1 && remaining > last_remaining) {  // (fixed depths read prompts)
        answers.tokens.push_back(static_cast<double>(remaining));
        answers.prompt_positions.push_back(static_cast<double>(lag));
      }
      last_remaining = b == 1 ? remaining : -1;
      if (std::find(batches.begin(), batches.end(), b) == batches.end()) batches.push_back(b);
    } else if (kind == 'o' || kind == 'p') {  // chosen, or pinned (calibration)
      int64_t d = 0, b = 0, tokens = 0;
      double s = 0, cu = 0;
      in >> d >> b >> s >> cu >> tokens;
      std::vector<int64_t> accepted;
      for (int64_t k; in >> k;) accepted.push_back(k);
      if (b != 1) {
        answer_rounds = -1;  // the answer in progress did not run alone: not counted
      } else if (!e.opt.adaptive && d > 0 && accepted.size() == 1 && answer_rounds >= 0) {
        ++answer_rounds;
        answer_hits += accepted[0] > 0;
      }
      if (kind == 'p')
        p.calibrate(d, b, s, accepted, cu, tokens);
      else
        p.observe(d, b, s, accepted, cu, tokens);
      pooled.add_step(d, b, s - cu, accepted);
      ++steps_at[b];
      step_tokens += b;
      for (int64_t a : accepted) step_tokens += a;
      if (d >= 0 && d <= e.opt.max_depth) ++recorded[static_cast<size_t>(d)];
      step_s[{SpecDepthPolicy::batch_class(b), d}].push_back(s - cu);
      if (tokens > 0) reads.emplace_back(tokens, cu);
    } else if (kind == 'g') {  // built a graph: its time is the build's, not shown
      int64_t d = 0, b = 0;
      in >> d >> b;
      p.overridden(b);
    } else if (kind == 'r') {
      double s = 0;
      int64_t n = 0;
      in >> s >> n;
      p.observe_prompt_reads(s, n);
      if (s > 0) reads.emplace_back(n, s);  // (a fixed-depth engine does not time its reads)
    } else if (kind == 'x') {
      int64_t tokens = 0;
      in >> tokens;
      p.observe_finish(tokens);
      ++finished;
      if (answer_rounds >= 8)
        answers.first_accept.push_back(static_cast<double>(answer_hits) /
                                       static_cast<double>(answer_rounds));
      answer_rounds = answer_hits = 0;
    } else if (kind == 's') {
      p.settle();
    } else if (kind == '#') {
      ++changes;
    }
  }
  std::string hist;
  for (size_t d = 0; d < recorded.size(); ++d)
    if (recorded[d]) hist += " " + std::to_string(d) + ":" + std::to_string(recorded[d]);
  std::printf("decode steps by depth:%s; settled-depth changes: %lld\n", hist.c_str(),
              static_cast<long long>(changes));
  if (!steps_at.empty()) {
    int64_t steps = 0, slots = 0;
    for (const auto& [b, n] : steps_at) steps += n, slots += b * n;
    const auto& [top, at_top] = *steps_at.rbegin();
    std::printf(
        "batch fill: mean batch %.2f of %lld (%.0f%% of the steps at %lld); %.2f tokens a step, "
        "%.3f a slot of %lld, %.3f a sequence\n",
        static_cast<double>(slots) / steps, static_cast<long long>(top), 100.0 * at_top / steps,
        static_cast<long long>(top), static_cast<double>(step_tokens) / steps,
        static_cast<double>(step_tokens) / (steps * top), static_cast<long long>(top),
        static_cast<double>(step_tokens) / slots);
  }
  std::printf("measured step seconds (catch-up excluded), median [steps]:\n");
  int64_t last_class = -1;
  for (const auto& [key, v] : step_s) {
    if (key.first != last_class)
      std::printf("%s  class %4lld:", last_class < 0 ? "" : "\n",
                  static_cast<long long>(key.first));
    last_class = key.first;
    std::printf("  d%lld %.3f ms [%zu]", static_cast<long long>(key.second), 1e3 * median(v),
                v.size());
  }
  if (last_class >= 0) std::printf("\n");
  if (!reads.empty()) {
    std::printf("draft reads outside a round: %zu; the first ones (positions, ms):", reads.size());
    for (size_t i = 0; i < std::min<size_t>(reads.size(), 4); ++i)
      std::printf(" (%lld, %.3f)", static_cast<long long>(reads[i].first), 1e3 * reads[i].second);
    std::vector<double> per;
    for (size_t i = 1; i < reads.size(); ++i)
      per.push_back(reads[i].second / static_cast<double>(reads[i].first));
    std::printf("; after the first, median %.2f us per position\n", 1e6 * median(per));
  }
  std::printf("replay through this build's policy: %lld of %lld choices differ from the trace\n",
              static_cast<long long>(differ), static_cast<long long>(chosen));
  if (!e.opt.adaptive) {  // a pinned policy keeps no estimates
    std::printf("pinned at depth %lld: no estimates\n",
                static_cast<long long>(e.opt.initial_depth));
    return;
  }
  std::sort(batches.begin(), batches.end());
  std::vector<int64_t> classes;
  for (int64_t b : batches)
    if (classes.empty() || SpecDepthPolicy::batch_class(b) != classes.back())
      classes.push_back(SpecDepthPolicy::batch_class(b));
  for (int64_t cls : classes) {
    std::printf("  class %4lld: settled %lld; estimates (catch-up included):",
                static_cast<long long>(cls), static_cast<long long>(p.settled_depth(cls)));
    for (int64_t d = 0; d <= e.opt.max_depth; ++d) {
      const double s = p.step_seconds(d, cls);
      if (s > 0)
        std::printf("  d%lld %.3f ms %.0f tok/s", static_cast<long long>(d), 1e3 * s,
                    static_cast<double>(cls) * p.expected_tokens(d) / s);
    }
    std::printf("\n");
  }
  if (finished > 0)
    std::printf(
        "batch fill%s: %lld requests finished, %.2f empty slot-steps a request; factor "
        "at depth 0 / 1 / max: %.3f / %.3f / %.3f\n",
        e.opt.batch_fill ? "" : " (not weighed: --batch-fill)", static_cast<long long>(finished),
        p.empty_slot_steps_per_request(), p.fill_factor(0), p.fill_factor(1),
        p.fill_factor(e.opt.max_depth));
  const tandem::DraftReadCost& rc = p.read_cost();
  if (rc.known()) {
    answers.read_fixed.push_back(rc.fixed_seconds());
    answers.read_per_position.push_back(rc.seconds_per_position());
  }
  std::printf("read cost fit: %s fixed %.3f ms + %.3f us per position\n",
              rc.known() ? "" : "(unknown)", 1e3 * rc.fixed_seconds(),
              1e6 * rc.seconds_per_position());
  std::printf("acceptance per position:");
  for (int64_t j = 1; j <= e.opt.max_depth; ++j) std::printf(" %.3f", p.acceptance(j));
  std::printf("\n");
}

}  // namespace

// --set NAME=VALUE: one of the policy's numeric options, for every adaptive engine of the replay
// and the simulations (what-ifs on a recorded trace). False for an unknown name or a bad value.
bool set_option(SpecDepthOptions& o, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos) return false;
  const std::string name = assignment.substr(0, eq);
  char* end = nullptr;
  const double v = std::strtod(assignment.c_str() + eq + 1, &end);
  if (end == assignment.c_str() + eq + 1 || *end != '\0' || !(v >= 0)) return false;
  const auto n = static_cast<int64_t>(v);
  if (name == "margin")
    o.margin = v;
  else if (name == "jump_margin")
    o.jump_margin = v;
  else if (name == "explore_every")
    o.explore_every = n;
  else if (name == "probe_steps")
    o.probe_steps = n;
  else if (name == "min_dwell")
    o.min_dwell = n;
  else if (name == "time_window")
    o.time_window = n;
  else if (name == "accept_alpha")
    o.accept_alpha = v;
  else if (name == "catch_up_alpha")
    o.catch_up_alpha = v;
  else if (name == "max_catch_up_steps")
    o.max_catch_up_steps = v;
  else if (name == "slow_alpha")
    o.slow_alpha = v;
  else
    return false;
  return true;
}

int main(int argc, char** argv) {
  // --batch-fill / --relax: replay the adaptive engines with SpecDepthOptions::batch_fill /
  // accept_relax on, whatever the trace's engine lines recorded (older traces record neither).
  bool batch_fill = false, relax = false;
  std::vector<std::string> sets;  // --set NAME=VALUE, in order
  int arg = 1;
  for (; arg < argc - 1; ++arg) {
    if (std::strcmp(argv[arg], "--batch-fill") == 0) {
      batch_fill = true;
    } else if (std::strcmp(argv[arg], "--set") == 0 && arg + 2 < argc) {
      sets.emplace_back(argv[++arg]);
      SpecDepthOptions probe;
      if (!set_option(probe, sets.back())) {
        std::fprintf(stderr, "%s: --set %s: not NAME=VALUE of a numeric policy option\n", argv[0],
                     sets.back().c_str());
        return 2;
      }
    } else if (std::strcmp(argv[arg], "--relax") == 0) {
      relax = true;
    } else {
      break;
    }
  }
  if (arg != argc - 1) {
    std::fprintf(stderr,
                 "usage: %s [--batch-fill] [--relax] [--set NAME=VALUE ...] "
                 "TANDEM_SPEC_DEPTH_TRACE_FILE\n",
                 argv[0]);
    return 2;
  }
  const char* path = argv[argc - 1];
  std::ifstream f(path);
  if (!f) {
    std::fprintf(stderr, "%s: cannot read %s\n", argv[0], path);
    return 1;
  }
  std::vector<Engine> engines;
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    if (line[0] == 'e') {
      std::istringstream in(line.substr(1));
      long long max_depth = 0, initial = 0;
      int adaptive = 0, fill = 0, relaxed = 0;
      if (!(in >> max_depth >> initial >> adaptive)) {
        std::fprintf(stderr, "%s: malformed engine line '%s'\n", argv[0], line.c_str());
        return 1;
      }
      double catch_up_alpha = 0;
      in >> fill >> relaxed >> catch_up_alpha;  // absent from older traces
      Engine e;
      e.opt.max_depth = max_depth;
      e.opt.initial_depth = initial;
      e.opt.adaptive = adaptive != 0;
      e.opt.batch_fill = (batch_fill || fill != 0) && e.opt.adaptive;
      e.opt.accept_relax = (relax || relaxed != 0) && e.opt.adaptive;
      // The weight the engine ran with (older traces: the default), unless --set says otherwise.
      if (catch_up_alpha > 0) e.opt.catch_up_alpha = catch_up_alpha;
      if (e.opt.adaptive)
        for (const std::string& s : sets) set_option(e.opt, s);
      engines.push_back(std::move(e));
    } else if (!engines.empty()) {
      engines.back().lines.push_back(line);
    }
  }
  if (engines.empty()) {
    std::fprintf(stderr, "%s: no engine in %s\n", argv[0], path);
    return 1;
  }
  tandem::bench::SpecDepthSamples pooled;
  AnswerStats answer_stats;
  SpecDepthOptions sim;  // the adaptive engines' options (the last one's), else the defaults
  for (size_t i = 0; i < engines.size(); ++i) {
    report(engines[i], static_cast<int>(i), pooled, answer_stats);
    if (engines[i].opt.adaptive) sim = engines[i].opt;
  }
  constexpr int64_t kSteps = 1500;
  constexpr int kSeeds = 20;
  // Twice where the trace has answers at batch 1: without the draft's reads, and with them
  // (each answer's prompt unread, plain steps adding to the lag, catch-ups at the fitted cost).
  const tandem::bench::AnswerModel answers = answer_stats.model();
  for (const bool with_reads : {false, true}) {
    if (with_reads && answers.tokens <= 0) {
      std::printf(
          "(no simulation with catch-ups: the trace has no batch-1 answers or no read cost)\n");
      break;
    }
    if (with_reads)
      std::printf(
          "== the same with catch-ups: answers of %lld tokens to prompts of %lld positions the "
          "draft has not read, reads at %.3f ms + %.2f us per position; each answer's "
          "acceptance scaled as one of %zu measured answers'\n",
          static_cast<long long>(answers.tokens), static_cast<long long>(answers.prompt_positions),
          1e3 * answers.read_fixed_seconds, 1e6 * answers.read_seconds_per_position,
          answers.accept_scales.size());
    else
      std::printf(
          "== closed-loop simulation of this build's policy (max depth %lld, starts at %lld) on "
          "the trace's step times and acceptance, all engines pooled, no catch-ups: %d seeds of "
          "%lld steps per class\n",
          static_cast<long long>(sim.max_depth), static_cast<long long>(sim.initial_depth), kSeeds,
          static_cast<long long>(kSteps));
    for (int64_t cls : pooled.classes()) {
      const tandem::bench::BootstrapResult r = tandem::bench::bootstrap_class(
          pooled, cls, sim, kSteps, kSeeds, with_reads ? answers : tandem::bench::AnswerModel{});
      if (r.best_depth < 0) continue;
      std::string share;
      for (size_t d = 0; d < r.depth_share.size(); ++d)
        if (r.depth_share[d] >= 0.005)
          share += " " + std::to_string(d) + ":" +
                   std::to_string(static_cast<int>(std::lround(100 * r.depth_share[d]))) + "%";
      std::printf(
          "  class %4lld: best fixed depth %lld (%.0f tok/s); policy %.3f mean, %.3f worst of "
          "it; depths%s\n",
          static_cast<long long>(cls), static_cast<long long>(r.best_depth), r.best_rate,
          r.mean_ratio, r.worst_ratio, share.c_str());
    }
  }
  return 0;
}
