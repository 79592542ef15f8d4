// Adaptive speculation depth: how many draft tokens (0 = plain decoding) the next decode step
// runs, chosen to maximize expected committed tokens per second at the step's batch size.
//
// The policy learns both sides of that ratio from the engine itself:
// - expected tokens of a round of depth s, E(s) = 1 + sum_{i<=s} prod_{j<=i} a_j, from a running
//   estimate of the conditional acceptance a_j of draft position j (how often d_j is accepted when
//   d_1 .. d_{j-1} were);
// - the wall time of a step of depth s for each batch-size class (the padded batch sizes that
//   the engine captures graphs for), the median of the latest measured steps (one stall, a host
//   hiccup or another shape's capture, must not move a depth: with a running average one 6 ms
//   plain step among 2.2 ms ones on the CPU sent the shipped model from plain decoding to depth 3
//   and back 32 times in one pass, 0.82x of plain decoding).
// Each class keeps its own depth. It moves at most once per min_dwell steps, only toward a depth
// whose estimated rate beats the current one by a margin (so a noisy measurement cannot flip it
// back and forth), straight to a depth it has measured that wins by jump_margin (or to plain
// decoding, measured, that wins by the margin) and otherwise one
// depth at a time; every move is logged. A class stands in the
// step times of the nearest class that measured a depth for the depths it has not run itself
// (scaled by their ratio at a depth both ran), and starts where those estimates point. Every depth
// that may compete is probed once in each class (a few steps; the rate is rarely unimodal enough
// to find plain decoding from depth 3 by neighbours alone), and periodically the depth measured
// longest ago again (its estimate becomes the probe's median), so that the estimates follow the
// load.
// Plain host code with no clock of its own: tests feed it recorded traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/draft_read_cost.h"

namespace tandem {

struct SpecDepthOptions {
  int64_t max_depth = 3;        // deepest round (the engine's graphs and KV budget allow it)
  int64_t initial_depth = 3;    // where every batch-size class starts
  bool adaptive = true;         // false: always initial_depth
  double margin = 0.03;         // a move needs an estimated rate this much above the current one
  double jump_margin = 0.15;    // a move of more than one depth: a measured rate this much above
  int64_t explore_every = 128;  // steps of a class between probes of its stalest depth
  int64_t probe_steps = 5;      // steps of one probe (its estimate: their median)
  int64_t untimed_steps = 2;    // a class's first steps at a depth (graph captures, algorithm
                                // choice) are not timed
  int64_t untimed_reads = 1;    // the process's first draft reads outside a round (lazy kernel
                                // loading of the eager draft forward) are not counted
  int64_t min_dwell = 16;       // steps of a class between two moves of its settled depth
  // A step time estimate is the median of this many latest steps (was 15: a slow spell of the
  // machine, ~20 steps at up to 3x on the H100, moved one depth's median and sent the class
  // plain; docs/runtime.md).
  int64_t time_window = 63;
  double accept_alpha = 0.01;  // weight of one new acceptance observation
  // Weight of one speculative step in the catch-up average (was 0.05). Its memory should span
  // several answers: at concurrency 1 one prompt is read per answer (~45 rounds on the shipped
  // model), and at 0.05 the average swings 0.25-2.5x of its mean, so where reads are dear a move
  // decided right after one sees every depth dearer (spec_depth_replay's simulation on the
  // H200's costs, reads at 20 us a position: 0.956 of depth 2 at 0.05, 0.997 at 0.01). On the
  // H100, where reads are cheap, the two weights measured alike (docs/runtime.md).
  double catch_up_alpha = 0.01;
  double prior_accept = 0.6;  // conditional acceptance assumed before any is seen
  // A speculative step whose catch-up would cost more than this many plain steps runs plain
  // instead, unless the tokens the batch may still generate would win the catch-up back.
  double max_catch_up_steps = 4.0;
  // Batch fill (off until measured on the GPU; bench-offline --adaptive-batch-fill): weigh each
  // depth's rate by the batch slots that requests leave empty between them. Every finished
  // request leaves about the same number k of empty slot-steps behind it whatever the depth (its
  // replacement's prefill, the stagger, a drain), and an empty slot costs a step's time, so a
  // depth's cost per token is about 1 + k E(d) / L times its per-step estimate, L the tokens a
  // request generates: k and L measured from the steps' batch sizes against the largest of the
  // last fill_window steps and the finished requests (observe_finish). docs/benchmarks.md,
  // "Where concurrency 8 goes".
  bool batch_fill = false;
  int64_t fill_window = 256;
  int64_t fill_min_finished = 8;  // finished requests before k and L are trusted
  // Acceptance relaxation (on since session 39; docs/runtime.md):
  // plain steps observe no acceptance, so a class that went plain after a hard answer kept that
  // answer's low estimate until a probe, and a probe's few rounds barely move it (the shipped
  // model at concurrency 1, H100: 96% plain, 0.93x of depth 1). With it each sequence-step of
  // plain decoding moves the running acceptance toward its long-run mean (weight slow_alpha, a
  // plain mean before) by accept_alpha, as an observation would: the sequences whose acceptance
  // the running value followed are gone after as many steps as it takes to learn a new one.
  bool accept_relax = true;   // on since session 39 (docs/runtime.md, "Acceptance relaxation")
  double slow_alpha = 0.001;  // weight of one observation in the long-run acceptance
};

class SpecDepthPolicy {
 public:
  explicit SpecDepthPolicy(SpecDepthOptions o);

