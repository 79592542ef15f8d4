// Constrained decoding as the runtime sees it: something that says which tokens may come next
// and follows the tokens the request commits. The server builds one per request from a grammar
// (src/grammar, through server/grammar_constraint.h); the runtime only masks logits with it, so
// it knows nothing of JSON, regexes or tokenizers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace tandem {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // bits: [(V + 31) / 32] words, all clear on entry, V the model's vocabulary; sets bit v for
  // every token that may come next. Stop tokens are the runtime's business (can_terminate).
  virtual void fill_mask(uint32_t* bits, int64_t vocab) = 0;
  // Advances by one token; false, with nothing changed, if the token is not allowed.
  virtual bool accept(int32_t token) = 0;
  // Undoes the last n accepted tokens (speculative drafts that were rejected).
  virtual void rollback(int64_t n) = 0;
  // A stop token may come now / nothing but a stop token may come.
  virtual bool can_terminate() const = 0;
  virtual bool is_terminated() const = 0;
  // Tensor parallelism: every rank chooses tokens from the same logits, so every rank masks
  // them with its own copy of the constraint. This is what another rank needs to build that
  // copy (for a grammar, its EBNF); empty if the constraint cannot be replicated.
  virtual std::string replica_spec() const { return {}; }
};

// Builds a rank's copy of a constraint from rank 0's replica_spec() (follower.h).
using ConstraintFactory =
    std::function<std::shared_ptr<TokenConstraint>(const std::string& replica_spec)>;

}  // namespace tandem
