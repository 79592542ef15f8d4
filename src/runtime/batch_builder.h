// Turns per-sequence work (which tokens, at which positions, in which pages) into the explicit
// ForwardBatch a model forward takes.
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

}  // namespace tandem
