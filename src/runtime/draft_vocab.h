// The draft's vocabulary: the MTP layer proposes tokens from a subset of the vocabulary only,
// through an LM head of just those rows (SGLang's --speculative-token-map; the frequent tokens of
// a corpus, `tandem make-token-map`). On GLM-5.x the full head is 154,880 x 6,144, read again on
// every draft step; a subset of K rows costs K / V of that. The output cannot change: the target
// verifies every draft, and a token outside the subset is simply never proposed (it arrives as
// the target's own token). Only the acceptance can drop, where the target's choice is outside.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"
#include "ops/weight.h"
#include "ops/workspace.h"

namespace tandem {

class DraftVocab {
 public:
  // ids: distinct token ids of the model's vocabulary (read_token_map checks them). The model's
  // LM head must be dense and unsharded; its rows are gathered once, here.
  DraftVocab(const Model& model, Workspace& ws, std::vector<int32_t> ids);

  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  const Weight& head() const { return head_; }              // [K, D]
  const Tensor& ids_column() const { return ids_column_; }  // [K, 1] i32: column k's token id
  int32_t token(int64_t column) const { return ids_[static_cast<size_t>(column)]; }
  // A mask over the whole vocabulary (bit t: token t allowed; vocab_size bits) as a mask over the
  // subset's columns (K bits). False if no column is allowed.
  bool subset_mask(const uint32_t* vocab_bits, std::vector<uint32_t>& out) const;

 private:
  std::vector<int32_t> ids_;  // [K]
  Weight head_;
  Tensor ids_column_;
};

// A token map file: a JSON array of distinct token ids in [0, vocab_size), most useful first
// (only the set matters). Errors name the file and the offending entry.
std::vector<int32_t> read_token_map(const std::string& path, int64_t vocab_size);

}  // namespace tandem