  // The depth of the next decode step of `batch` sequences, whose draft lags lag_tokens positions
  // in all (what a speculative step would first have to catch up on) and which may generate
  // remaining_tokens more in all (their max_new_tokens left), max_remaining_tokens the most any
  // one of them may (< 0: unknown). A round commits at most that many tokens a sequence, so
  // drafts past max_remaining_tokens - 1 are never committed: outside probes the step runs at
  // most that deep (the settled depth does not move).
  int64_t choose(int64_t batch, int64_t lag_tokens = 0, int64_t remaining_tokens = 0,
                 int64_t max_remaining_tokens = -1);
  // A finished decode step: its depth, batch size and wall seconds, for depth > 0 each sequence's
  // accepted draft count, and the part of the seconds the draft spent catching up (reading
  // prompts and plainly decoded positions it skipped). Catch-up is a cost of speculating at all,
  // not of one depth: it is averaged over every speculative step of the class and added to each
  // depth > 0 (so a short answer to a long prompt may not be worth drafting).
  // catch_up_tokens: the positions that catch-up read (its cost is fitted: DraftReadCost).
  void observe(int64_t depth, int64_t batch, double seconds, const std::vector<int64_t>& accepted,
               double catch_up_seconds = 0.0, int64_t catch_up_tokens = 0);

  // The step just chosen for `batch` ran at another depth (the engine's depth_override) and is
  // not observed: a probe it belonged to starts over when the class next decides.
  void overridden(int64_t batch);
  // A decode step at a depth the engine pinned (Engine::pin_depth: calibration passes, such as
  // bench-offline's per-depth warm-up), not chosen here: a measurement like observe()'s (step
  // time at that depth, acceptance, draft reads), but never part of a probe, and not one of the
  // class's own steps. Then settle() once the pin is lifted.
  void calibrate(int64_t depth, int64_t batch, double seconds, const std::vector<int64_t>& accepted,
                 double catch_up_seconds = 0.0, int64_t catch_up_tokens = 0);
  // Every class that has measured depths moves straight to its best estimate (logged), free to
  // move again at once: what calibration measured decides where each class starts, instead of
  // each re-measuring it in probes. A batch that drains through many classes in a few dozen steps
  // cannot afford those (the shipped model at concurrency 64 with answers of 24-96 tokens, H100:
  // probes of depths 2-4 at batch 64 in the timed pass, 0.89x of plain decoding).
  void settle();
  // E(depth): expected committed tokens per sequence per step.
  double expected_tokens(int64_t depth) const;
  // Conditional acceptance estimate of draft position j (1-based).
  double acceptance(int64_t j) const;
  // Estimated seconds of a step (< 0: unknown).
  double step_seconds(int64_t depth, int64_t batch) const;
  // The depth the class of `batch` has settled on (probes aside).
  int64_t settled_depth(int64_t batch) const;
  // Whether steps of `batch` sequences are expected to speculate: the class's settled depth, or
  // for a class not seen yet the nearest seen class's (where it would start), is above 0.
  bool drafts_at(int64_t batch) const;
  // Whether the draft should read `positions` prompt positions now, along with their prefill,
  // for a batch of `batch` sequences that may still generate remaining_tokens in all: where it
  // drafts, and the batch's remaining tokens win the reading back at the best measured depth (as
  // a dear catch-up must, worth_catching_up; but no read is made only for being cheap). Unread
  // positions are the sequences' lag, which a catch-up reads before they can speculate.
  bool worth_reading(int64_t batch, int64_t positions, int64_t remaining_tokens) const;
  // The draft read `positions` prompt positions with a prefill step in `seconds` (device
  // included): its cost per position, as catch-ups also measure it; and a cost of speculating,
  // charged to the next speculative step's class like the catch-up it replaced, so that depth
  // choices weigh it as before.
  void observe_prompt_reads(double seconds, int64_t positions);
  // A request finished after generating `tokens` (batch fill: SpecDepthOptions::batch_fill).
  void observe_finish(int64_t tokens);
  // The batch-fill factor of a depth's cost per token, 1 + k E(depth) / L; 1 while off or before
  // fill_min_finished requests have finished.
  double fill_factor(int64_t depth) const;
  // Empty slot-steps per finished request so far (k; 0 before any finished).
  double empty_slot_steps_per_request() const;

