// A per-step record of the engine loop, for finding where throughput goes between two runs of the
// same workload (for example through HTTP against in-process, where requests arrive spread out):
// one text line per step with its wall-clock start, its kind, how many prompt tokens and
// sequences it carried, how many sequences waited, and how long the engine thread was busy with
// it. Off unless TANDEM_STEP_TRACE names a file; lines are appended, so several engines (the
// passes of bench-offline) can share one file. scripts/step_trace_summary.py reads it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>

namespace tandem {

struct StepPlan;

class StepTrace {
 public:
  // Opens the file TANDEM_STEP_TRACE names, or stays off when it is unset or empty. A file that
  // cannot be opened is reported once and the trace stays off (a diagnostic never stops serving).
  StepTrace();

  bool on() const { return file_ != nullptr; }
  // The engine thread woke with work: the step about to be planned starts now.
  void begin() {
    if (on()) begin_ = Clock::now();
  }
  // The step ran (its tokens are sent); `waiting` and `running` are the scheduler's counts after.
  void end(const StepPlan& plan, int64_t waiting, int64_t running);
  // The engine has nothing to do: write out what is buffered, so the file is whole while the
  // process lives (a reader need not stop the server first).
  void flush() {
    if (on()) std::fflush(file_.get());
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Close {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, Close> file_;
  Clock::time_point begin_{};
  // Wall-clock time at steady_clock's epoch, so lines carry Unix microseconds that a script can
  // line up with its own clock, without a wall-clock read per step.
  int64_t unix_us_at_steady_zero_ = 0;
};

}  // namespace tandem
