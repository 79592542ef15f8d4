// The StepPlan -> device-input translation: the padded fixed-width layout of static batches
// (what GPUs capture) carries exactly the ids, positions, slots, lengths and pages of the
// variable-width ForwardBatch for the real sequences, and inert padding for the rest.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/batch_builder.h"

namespace tandem {
namespace {

TEST(FixedLayout, RealRowsMatchTheForwardBatchAndPaddingIsInert) {
  constexpr int64_t kPage = 4, q = 3, Bb = 4, maxp = 6;
  const std::vector<int32_t> pa = {7, 2, 9}, pb = {5, 11, 3, 8, 1};
  // Sequence a has 5 cached tokens, b has 15: their q tokens straddle page boundaries.
  const std::vector<SequenceChunk> chunks = {{&pa, 5, {10, 11, 12}, true},
                                             {&pb, 15, {20, 21, 22}, true}};
  const FixedLayout l = fixed_layout(chunks, Bb, q, {2, 0}, maxp, kPage);
  const ForwardBatch fb = build_forward_batch(ForwardMode::kDecode, chunks, kPage, Device::cpu());
  const auto ids = to_int_vector(fb.input_ids), pos = to_int_vector(fb.attn.token_pos),
             slots = to_int_vector(fb.attn.slot_mapping), lens = to_int_vector(fb.attn.seq_lens);
  ASSERT_EQ(ids.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(l.ids[i], ids[i]) << i;
    EXPECT_EQ(l.pos[i], pos[i]) << i;
    EXPECT_EQ(l.slots[i], slots[i]) << i;
  }
  // Position 5 of a: page 1 of its list (2), offset 1 -> slot 9; position 17 of b: page 4 (1).
  EXPECT_EQ(l.slots[0], 2 * kPage + 1);
  EXPECT_EQ(l.slots[5], 1 * kPage + 1);
  EXPECT_EQ(l.lens[0], lens[0]);
  EXPECT_EQ(l.lens[1], lens[1]);
  EXPECT_EQ(l.rows[0], 2);      // a's third token
  EXPECT_EQ(l.rows[1], q + 0);  // b's first token
  for (int64_t b = 0; b < 2; ++b) {
    const auto& pages = b == 0 ? pa : pb;
    for (size_t j = 0; j < pages.size(); ++j) EXPECT_EQ(l.table[b * maxp + j], pages[j]);
  }
  for (int64_t i = 2 * q; i < Bb * q; ++i) {  // padding: writes nowhere
    EXPECT_EQ(l.slots[i], -1);
    EXPECT_EQ(l.ids[i], 0);
  }
  for (int64_t b = 2; b < Bb; ++b) EXPECT_EQ(l.lens[b], 1);  // reads page 0, one token
  const std::vector<int32_t> packed = l.packed();
  EXPECT_EQ(static_cast<int64_t>(packed.size()), 3 * Bb * q + 2 * Bb + Bb * maxp);
  EXPECT_EQ(packed[0], 10);
  EXPECT_EQ(packed[3 * Bb * q], lens[0]);  // lengths follow ids, positions and slots
}

TEST(FixedLayout, RefusesWhatDoesNotFit) {
  const std::vector<int32_t> p = {0, 1, 2};
  EXPECT_THROW(fixed_layout({{&p, 0, {1, 2}, false}}, 1, 3, {}, 4, 4), Error);  // q mismatch
  EXPECT_THROW(fixed_layout({{&p, 0, {1}, false}}, 1, 1, {}, 2, 4), Error);     // pages > max
  EXPECT_THROW(fixed_layout({{&p, 0, {1}, false}, {&p, 0, {1}, false}}, 1, 1, {}, 4, 4), Error);
}

}  // namespace
}  // namespace tandem
