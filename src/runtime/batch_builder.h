// Turns per-sequence work (which tokens, at which positions, in which pages) into the explicit
// ForwardBatch a model forward takes: variable width (prefill), or the fixed-width padded layout
// of the static batches that GPUs capture as graphs. The slot arithmetic lives here only.
#pragma once

#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace tandem {

struct SequenceChunk {
  const std::vector<int32_t>* pages = nullptr;  // the sequence's pages, covering start + tokens
  int64_t start_pos = 0;                        // position of tokens[0] (= tokens already cached)
  std::vector<int32_t> tokens;                  // new tokens to run
  bool all_logits = false;                      // logits for every token, else only the last
};

// Host tensors are built first and copied to `device` once.
ForwardBatch build_forward_batch(ForwardMode mode, const std::vector<SequenceChunk>& chunks,
                                 int64_t page_size, Device device);

// The cache slot of position pos of a sequence holding `pages`.
inline int32_t slot_of(const std::vector<int32_t>& pages, int64_t pos, int64_t page_size) {
  return pages[static_cast<size_t>(pos / page_size)] * static_cast<int32_t>(page_size) +
         static_cast<int32_t>(pos % page_size);
}

// Host values of a fixed-width batch: every chunk runs exactly q tokens, padded to Bb sequences.
// Padding sequences have length 1, read page 0 and write their KV nowhere (slot -1).
struct FixedLayout {
  std::vector<int32_t> ids, pos, slots;  // [Bb * q]
  std::vector<int32_t> lens, rows;       // [Bb]: KV length after the step; logit row
  std::vector<int32_t> table;            // [Bb, max_pages]
  // All of it in one buffer: ids, pos, slots, lens, rows, table (what a static batch uploads in
  // one copy).
  std::vector<int32_t> packed() const;
};

// logit_pos: per chunk, the index (0..q-1) of the token whose logits are wanted, or empty (every
// token; rows stay 0). pad: a chunk may hold fewer than q tokens (a prompt in a graphed prefill
// step); the rest of its q are copies of its last token at its last position that write their
// KV nowhere (slot -1), so its real tokens neither see them nor change; its length is its real
// one.
FixedLayout fixed_layout(const std::vector<SequenceChunk>& chunks, int64_t Bb, int64_t q,
                         const std::vector<int64_t>& logit_pos, int64_t max_pages,
                         int64_t page_size, bool pad = false);

}  // namespace tandem
