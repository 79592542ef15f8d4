// ModelRunner::warm_up: prefill forwards at every row bucket before the first request, so that
// requests do not pay for the first use of a GEMM kernel.
#include <algorithm>

#include "core/rng.h"
#include "runtime/batch_builder.h"
#include "runtime/model_runner.h"
#include "runtime/scheduler.h"

namespace tandem {

std::vector<int64_t> warm_up_rows(int64_t limit) {
  std::vector<int64_t> rows;
  for (int64_t r = 1; r < limit;) {
    rows.push_back(r);
    int64_t p = 1;  // the next of 1, 2, 3, 4, 6, 8, 12, ... after r
    while (p <= r) p *= 2;
    r = (p >= 4 && p / 4 * 3 > r) ? p / 4 * 3 : p;
  }
  if (limit >= 1) rows.push_back(limit);
  return rows;
}

int64_t ModelRunner::warm_up(int64_t max_tokens, int64_t max_seqs) {
  const int64_t capacity = cache_->num_pages() * page_size_;
  const int64_t limit = std::min({max_tokens, ctx_len_ - S_ - 2, capacity});
  if (limit < 1) return 0;
  const int64_t V = model_->config().vocab_size;
  Rng rng(0x7761726d);  // token ids: any valid ones; the outputs are dropped
  const auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int32_t& id : t) id = static_cast<int32_t>(rng.next_u64() % static_cast<uint64_t>(V));
    return t;
  };
  // Every row of the logits only where they stay small: the verify and draft rows of a batch.
  const int64_t max_logit_rows = max_seqs * (S_ + 1);
  int64_t forwards = 0;
  const auto run = [&](const std::vector<SequenceChunk>& chunks) {
    begin_step();
    const ForwardResult r = extend(chunks);
    argmax(r.logits);  // waits for the device
    ++forwards;
    // The draft in the same step, as a prefill step reads its prompts: r.hidden lives in the
    // step's workspace.
    if (S_ > 0) {
      argmax(extend_draft(chunks, r.hidden).logits);
      ++forwards;
    }
  };
  // One sequence of n tokens: the GEMMs whose rows are the step's tokens, at every bucket.
  std::vector<int32_t> pages(static_cast<size_t>(pages_for(limit, page_size_)));
  for (size_t i = 0; i < pages.size(); ++i) pages[i] = static_cast<int32_t>(i);
  for (int64_t n : warm_up_rows(limit)) {
    SequenceChunk c{&pages, 0, random_tokens(n), n <= max_logit_rows};
    run({c});
  }
  // n sequences of one token: the LM head, whose rows are the sequences.
  const int64_t seqs = std::min({max_seqs, cache_->num_pages(), limit});
  std::vector<std::vector<int32_t>> own(static_cast<size_t>(seqs));
  for (int64_t b = 0; b < seqs; ++b) own[static_cast<size_t>(b)] = {static_cast<int32_t>(b)};
  for (int64_t n : warm_up_rows(seqs)) {
    if (n < 2) continue;
    std::vector<SequenceChunk> chunks;
    for (int64_t b = 0; b < n; ++b)
      chunks.push_back({&own[static_cast<size_t>(b)], 0, random_tokens(1), false});
    run(chunks);
  }
  // The graphed prefill shapes (batch bucket x token bucket within prefill_graph_tokens_): a
  // graph's first use runs eagerly and its second captures it (1-4 ms a step on the shipped
  // model), so each shape runs until a call replays (at most three), or a timed pass meets its
  // capture (bench-offline, session 38: 1-6 built steps in timed passes after the decode part).
  // Each sequence writes its throwaway KV into pages of its own (no request holds any yet).
  if (graphs_ && prefill_graph_tokens_ > 0) {
    const int64_t num_pages = cache_->num_pages();
    for (int64_t q : decode_batch_buckets(std::min(prefill_graph_tokens_, limit))) {
      if (q > limit) break;
      const int64_t per_seq = pages_for(q, page_size_);
      for (int64_t Bb : decode_batch_buckets(seqs)) {
        const int64_t B = std::min(Bb, seqs);
        if (Bb * q > prefill_graph_tokens_ || B < 1 || B * per_seq > num_pages) break;
        std::vector<std::vector<int32_t>> tables(static_cast<size_t>(B));
        std::vector<SequenceChunk> chunks;
        for (int64_t b = 0; b < B; ++b) {
          for (int64_t i = 0; i < per_seq; ++i)
            tables[static_cast<size_t>(b)].push_back(static_cast<int32_t>(b * per_seq + i));
          chunks.push_back({&tables[static_cast<size_t>(b)], 0, random_tokens(q), false});
        }
        for (int use = 0; use < 3; ++use) {
          const uint64_t built = graph_builds();
          run(chunks);
          if (graph_builds() == built) break;  // replayed: the shape's graphs exist
        }
      }
    }
  }
  return forwards;
}

}  // namespace tandem
