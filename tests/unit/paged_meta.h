// Paged attention metadata for the CPU op tests: sequences of given lengths, the last
// new_tokens[b] positions of each running as query tokens, pages handed out round-robin.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/attention_meta.h"

namespace tandem {

// Paged metadata for sequences of given lengths whose pages are handed out interleaved.
struct Paged {
  AttentionMeta m;
  std::vector<std::vector<int32_t>> pages;
  int64_t slot(int b, int64_t pos) const {
    return pages[b][pos / m.page_size] * m.page_size + pos % m.page_size;
  }
};

inline Paged make_paged(const std::vector<int64_t>& lens, const std::vector<int64_t>& new_tokens,
                        int64_t ps) {
  Paged p;
  p.m.page_size = ps;
  int32_t next = 0;
  int64_t maxp = 1;
  p.pages.resize(lens.size());
  for (size_t b = 0; b < lens.size(); ++b) maxp = std::max(maxp, (lens[b] + ps - 1) / ps);
  // Round-robin allocation so a sequence's pages are not contiguous.
  for (int64_t i = 0; i < maxp; ++i)
    for (size_t b = 0; b < lens.size(); ++b)
      if (i < (lens[b] + ps - 1) / ps) p.pages[b].push_back(next++);
  std::vector<int32_t> table(lens.size() * maxp, 0), seq, pos, slots, sl;
  for (size_t b = 0; b < lens.size(); ++b) {
    std::copy(p.pages[b].begin(), p.pages[b].end(), table.begin() + b * maxp);
    for (int64_t j = lens[b] - new_tokens[b]; j < lens[b]; ++j) {
      seq.push_back(static_cast<int32_t>(b));
      pos.push_back(static_cast<int32_t>(j));
      slots.push_back(static_cast<int32_t>(p.slot(static_cast<int>(b), j)));
    }
    sl.push_back(static_cast<int32_t>(lens[b]));
  }
  auto v = [](const std::vector<int32_t>& x) {
    return Tensor::from_vector(x, {static_cast<int64_t>(x.size())});
  };
  p.m.token_seq = v(seq);
  p.m.token_pos = v(pos);
  p.m.slot_mapping = v(slots);
  p.m.seq_lens = v(sl);
  p.m.page_table = Tensor::from_vector(table, {static_cast<int64_t>(lens.size()), maxp});
  return p;
}

}  // namespace tandem
