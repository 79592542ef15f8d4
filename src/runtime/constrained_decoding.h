// Constrained decoding inside the engine (docs/structured-outputs.md): before a constrained
// sequence's token is chosen, the logits of every token its TokenConstraint forbids become
// -inf (ops::mask_logits), in every path that chooses one: prefill's first token, plain decode
// (greedy and sampled), the MTP draft steps, the verify step and the draft extend. Under
// speculation the constraint walks along the drafts as they are drawn, so the verify step masks
// position i with the mask after d_1 .. d_i; acceptance then runs the exact rule over the masked
// distributions, and the walk is undone before the accepted tokens are committed.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/sequence.h"

namespace tandem {

// Words of a token bitmask over a vocabulary of V tokens.
inline int64_t mask_words(int64_t vocab) {
  return (vocab + 31) / 32;
}

bool is_constrained(const Sequence& s);
bool any_constrained(const std::vector<Sequence*>& seqs);

// The tokens s may take next: its constraint's, with its stop tokens exactly when the constraint
// may end here. bits: [mask_words(vocab)].
void next_token_mask(Sequence& s, int64_t vocab, std::vector<uint32_t>& bits);

// The masks of one speculative round. Row (b, j), j = 0..S: what may follow sequence b's
// committed tokens and its first j drafts; null for unconstrained sequences (nothing masked).
class RoundMasks {
 public:
  RoundMasks(const std::vector<Sequence*>& seqs, int64_t vocab, int64_t draft_steps);
  bool any() const { return any_; }
  // Sequence b's next draft (d_{j+1} after j pushes): the constraint follows it and row j + 1 is
  // computed. A draft the constraint refuses stops the walk; later rows repeat the last one
  // (the verify step can never accept past a refused draft, whose masked probability is 0).
  void push(size_t b, int32_t draft);
  const uint32_t* row(size_t b, int64_t j) const;
  // Undoes sequence b's walk: the constraint is back at its committed tokens.
  void rewind(size_t b);

 private:
  struct Walk {
    std::vector<std::vector<uint32_t>> rows;  // [j + 1][mask_words(V)]
    int64_t advanced = 0;                     // drafts the constraint accepted
    bool stuck = false;
  };
  std::vector<Sequence*> seqs_;
  std::vector<Walk> walks_;  // [B]; empty rows for unconstrained sequences
  int64_t vocab_;
  bool any_ = false;
};

}  // namespace tandem
