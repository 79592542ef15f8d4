// Turns a step's sequences into device inputs and runs the model: variable-width prefill
// forwards, and the fixed-width decode-shaped forwards (decode, verify, draft steps, draft
// extend) from static buffers per padded batch size, captured as CUDA graphs on GPUs. Owns the
// KV cache, the step's workspace and the graphs; sampling of the next token happens here too,
// on the device that holds the logits.
#pragma once

#include <atomic>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "model/model.h"
#include "ops/graph_runner.h"
#include "runtime/batch_builder.h"
#include "runtime/draft_vocab.h"
#include "runtime/engine_options.h"
#include "runtime/sequence.h"

namespace tandem {

// The row counts a warm-up runs up to `limit`: the ladder 1, 2, 3, 4, 6, 8, 12, ... (2^k and
// 3 * 2^(k-1)) below it, then `limit` itself, so that every count up to it shares its row bucket
// (the top of its rung, the GEMM backends' unit of kernel choice) with one of them.
std::vector<int64_t> warm_up_rows(int64_t limit);

// The padded batch sizes decode-shaped forwards run at (and are captured at), up to the bucket
// of max_batch: 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, then multiples of 64.
std::vector<int64_t> decode_batch_buckets(int64_t max_batch);

class ModelRunner {
 public:
  // The shapes a decode-shaped forward takes. kDraftLoop: all S - 1 draft steps of a round in
  // one forward (draft_loop).
  enum class Kind { kTarget = 0, kDraft = 1, kDraftReuse = 2, kDraftLoop = 3 };

  ModelRunner(std::shared_ptr<const Model> model, const EngineOptions& opt, int64_t num_pages,
              int64_t context_length, int64_t draft_steps);
  ~ModelRunner();

  // Before each step: the workspace starts empty, the backend takes the engine's kernel mode.
  void begin_step();

  // Prefill chunks of any width: the target, then the draft over (h_i, x_{i+1}) pairs. A target
  // prefill of at most EngineOptions::cuda_graph_max_prefill_tokens padded tokens replays a graph.
  // graphed (optional): set to whether the padded static batch ran.
  ForwardResult extend(const std::vector<SequenceChunk>& chunks, bool* graphed = nullptr);
  ForwardResult extend_draft(const std::vector<SequenceChunk>& chunks, const Tensor& hidden);

  // A forward in which every sequence runs exactly q query tokens. logit_pos: for each sequence
  // the index (0..q-1) of the token whose logits are wanted, or empty for every token. hidden /
  // reuse: the draft's inputs ([B * q, D] and [B * q, K]).
  ForwardResult forward_fixed(Kind kind, const std::vector<SequenceChunk>& chunks, int64_t q,
                              const std::vector<int64_t>& logit_pos, const Tensor& hidden,
                              const Tensor& reuse);
  // The draft steps 2..S of a round in one captured forward (one graph per depth S): steps[j]
  // holds step j + 1's chunk per sequence (its position; the token of step 1 only, later ones
  // come from the previous step's argmax on the device). hidden: [B, D] the draft state that
  // produced d_1; reuse: [B, K] or undefined. Returns d_2 .. d_S as [S - 1][B].
  std::vector<std::vector<int32_t>> draft_loop(const std::vector<std::vector<SequenceChunk>>& steps,
                                               const Tensor& hidden, const Tensor& reuse);
  // Before the first request (Engine, on GPUs): prefill forwards of throwaway tokens at every
  // row count of warm_up_rows(max_tokens) (one sequence), then of 2 .. max_seqs one-token
  // sequences, the draft's after the target's, written into KV pages no request holds yet. The
  // GEMM backends choose kernels per row bucket (cuBLASLt: heuristics::lt_row_bucket) and each
  // kernel's first launch cost ~3 ms on an H100, paid by whichever request first met it
  // (a 2,048-token step of the default model took 35 ms instead of 1.5). Then every graphed
  // prefill shape (EngineOptions::cuda_graph_max_prefill_tokens) until its graphs replay.
  // Returns the forwards run.
  int64_t warm_up(int64_t max_tokens, int64_t max_seqs);
  bool captures() const { return graphs_ != nullptr; }
  // Graph-runner calls that ran the forward instead of replaying it (a new shape's eager warm-up
  // or capture) on a GPU with graphs on; 0 on the CPU. Read from any thread.
  uint64_t graph_builds() const { return graph_builds_.load(std::memory_order_relaxed); }

