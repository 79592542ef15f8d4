// Runs one scheduled step on this rank's model runner: a prefill of chunks, a decode, or a
// speculative round, committing the sampled tokens to the sequences. The engine runs it on the
// scheduler's plan; under tensor parallelism every other rank runs it on the same plan rebuilt
// from rank 0's step message (step_message.h), so all ranks issue the same forwards.
#pragma once

#include <cstdint>
#include <utility>

#include "runtime/loop_clock.h"
#include "runtime/model_runner.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"
#include "runtime/spec_worker.h"

namespace tandem {

class StepExecutor {
 public:
  // spec: null for plain decoding.
  StepExecutor(ModelRunner& runner, OutputProcessor& out, SpecWorker* spec)
      : runner_(runner), out_(out), spec_(spec) {}

  // What the step did for the adaptive depth policy and the metrics: a speculative round's
  // acceptance and catch-up, a prefill's draft positions (empty for a plain decode step).
  SpecWorker::RoundStats run(const StepPlan& plan);
  // Plain decode steps charge their prepare, device and commit phases to this clock (the engine's;
  // followers keep none).
  void set_clock(LoopClock* clock) { clock_ = clock; }

 private:
  // Returns the positions the draft read with the prompts and the seconds it took
  // (SpecWorker::after_prefill).
  std::pair<int64_t, double> prefill(const std::vector<ScheduledChunk>& batch, bool fill_draft);
  void decode(const std::vector<Sequence*>& seqs);

  ModelRunner& runner_;
  OutputProcessor& out_;
  SpecWorker* spec_;
  LoopClock* clock_ = nullptr;
};

}  // namespace tandem
