#include "runtime/constrained_decoding.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

bool is_constrained(const Sequence& s) {
  return s.req.constraint != nullptr;
}

bool any_constrained(const std::vector<Sequence*>& seqs) {
  return std::any_of(seqs.begin(), seqs.end(),
                     [](const Sequence* s) { return is_constrained(*s); });
}

void next_token_mask(Sequence& s, int64_t vocab, std::vector<uint32_t>& bits) {
  bits.assign(static_cast<size_t>(mask_words(vocab)), 0u);
  TokenConstraint& c = *s.req.constraint;
  c.fill_mask(bits.data(), vocab);
  // A stop token ends the output, so it may come exactly where the constraint may end, whether
  // or not the constraint would also take it as text.
  const bool may_end = c.can_terminate();
  for (int32_t t : s.req.stop_token_ids) {
    if (t < 0 || t >= vocab) continue;
    uint32_t& w = bits[static_cast<size_t>(t >> 5)];
    w = may_end ? w | (1u << (t & 31)) : w & ~(1u << (t & 31));
  }
}

RoundMasks::RoundMasks(const std::vector<Sequence*>& seqs, int64_t vocab, int64_t draft_steps)
    : seqs_(seqs), walks_(seqs.size()), vocab_(vocab) {
  for (size_t b = 0; b < seqs.size(); ++b) {
    if (!is_constrained(*seqs[b])) continue;
    any_ = true;
    walks_[b].rows.reserve(static_cast<size_t>(draft_steps + 1));
    walks_[b].rows.emplace_back();
    next_token_mask(*seqs[b], vocab_, walks_[b].rows.back());
  }
}

void RoundMasks::push(size_t b, int32_t draft) {
  Walk& w = walks_[b];
  if (w.rows.empty()) return;
  const std::vector<uint32_t>& last = w.rows.back();
  const bool allowed =
      !w.stuck && draft >= 0 && draft < vocab_ && ((last[draft >> 5] >> (draft & 31)) & 1u);
  Sequence& s = *seqs_[b];
  const auto& stops = s.req.stop_token_ids;
  // A stop token ends the output: nothing follows it, so the walk stops there too.
  const bool stop = std::find(stops.begin(), stops.end(), draft) != stops.end();
  if (!allowed || stop || !s.req.constraint->accept(draft)) {
    w.stuck = true;
    w.rows.push_back(last);
    return;
  }
  ++w.advanced;
  w.rows.emplace_back();
  next_token_mask(s, vocab_, w.rows.back());
}

const uint32_t* RoundMasks::row(size_t b, int64_t j) const {
  const Walk& w = walks_[b];
  if (w.rows.empty()) return nullptr;
  TD_CHECK(j >= 0 && j < static_cast<int64_t>(w.rows.size()),
           "RoundMasks: row {} of a walk with {} rows", j, w.rows.size());
  return w.rows[static_cast<size_t>(j)].data();
}

void RoundMasks::rewind(size_t b) {
  Walk& w = walks_[b];
  if (w.advanced > 0) seqs_[b]->req.constraint->rollback(w.advanced);
  w.advanced = 0;
}

}  // namespace tandem
