#include "runtime/batch_builder.h"

#include <algorithm>

#include "core/error.h"

namespace tandem {

ForwardBatch build_forward_batch(ForwardMode mode, const std::vector<SequenceChunk>& chunks,
                                 int64_t page_size, Device device) {
  std::vector<int32_t> ids, seq, pos, slots, seq_lens, rows;
  int64_t max_pages = 1, total_kv = 0, max_len = 0;
  for (const auto& ch : chunks)
    max_pages = std::max<int64_t>(max_pages, static_cast<int64_t>(ch.pages->size()));
  std::vector<int32_t> table(chunks.size() * static_cast<size_t>(max_pages), 0);
  for (size_t b = 0; b < chunks.size(); ++b) {
    const SequenceChunk& ch = chunks[b];
    const int64_t len = ch.start_pos + static_cast<int64_t>(ch.tokens.size());
    TD_CHECK(static_cast<int64_t>(ch.pages->size()) * page_size >= len,
             "sequence {} needs {} slots but holds {} pages of {}", b, len, ch.pages->size(),
             page_size);
    TD_CHECK(!ch.tokens.empty(), "sequence {} has no tokens to run", b);
    std::copy(ch.pages->begin(), ch.pages->end(),
              table.begin() + static_cast<int64_t>(b) * max_pages);
    for (size_t i = 0; i < ch.tokens.size(); ++i) {
      const int64_t p = ch.start_pos + static_cast<int64_t>(i);
      if (ch.all_logits || i + 1 == ch.tokens.size())
        rows.push_back(static_cast<int32_t>(ids.size()));
      ids.push_back(ch.tokens[i]);
      seq.push_back(static_cast<int32_t>(b));
      pos.push_back(static_cast<int32_t>(p));
      slots.push_back(slot_of(*ch.pages, p, page_size));
    }
    seq_lens.push_back(static_cast<int32_t>(len));
    total_kv += len;
    max_len = std::max(max_len, len);
  }
  const int64_t T = static_cast<int64_t>(ids.size()), B = static_cast<int64_t>(chunks.size());
  auto dev = [&](const std::vector<int32_t>& v, Shape s) {
    Tensor t = Tensor::from_vector(v, s);
    return device.is_cpu() ? t : t.to(device);
  };
  ForwardBatch fb;
  fb.mode = mode;
  fb.input_ids = dev(ids, {T});
  fb.attn.token_seq = dev(seq, {T});
  fb.attn.token_pos = dev(pos, {T});
  fb.attn.slot_mapping = dev(slots, {T});
  fb.attn.page_table = dev(table, {B, max_pages});
  fb.attn.seq_lens = dev(seq_lens, {B});
  fb.attn.page_size = page_size;
  fb.attn.max_seq_len = max_len;
  fb.logit_rows = dev(rows, {static_cast<int64_t>(rows.size())});
  fb.total_kv = total_kv;
  return fb;
}

std::vector<int32_t> FixedLayout::packed() const {
  std::vector<int32_t> v;
  v.reserve(ids.size() * 3 + lens.size() * 2 + table.size());
  for (const auto* p : {&ids, &pos, &slots, &lens, &rows, &table})
    v.insert(v.end(), p->begin(), p->end());
  return v;
}

FixedLayout fixed_layout(const std::vector<SequenceChunk>& chunks, int64_t Bb, int64_t q,
                         const std::vector<int64_t>& logit_pos, int64_t max_pages,
                         int64_t page_size, bool pad) {
  const int64_t B = static_cast<int64_t>(chunks.size()), T = Bb * q;
  TD_CHECK(B <= Bb, "fixed_layout: {} sequences in a batch of {}", B, Bb);
  FixedLayout l;
  l.ids.assign(T, 0);
  l.pos.assign(T, 0);
  l.slots.assign(T, -1);
  l.lens.assign(Bb, 1);
  l.rows.assign(Bb, 0);
  l.table.assign(Bb * max_pages, 0);
  for (int64_t b = 0; b < B; ++b) {
    const SequenceChunk& ch = chunks[b];
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    TD_CHECK(n == q || (pad && n >= 1 && n < q), "fixed_layout: {} tokens, expected {}", n, q);
    TD_CHECK(static_cast<int64_t>(ch.pages->size()) <= max_pages,
             "sequence holds more pages than the context allows");
    for (int64_t i = 0; i < q; ++i) {
      const bool real = i < n;
      const int64_t p = ch.start_pos + (real ? i : n - 1);
      l.ids[b * q + i] = ch.tokens[real ? i : n - 1];
      l.pos[b * q + i] = static_cast<int32_t>(p);
      l.slots[b * q + i] = real ? slot_of(*ch.pages, p, page_size) : -1;
    }
    std::copy(ch.pages->begin(), ch.pages->end(), l.table.begin() + b * max_pages);
    l.lens[b] = static_cast<int32_t>(ch.start_pos + n);
    if (!logit_pos.empty()) l.rows[b] = static_cast<int32_t>(b * q + logit_pos[b]);
  }
  return l;
}

}  // namespace tandem