  // Adaptive speculation: the target hidden state of every position the target computes
  // (prefill, decode, verify) is kept at its KV slot, so that the draft can read positions it
  // skipped later (plain steps, deferred prompts, reused prefixes). stash_rows gathers them back:
  // slots [N] -> [N, D].
  bool stashes() const { return stash_.defined(); }
  Tensor stash_rows(const std::vector<int32_t>& slots);
  int64_t page_size() const { return page_size_; }

  // Next token of each sequence from logit row rows[i]: the device argmax when all are greedy,
  // else one sampling op with each request's own seeded uniforms.
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<Sequence*>& seqs,
                              const std::vector<int64_t>& rows);
  std::vector<int32_t> argmax(const Tensor& logits);  // [T] on the host
  // Constrained decoding: logits [R, V] masked in place, row r by rows[r] (a token bitmask of
  // (V + 31) / 32 words; null or past the end: unmasked). One upload, one op.
  void mask_rows(const Tensor& logits, const std::vector<const uint32_t*>& rows);
  // The draft's token of each row of its logits (argmax), masked by rows[r] as mask_rows (masks
  // over the whole vocabulary). With a draft vocabulary (--speculative-token-map) the logits
  // cover its columns only: the masks are mapped onto them and the columns back to token ids;
  // a constrained row that allows none of the subset proposes its first allowed token.
  std::vector<int32_t> draft_argmax(const Tensor& logits, const std::vector<const uint32_t*>& rows);
  // The draft's LM head: the vocabulary subset's, or null for the model's own.
  const Weight* draft_head() const;

  // Host values as the model's activations (its dtype, its device) / host index vectors.
  Tensor activations(const std::vector<float>& v, const Shape& shape) const;
  Tensor indices(const std::vector<int32_t>& v) const;
  std::vector<float> hidden_row(const Tensor& hidden, int64_t row) const;

  Workspace& workspace() { return *workspace_; }
  const Model& model() const { return *model_; }
  Device device() const { return model_->device(); }

 private:
  struct StaticBatch;
  int64_t static_max_pages() const;
  // Row maps of chunks padded to q tokens each: `last` each chunk's last real token (0..q-1),
  // `packed` the padded row of each real token in build_forward_batch's order, `padded` for each
  // padded row the packed row it takes its input from (padding repeats its chunk's last).
  struct PaddedRows {
    std::vector<int64_t> last;
    std::vector<int32_t> packed, padded;
  };
  static PaddedRows padded_rows(const std::vector<SequenceChunk>& chunks, int64_t q);
  ForwardResult unpad(const ForwardResult& r, const PaddedRows& m);
  // The tokens per sequence of a graphed prefill of `chunks` (a bucket), or 0: eager.
  int64_t graphed_prefill_width(const std::vector<SequenceChunk>& chunks) const;
  // forward_fixed on the static batch of its shape (graph replay on GPUs); pad: chunks may hold
  // fewer than q tokens (fixed_layout).
  ForwardResult run_static(Kind kind, const std::vector<SequenceChunk>& chunks, int64_t q,
                           const std::vector<int64_t>& logit_pos, const Tensor& hidden,
                           const Tensor& reuse, bool pad);
  ForwardBatch static_forward_batch(int64_t Bb, int64_t q, bool logit_rows, Tensor* inputs) const;
  std::unique_ptr<StaticBatch> make_draft_loop(int64_t Bb, int64_t K, int64_t S) const;

  std::shared_ptr<const Model> model_;
  int64_t page_size_, ctx_len_, S_;
  bool deterministic_;
  int64_t prefill_graph_tokens_;  // EngineOptions::prefill_graph_tokens for this device
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Workspace> workspace_;  // reset at the start of every step
  std::unique_ptr<GraphRunner> graphs_;   // decode-shaped forwards, captured per shape
  bool counts_builds_ = false;            // graphs_ replays (a GPU with graphs on)
  std::atomic<uint64_t> graph_builds_{0};
  std::map<int64_t, std::unique_ptr<StaticBatch>> statics_;
  Tensor stash_;  // [num_pages * page_size, D] in the activation dtype (adaptive speculation)
  std::unique_ptr<DraftVocab> draft_vocab_;  // --speculative-token-map, or null
};

}  // namespace tandem