  // The fitted cost of the draft's reads outside a round (catch-ups, prompt reads).
  const DraftReadCost& read_cost() const { return reads_; }
  // Decode steps run at each depth [0, max_depth].
  const std::vector<uint64_t>& histogram() const { return histogram_; }
  // Settled-depth changes since the last call, one line each ("batch 32: depth 3 -> 2 ...").
  std::vector<std::string> take_changes();

  // The batch-size class of a batch: the padded sizes the engine captures graphs for.
  static int64_t batch_class(int64_t batch);

 private:
  struct Timing {
    double seconds = 0;                   // the estimate: lower median of `window`
    std::vector<double> window;           // the latest timed steps (a probe's replace them all)
    size_t next = 0;                      // where the next one goes once the window is full
    int64_t samples = 0;                  // timed steps
    int64_t seen = 0;                     // steps including the untimed first one
    int64_t updated = 0;                  // the class's step count at the last timed sample
    std::vector<double> probe;            // the timed samples of the probe in progress
    void add(double s, size_t capacity);  // one timed step: window and estimate
  };
  struct CatchUp {
    double reads = 0, positions = 0, unpriced_seconds = 0;
  };
  struct ClassState {
    int64_t cls = 0;  // the batch-size class
    int64_t depth = 0;
    std::vector<Timing> timing;  // [max_depth + 1]
    int64_t steps = 0;
    int64_t last_move = 0;  // steps at the last move
    // What a speculative step of the class reads outside its round, on average: reads (one
    // forward or a prompt read each), positions, and seconds a caller gave without positions.
    // Priced by the fitted read cost whenever it is needed (catch_up_seconds), so that a better
    // fit reprices what the class has seen at once.
    CatchUp catch_up;
    int64_t probe_depth = -1, probe_left = 0;
    int64_t last_spec = 0;  // steps at the last speculative step
    // The depth of the class's last observed step (-1: none yet). A catch-up right after a plain
    // step pays for the plain steps before it, not for the depth (see observe).
    int64_t last_observed = -1;
  };
  ClassState& state(int64_t batch);
  const ClassState* find(int64_t batch) const;
  static double class_distance(int64_t a, int64_t b);  // |log2(a / b)|
  const ClassState* nearest_class(int64_t cls) const;  // the seen class nearest to cls, or null
  double borrowed_seconds(const ClassState& c, int64_t depth) const;
  // Whether c or a class within one doubling of it has measured plain decoding.
  bool plain_measured_near(const ClassState& c) const;
  double class_seconds(const ClassState& c, int64_t depth) const;
  double class_rate(const ClassState& c, int64_t depth, int64_t cls) const;
  double catch_up_seconds(const ClassState& c) const;  // per speculative step
  void decide(ClassState& c, int64_t cls);
  bool worth_catching_up(const ClassState& c, int64_t cls, int64_t depth, int64_t lag_tokens,
                         int64_t remaining_tokens) const;
  // Whether reading `positions` positions is worth it for class c at depth (a depth not measured
  // yet counts as the best measured one): cheap (within max_catch_up_steps plain steps, where
  // cheap_ok), or won back by remaining_tokens.
  bool worth_read(const ClassState& c, int64_t cls, int64_t depth, int64_t positions,
                  int64_t remaining_tokens, bool cheap_ok) const;
  void start_probe(ClassState& c, int64_t depth);
  // observe() and calibrate(): pinned steps are never part of a probe.
  void record(int64_t depth, int64_t batch, double seconds, const std::vector<int64_t>& accepted,
              double catch_up_seconds, int64_t catch_up_tokens, bool pinned);

  SpecDepthOptions o_;
  std::vector<std::pair<int64_t, ClassState>> classes_;  // by class, in first-seen order
  std::vector<double> accept_;                           // [max_depth]: a_1 .. a_S
  std::vector<int64_t> accept_n_;                        // observations of each position
  std::vector<double> accept_slow_;                      // [max_depth]: long-run a_1 .. a_S
  std::vector<uint64_t> histogram_;
  // What the draft's reads outside a round cost (catch-ups and prompts read with their prefill).
  DraftReadCost reads_;
  // Prompt reads and their positions not yet charged to a speculative step.
  int64_t pending_reads_ = 0, pending_positions_ = 0;
  std::vector<std::string> changes_;
  // Batch fill: the latest fill_window decode steps' batch sizes (a ring), the empty slot-steps
  // counted against their largest, and the finished requests with their tokens.
  std::vector<int64_t> recent_batches_;
  size_t recent_next_ = 0;
  double empty_slot_steps_ = 0;
  int64_t finished_ = 0;
  double finished_tokens_ = 0;
  void note_batch(int64_t batch);
};

}  // namespace tandem
