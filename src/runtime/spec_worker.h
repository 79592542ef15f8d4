// MTP speculative decoding on top of the model runner: after a prefill, the draft reads the
// prompt's (h_i, x_{i+1}) pairs; each round then drafts S tokens (the draft feeding its own
// hidden state), the target verifies [x_L, d_1 .. d_S] in one forward, acceptance keeps the
// longest agreeing prefix plus a bonus token (the exact rejection rule when sampling), and the
// draft re-reads the verified positions with the target's hidden states.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/constrained_decoding.h"
#include "runtime/engine_options.h"
#include "runtime/model_runner.h"
#include "runtime/output_processor.h"
#include "runtime/scheduler.h"

namespace tandem {

class SpecWorker {
 public:
  // catch_up_tokens: the most lagging positions one catch-up forward reads (the step's prefill
  // budget, so that it fits the workspace as a prefill does).
  SpecWorker(ModelRunner& runner, OutputProcessor& out, const SpeculativeOptions& opt,
             bool profile_phases, int64_t catch_up_tokens);

  // What a step did: a round's acceptance and catch-up (for the adaptive depth policy), a
  // prefill's draft reads (for the metrics).
  struct RoundStats {
    std::vector<int64_t> accepted;     // drafts accepted, per sequence of the round
    double catch_up_seconds = 0;       // wall time of the draft catch-up (not the round's own cost)
    int64_t catch_up_tokens = 0;       // positions the catch-up read
    int64_t prefill_draft_tokens = 0;  // a prefill step: positions the draft read with it,
    double prefill_draft_seconds = 0;  // and the wall time of that (timed with the stash only)
  };

  // Draft KV for the prefilled chunks and each finished prompt's first draft token. With the
  // hidden-state stash (adaptive depth) only where fill (the depth policy expects to speculate)
  // and the draft has not fallen behind on the sequence; the others' positions are left to a
  // catch-up at their first round, so an engine that decodes plainly never pays for the draft.
  // Returns the positions the draft read and, with the stash, the seconds it took (the device
  // synchronized before, for the adaptive policy's cost of reading).
  std::pair<int64_t, double> after_prefill(const std::vector<ScheduledChunk>& batch,
                                           const ForwardResult& target, bool fill);
  // One round of S drafts (1 <= S <= the runner's depth) for every sequence; their pages already
  // hold S + 1 more positions.
  RoundStats round(const std::vector<Sequence*>& seqs, int64_t S);
  // A plain decode step of a speculating engine (adaptive depth 0): the target only, its hidden
  // states stashed for the draft's catch-up.
  void after_plain_step(const std::vector<Sequence*>& seqs);

 private:
  // The draft reads the positions it missed while the engine decoded plainly (draft_lag > 0),
  // from their stashed target hidden states, and drafts d_1 from the last of them.
  // Returns the positions it read.
  int64_t catch_up(const std::vector<Sequence*>& seqs);
  std::vector<std::vector<int32_t>> draft(const std::vector<Sequence*>& seqs, int64_t S,
                                          RoundMasks& masks);
  // Masks the verify logits [B * (S + 1), V]: row b * (S + 1) + i by masks.row(b, i).
  void mask_verify(const Tensor& logits, const RoundMasks& masks, int64_t B, int64_t S);
  void set_next_drafts(const std::vector<Sequence*>& seqs, const ForwardResult& d,
                       const std::vector<int64_t>& token_end);

  ModelRunner& runner_;
  OutputProcessor& out_;
  const SpeculativeOptions& opt_;
  double simulated_rate_;  // accept_simulated's rate, when simulating
  bool profile_;
  int64_t catch_up_tokens_;
};

}  // namespace tandem
