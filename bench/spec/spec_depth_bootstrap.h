// A closed-loop simulation of the adaptive depth policy on what a trace measured: per batch
// class the step seconds of each depth (every engine of the trace pooled: the fixed-depth rows
// and the adaptive one ran on the same machine, in the same classes) and the conditional
// acceptance of each draft position. A fresh policy then decides step after step; each step's
// seconds are drawn from the measured ones of its class and depth (so the noise, stalls included,
// is the hardware's own) and each sequence's accepted count from the measured acceptance. The
// policy's tokens per second against the best fixed depth's expected rate say how a policy change
// would have fared on that hardware, without it (spec_depth_replay prints it per class).
// Optionally (AnswerModel) the draft's catch-ups too: each sequence answers `tokens` tokens to a
// prompt of `prompt_positions` the draft has not read, every plain step adds a position to its
// lag, and a speculative step first reads the batch's whole lag at the measured read cost; a
// finished answer is replaced at once (its prefill is not modelled). Without it the policy is
// asked with no lag and reads nothing.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "runtime/spec_depth_policy.h"

namespace tandem::bench {

class SpecDepthSamples {
 public:
  // One decode step of a trace: depth, batch size, seconds without catch-up, and for depth > 0
  // each sequence's accepted draft count.
  void add_step(int64_t depth, int64_t batch, double seconds, const std::vector<int64_t>& accepted);

  // The batch classes with steps of at least two depths (what a simulation needs).
  std::vector<int64_t> classes() const;
  // Depths with steps in class cls.
  std::vector<int64_t> depths(int64_t cls) const;
  // Conditional acceptance of draft position j (1-based): accepted / reached; a position never
  // reached takes the deepest one below it that was (0.6 if none).
  double acceptance(int64_t j) const;
  // Expected committed tokens per sequence of a step of depth d.
  double expected_tokens(int64_t d) const;
  // Mean seconds of a step of depth d in class cls; for a depth without steps there, a straight
  // line through the two nearest measured depths >= 1 (plain decoding is never extrapolated);
  // < 0 when neither is possible.
  double mean_seconds(int64_t cls, int64_t d) const;
  // One step's seconds drawn from the measured ones (u in [0, 1)): a measured depth's own, or for
  // one without, the nearest measured depth's scaled by the ratio of their mean_seconds.
  double draw_seconds(int64_t cls, int64_t d, double u) const;

 private:
  std::map<int64_t, std::map<int64_t, std::vector<double>>> seconds_;  // class -> depth -> s
  std::vector<int64_t> reached_, accepted_;                            // per draft position
};

// Answers and the draft's reads outside a round, as a trace measured them (spec_depth_replay:
// the answers' lengths from their finishes, the prompts from the lag at an answer's first step,
// the read cost from the policy's fit).
struct AnswerModel {
  int64_t tokens = 0;            // decode tokens of an answer (0: no answers, no catch-ups)
  int64_t prompt_positions = 0;  // positions the draft lags on at an answer's first step
  double read_fixed_seconds = 0, read_seconds_per_position = 0;
  // Answers differ in how predictable they are: each answer's acceptance is the measured one
  // times a factor drawn from these (the trace's answers' first-position acceptance over the
  // mean); empty: every answer alike.
  std::vector<double> accept_scales;
  // Steps of each depth pinned (calibration, as bench-offline's warm-up) before the policy's
  // simulated steps.
  int64_t calibration_steps = 200;
};

struct BootstrapResult {
  int64_t best_depth = -1;  // the best fixed depth by expected rate (-1: the class cannot run)
  double best_rate = 0;     // its tokens per second
  double mean_ratio = 0, worst_ratio = 0;  // the policy's rate over best_rate, over the seeds
  std::vector<double> depth_share;         // share of the simulated steps at each depth
};

// `seeds` passes of `steps` decode steps of a batch of cls sequences, each through a fresh policy
// with options o (depths above what the class can run are left out of o.max_depth). With answers
// (tokens > 0) the best fixed depth is found the same way, each depth pinned on the same draws
// (its catch-ups being one prompt an answer, as a fixed-depth engine's prompt reads are), and the
// policy first calibrates on every depth pinned in turn, as an engine does at start.
BootstrapResult bootstrap_class(const SpecDepthSamples& s, int64_t cls, SpecDepthOptions o,
                                int64_t steps, int seeds, const AnswerModel& answers = {});

}  // namespace tandem::bench
