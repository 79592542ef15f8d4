// What it costs the draft to read positions outside a round (a catch-up over positions decoded
// plainly, or prompts read along with their prefill): seconds = fixed + per_position x positions,
// fitted to the most recent measurements.
//
// Robust on purpose: the first reads of a process pay one-off costs (lazy loading of the kernels
// an eager draft forward uses, workspace growth), tens to hundreds of times the steady cost. One
// such sample taken at face value makes the adaptive policy price every later catch-up as
// unaffordable, so that it stops speculating for good (in simulation,
// SpecDepthPolicy.AOneOffCostOfTheFirstCatchUpDoesNotStopSpeculating; the likely reason for
// depth 0 in every cell of the H200 run of 2026-12-05). So the process's first read is not
// counted, and the fit is a median one: a few samples far off the line cannot move it. (Not
// counting the first read of every power-of-two class of lengths instead cost the short passes
// of ProbesFromPlainDecodingWaitWhileTheCatchUpWouldCostMore a quarter of their throughput:
// there every catch-up is of a new length, and a dear one must be priced from the first.)
#pragma once

#include <cstdint>
#include <deque>

namespace tandem {

class DraftReadCost {
 public:
  // untimed: reads not counted at all (one-off costs); window: samples the fit uses.
  explicit DraftReadCost(int64_t untimed = 1, int64_t window = 32);

  // A read of `positions` positions took `seconds` (device included).
  void observe(int64_t positions, double seconds);
  // Whether any counted read was seen (else seconds() is 0).
  bool known() const { return !samples_.empty(); }
  // The fitted seconds of reading `positions` positions (0 for none, or while unknown).
  double seconds(int64_t positions) const;
  double fixed_seconds() const { return fixed_; }
  double seconds_per_position() const { return per_position_; }

 private:
  void fit();

  struct Sample {
    double positions, seconds;
  };
  int64_t untimed_, window_, seen_ = 0;
  std::deque<Sample> samples_;
  double fixed_ = 0, per_position_ = 0;
};

}  // namespace tandem
