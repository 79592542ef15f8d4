#include "runtime/step_executor.h"

#include <tuple>

#include "core/error.h"

namespace tandem {

SpecWorker::RoundStats StepExecutor::run(const StepPlan& plan) {
  TD_CHECK(plan.draft_steps == 0 || spec_,
           "a speculative step ({} drafts) on a runner built without speculation (do all ranks "
           "have the same --speculative-* flags?)",
           plan.draft_steps);
  switch (plan.kind) {
    case StepPlan::Kind::kIdle:
      break;
    case StepPlan::Kind::kPrefill: {
      SpecWorker::RoundStats stats;
      std::tie(stats.prefill_draft_tokens, stats.prefill_draft_seconds) =
          prefill(plan.prefill, plan.fill_draft);
      return stats;
    }
    case StepPlan::Kind::kDecode:
      if (plan.draft_steps > 0) return spec_->round(plan.decode, plan.draft_steps);
      decode(plan.decode);
      // A speculating engine's plain step (adaptive depth 0): the draft catches up later.
      if (spec_) spec_->after_plain_step(plan.decode);
      break;
  }
  return {};
}

// Chunks that reach the end of their prompt sample its first token from their logit row (each
// chunk contributes its last token's row).
std::pair<int64_t, double> StepExecutor::prefill(const std::vector<ScheduledChunk>& batch,
                                                 bool fill_draft) {
  std::vector<SequenceChunk> chunks;
  for (auto& b : batch)
    chunks.push_back({&b.seq->pages,
                      b.start,
                      {b.seq->tokens.begin() + b.start, b.seq->tokens.begin() + b.end},
                      false});
  bool graphed = false;
  ForwardResult r = runner_.extend(chunks, &graphed);
  out_.count_step();
  if (graphed) out_.count_graphed_prefill();
  std::vector<Sequence*> done;
  std::vector<int64_t> done_rows, hidden_rows;
  int64_t row_end = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Sequence& s = *batch[i].seq;
    s.kv_len = batch[i].end;
    row_end += batch[i].end - batch[i].start;
    if (batch[i].end == static_cast<int64_t>(s.tokens.size())) {
      done.push_back(&s);
      done_rows.push_back(static_cast<int64_t>(i));
      hidden_rows.push_back(row_end - 1);  // the chunk's last token in the hidden states
    }
  }
  if (!done.empty()) {
    const std::vector<int32_t> next = runner_.sample(r.logits, done, done_rows);
    for (size_t i = 0; i < done.size(); ++i) {
      Sequence& s = *done[i];
      s.prefilled = true;
      if (s.req.return_hidden_states)
        s.pending_hidden.push_back(runner_.hidden_row(r.hidden, hidden_rows[i]));
      OutputProcessor::commit(s, {next[i]});
    }
  }
  return spec_ ? spec_->after_prefill(batch, r, fill_draft) : std::pair<int64_t, double>{0, 0.0};
}

void StepExecutor::decode(const std::vector<Sequence*>& seqs) {
  std::vector<SequenceChunk> chunks;
  for (Sequence* s : seqs) chunks.push_back({&s->pages, s->kv_len, {s->tokens.back()}, false});
  ForwardResult r = runner_.forward_fixed(ModelRunner::Kind::kTarget, chunks, 1,
                                          std::vector<int64_t>(seqs.size(), 0), Tensor(), Tensor());
  if (clock_) clock_->lap(LoopPhase::kPrepare);  // the graph is launched, not finished
  out_.count_step();
  std::vector<int64_t> rows(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) rows[i] = static_cast<int64_t>(i);
  const std::vector<int32_t> next = runner_.sample(r.logits, seqs, rows);
  if (clock_) clock_->lap(LoopPhase::kDevice);
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    s.kv_len += 1;
    if (s.req.return_hidden_states)
      s.pending_hidden.push_back(runner_.hidden_row(r.hidden, static_cast<int64_t>(i)));
    OutputProcessor::commit(s, {next[i]});
  }
  if (clock_) clock_->lap(LoopPhase::kCommit);
}

}  // namespace tandem
