// Everything one forward pass needs to know about its batch, passed explicitly (no globals).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "ops/attention_meta.h"

namespace tandem {

enum class ForwardMode {
  // Prompt tokens (prefill, chunked prefill, prefix-cache extend): naive MHA-form MLA over the
  // expanded keys of each sequence.
  kExtend,
  // One or more new tokens per sequence on top of a cache (decode, speculative verify, draft
  // steps): the absorbed 576-dim MQA form. Every per-token computation is the same whatever
  // the number of query tokens, so verify reproduces decode exactly.
  kDecode,
};

struct ForwardBatch {
  ForwardMode mode = ForwardMode::kExtend;
  Tensor input_ids;      // [T] i32
  AttentionMeta attn;    // token_pos doubles as the RoPE positions
  Tensor logit_rows;     // [R] i32: rows of T that need logits; undefined = every row
  int64_t total_kv = 0;  // sum of attn.seq_lens (host copy; sizes the extend gather)

  int64_t num_tokens() const { return input_ids.numel(); }
};

struct ForwardResult {
  Tensor logits;  // [R, V] f32
  Tensor hidden;  // [T, D]: the LM-head input (after the final norm), what the MTP layer consumes
  Tensor topk;    // [T, K] i32: top-k of the last indexer that ran (MTP index sharing)
};

}  // namespace tandem
