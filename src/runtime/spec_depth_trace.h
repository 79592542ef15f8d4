// A record of everything the adaptive depth policy was asked and shown, one line per call, so
// that a run on the GPU can be replayed through the policy on the CPU (tests/unit replays
// recorded traces) and a wrong choice traced to the observation behind it. Off unless
// TANDEM_SPEC_DEPTH_TRACE names a file; lines are appended, so the engines of one bench-offline
// run (one per row and pass) share a file, each opening with its `e` line.
//
//   e <max_depth> <initial_depth> <adaptive 0|1> [<batch_fill> <accept_relax> <catch_up_alpha>]
//                                                            an engine starts
//   c <batch> <lag_tokens> <remaining_tokens> <depth>        choose() and what it returned
//   o <depth> <batch> <seconds> <catch_up_seconds> <catch_up_tokens> <accepted...>   observe()
//   f (as o)                                   a step at a depth the override forced, not shown
//   g (as o)                                   a chosen or pinned step that built a CUDA graph:
//                                              not shown, overridden()
//   p (as o)                                   a pinned step, shown as calibrate()
//   s                                          settle(): the pin was lifted
//   r <seconds> <positions>                                  observe_prompt_reads()
//   x <tokens>                                               observe_finish(): a request ended
//   # <text>                                                 a settled-depth change, as logged
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runtime/spec_depth_policy.h"

namespace tandem {

class SpecDepthTrace {
 public:
  // Opens the file TANDEM_SPEC_DEPTH_TRACE names, or stays off. A file that cannot be opened is
  // reported once and the trace stays off (a diagnostic never stops serving).
  // The engine line records the options a replay needs: `e max initial adaptive fill relax
  // catch_up_alpha`.
  explicit SpecDepthTrace(const SpecDepthOptions& o);

  bool on() const { return file_ != nullptr; }
  void choose(int64_t batch, int64_t lag_tokens, int64_t remaining_tokens, int64_t depth,
              int64_t max_remaining_tokens = -1);
  enum class Step { kChosen, kForced, kPinned, kBuilt };  // an `o`, `f`, `p` or `g` line
  void observe(int64_t depth, int64_t batch, double seconds, double catch_up_seconds,
               int64_t catch_up_tokens, const std::vector<int64_t>& accepted,
               Step step = Step::kChosen);
  void settle();
  void prompt_reads(double seconds, int64_t positions);
  void finish(int64_t tokens);
  void change(const std::string& text);
  // Writes out what is buffered (the engine is idle).
  void flush() {
    if (on()) std::fflush(file_.get());
  }

 private:
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> file_;
};

}  // namespace tandem
