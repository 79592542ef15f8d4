// Where each query token sits in the paged KV cache. Built by the runtime per forward; the
// tensors live on the device that runs the forward (i32 everywhere).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace tandem {

struct AttentionMeta {
  Tensor token_seq;     // [T]: batch row (sequence) of each query token
  Tensor token_pos;     // [T]: position of each query token; it attends to positions [0, pos]
  Tensor slot_mapping;  // [T]: cache slot receiving each token's new KV row
  Tensor page_table;    // [B, max_pages]: page ids of each sequence, in position order
  Tensor seq_lens;      // [B]: KV length of each sequence after this forward
  int64_t page_size = 0;
  int64_t max_seq_len = 0;  // max over seq_lens (host value, sizes scratch)

  int64_t num_tokens() const { return token_seq.numel(); }
  int64_t num_seqs() const { return seq_lens.numel(); }
};

}  // namespace tandem
