// The scheduler alone, no model and no device: admission against free pages, chunked prefill
// under the step's token budget, decode page growth with preemption and resumption from the
// prefix cache, and every page coming back after aborts and retirement.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "core/error.h"
#include "runtime/scheduler.h"

namespace tandem {
namespace {

std::unique_ptr<Sequence> seq(uint64_t id, int64_t prompt_len, int32_t first_token = 1) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens.resize(static_cast<size_t>(prompt_len));
  std::iota(s->tokens.begin(), s->tokens.end(), first_token);
  s->prompt_len = prompt_len;
  s->req.max_new_tokens = 1000;
  return s;
}

SchedulerOptions opts(int64_t page_size = 4) {
  SchedulerOptions o;
  o.page_size = page_size;
  o.max_running_requests = 8;
  o.chunked_prefill_size = 8;
  o.max_prefill_tokens = 12;
  return o;
}

// What the engine does with a plan: prefilled chunks advance kv_len; a finished prompt gets its
// first token; a decode step commits one token per sequence.
void run(StepPlan& p) {
  for (auto& c : p.prefill) {
    c.seq->kv_len = c.end;
    if (c.end == static_cast<int64_t>(c.seq->tokens.size())) {
      c.seq->prefilled = true;
      c.seq->tokens.push_back(7);
    }
  }
  for (Sequence* s : p.decode) {
    s->kv_len += 1;
    s->tokens.push_back(7);
  }
}

TEST(Scheduler, ChunkedPrefillUnderTheBudgetThenDecode) {
  Scheduler sch(64, opts());
  sch.add(seq(1, 20));
  sch.add(seq(2, 5));
  StepPlan p = sch.plan();
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  // Request 1 takes a chunk of 8 (chunked_prefill_size), request 2 the remaining budget of 4.
  ASSERT_EQ(p.prefill.size(), 2u);
  EXPECT_EQ(p.prefill[0].seq->id, 1u);
  EXPECT_EQ(p.prefill[0].start, 0);
  EXPECT_EQ(p.prefill[0].end, 8);
  EXPECT_EQ(p.prefill[1].end, 4);
  run(p);
  p = sch.plan();
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);  // unfinished prompts continue, in order
  ASSERT_EQ(p.prefill.size(), 2u);
  EXPECT_EQ(p.prefill[0].start, 8);
  // 8 (the chunk size), then request 2's last token, then with nothing decoding the 3 tokens
  // of the budget that are left go to request 1 as well.
  EXPECT_EQ(p.prefill[0].end, 19);
  EXPECT_EQ(p.prefill[1].start, 4);
  EXPECT_EQ(p.prefill[1].end, 5);
  run(p);
  p = sch.plan();
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(p.prefill[0].start, 19);
  EXPECT_EQ(p.prefill[0].end, 20);
  run(p);
  p = sch.plan();
  ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
  EXPECT_EQ(p.decode.size(), 2u);
  EXPECT_EQ(p.draft_steps, 0);
  for (Sequence* s : p.decode)  // pages cover the step's new position
    EXPECT_GE(static_cast<int64_t>(s->pages.size()) * 4, s->kv_len + 1);
}

// A prompt alone takes the whole step budget while nothing decodes, and only chunks of
// chunked_prefill_size once a sequence decodes (each prefill step holds the decoders).
TEST(Scheduler, APromptAloneTakesTheWholeBudgetUntilSomethingDecodes) {
  Scheduler sch(64, opts());
  sch.add(seq(1, 30));
  for (int64_t start : {0, 12, 24}) {
    StepPlan p = sch.plan();
    ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
    ASSERT_EQ(p.prefill.size(), 1u);
    EXPECT_EQ(p.prefill[0].start, start);
    EXPECT_EQ(p.prefill[0].end, std::min<int64_t>(start + 12, 30));  // the budget, not 8
    run(p);
  }
  sch.add(seq(2, 30));  // request 1 decodes now
  for (int64_t start : {0, 8, 16, 24}) {
    StepPlan p = sch.plan();
    ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
    ASSERT_EQ(p.prefill.size(), 1u);
    EXPECT_EQ(p.prefill[0].seq->id, 2u);
    EXPECT_EQ(p.prefill[0].end, std::min<int64_t>(start + 8, 30));  // the chunk size
    run(p);
  }
  EXPECT_EQ(sch.plan().kind, StepPlan::Kind::kDecode);
}

// mixed_chunk: while a prompt is prefilled, the decoding sequences' last tokens ride along as
// one-token chunks, first, one token of the budget each; without it the decoder waits.
TEST(Scheduler, MixedChunksCarryEveryDecodingSequence) {
  for (bool mixed : {false, true}) {
    SchedulerOptions o = opts();
    o.mixed_chunk = mixed;
    Scheduler sch(64, o);
    sch.add(seq(1, 5));
    StepPlan p = sch.plan();
    run(p);  // request 1 is decoding: 6 tokens, the KV of 5
    sch.add(seq(2, 20));
    for (int64_t start : {0, 8, 16}) {
      p = sch.plan();
      ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
      ASSERT_EQ(p.prefill.size(), mixed ? 2u : 1u);
      const ScheduledChunk& prompt = p.prefill.back();
      EXPECT_EQ(prompt.seq->id, 2u);
      EXPECT_EQ(prompt.start, start);
      EXPECT_EQ(prompt.end, std::min<int64_t>(start + 8, 20));  // 8 of the 11 left: chunk size
      if (mixed) {
        const ScheduledChunk& d = p.prefill.front();
        EXPECT_EQ(d.seq->id, 1u);
        EXPECT_EQ(d.end - d.start, 1);
        EXPECT_EQ(d.end, static_cast<int64_t>(d.seq->tokens.size()));  // its last token
        EXPECT_GE(static_cast<int64_t>(d.seq->pages.size()) * 4, d.end);
      }
      run(p);
    }
    p = sch.plan();
    ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
    ASSERT_EQ(p.decode.size(), 2u);
    // Request 1 decoded through the three prefill steps only when mixed.
    EXPECT_EQ(p.decode[0]->kv_len, mixed ? 8 : 5);
  }
}

TEST(Scheduler, AdmissionWaitsForFreePagesAndNeverOvercommits) {
  SchedulerOptions o = opts();
  o.max_prefill_tokens = 100;
  o.chunked_prefill_size = 100;
  Scheduler sch(10, o);  // 40 slots
  sch.add(seq(1, 20));   // needs pages for 20 + 1 tokens: 6
  sch.add(seq(2, 20));   // 6 more do not fit
  StepPlan p = sch.plan();
  ASSERT_EQ(p.prefill.size(), 1u);
  EXPECT_EQ(sch.num_waiting(), 1);
  EXPECT_EQ(sch.pages_used(), 6);
  EXPECT_LE(sch.pages_used(), sch.pages_total());
}

TEST(Scheduler, ARequestThatCanNeverFitFails) {
  Scheduler sch(4, opts());
  sch.add(seq(1, 40));
  EXPECT_THROW(sch.plan(), Error);
}

TEST(Scheduler, DecodePreemptsTheNewestAndItResumesFromThePrefixCache) {
  SchedulerOptions o = opts();
  o.max_prefill_tokens = 100;
  o.chunked_prefill_size = 100;
  Scheduler sch(12, o);  // 48 slots
  sch.add(seq(1, 16, 1));
  sch.add(seq(2, 16, 100));
  StepPlan p = sch.plan();
  ASSERT_EQ(p.prefill.size(), 2u);  // 5 + 5 pages
  run(p);
  // Decode until both need more pages than are free: the newest (2) is preempted.
  uint64_t preempted = 0;
  for (int step = 0; step < 40 && !preempted; ++step) {
    p = sch.plan();
    ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
    run(p);
    preempted = sch.preemptions();
  }
  ASSERT_EQ(preempted, 1u);
  ASSERT_EQ(sch.running().size(), 1u);
  EXPECT_EQ(sch.running()[0]->id, 1u);
  EXPECT_EQ(sch.num_waiting(), 1);
  // Request 1 finishes; request 2 comes back with its committed tokens, most of them from the
  // prefix cache, and decodes again.
  sch.running()[0]->finished = true;
  const auto done = sch.retire_finished();
  ASSERT_EQ(done.size(), 1u);
  p = sch.plan();
  ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
  ASSERT_EQ(p.prefill.size(), 1u);
  Sequence& s2 = *p.prefill[0].seq;
  EXPECT_EQ(s2.id, 2u);
  EXPECT_GT(p.prefill[0].start, 0) << "resumed without the prefix cache";
  EXPECT_EQ(p.prefill[0].end, static_cast<int64_t>(s2.tokens.size()));
  run(p);
  p = sch.plan();
  EXPECT_EQ(p.kind, StepPlan::Kind::kDecode);
  ASSERT_EQ(p.decode.size(), 1u);
  EXPECT_EQ(p.decode[0]->id, 2u);
}

TEST(Scheduler, SpeculativeRoundsReserveSPlusOnePositions) {
  SchedulerOptions o = opts();
  o.draft_steps = 3;
  Scheduler sch(64, o);
  sch.add(seq(1, 6));
  StepPlan p = sch.plan();
  run(p);
  p = sch.plan();
  ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
  EXPECT_EQ(p.draft_steps, 3);
  EXPECT_GE(static_cast<int64_t>(p.decode[0]->pages.size()) * 4, p.decode[0]->kv_len + 4);
}

TEST(Scheduler, AbortsAndRetirementReturnEveryPage) {
  SchedulerOptions o = opts();
  o.enable_prefix_cache = false;  // so that used pages must drop to exactly zero
  Scheduler sch(64, o);
  for (uint64_t id = 1; id <= 5; ++id) sch.add(seq(id, 10, static_cast<int32_t>(id * 50)));
  StepPlan p = sch.plan();
  run(p);
  EXPECT_GT(sch.pages_used(), 0);
  EXPECT_NE(sch.remove(2, /*keep_prefix=*/true), nullptr);  // running
  EXPECT_NE(sch.remove(5, /*keep_prefix=*/true), nullptr);  // running or waiting
  EXPECT_EQ(sch.remove(99, true), nullptr);                 // unknown
  for (int i = 0; i < 4; ++i) {
    p = sch.plan();
    run(p);
  }
  for (auto& s : sch.running()) s->finished = true;
  sch.retire_finished();
  for (auto& s : sch.take_waiting()) (void)s;
  EXPECT_TRUE(sch.running().empty());
  EXPECT_EQ(sch.pages_used(), 0);
}

TEST(Scheduler, ThePrefixCacheKeepsRetiredPagesUntilFlushed) {
  Scheduler sch(64, opts());
  sch.add(seq(1, 10));
  StepPlan p = sch.plan();
  run(p);
  p = sch.plan();
  run(p);
  sch.running()[0]->finished = true;
  sch.retire_finished();
  EXPECT_GT(sch.pages_cached(), 0);
  EXPECT_EQ(sch.pages_used(), sch.pages_cached());
  EXPECT_TRUE(sch.flush_prefix_cache());
  EXPECT_EQ(sch.pages_used(), 0);
}

// delay_factor (vLLM's --scheduler-delay-factor): while a sequence decodes, arrivals wait until
// the oldest has waited delay_factor x the last prefill step, then share one prefill step; with
// nothing decoding, or when the waiting prompts fill the budget or the running set, at once.
TEST(Scheduler, DelayFactorGathersArrivalsIntoOnePrefillStep) {
  using std::chrono::microseconds;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  auto arriving = [](uint64_t id, int64_t len, std::chrono::steady_clock::time_point at) {
    auto s = seq(id, len);
    s->arrival = at;
    return s;
  };
  for (double factor : {0.0, 2.0}) {
    SchedulerOptions o = opts();
    o.delay_factor = factor;
    Scheduler sch(64, o);
    sch.add(arriving(1, 5, t0));
    StepPlan p = sch.plan(t0);  // nothing decodes: no delay
    ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
    run(p);
    p = sch.plan(t0 + microseconds(1000));  // the prefill step took 1 ms
    ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
    run(p);
    sch.add(arriving(2, 3, t0 + microseconds(1500)));
    p = sch.plan(t0 + microseconds(2000));  // request 2 has waited 0.5 ms of 2 x 1 ms
    if (factor == 0) {
      ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
      EXPECT_EQ(p.prefill.size(), 1u);
      continue;
    }
    ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
    EXPECT_EQ(p.decode.size(), 1u);
    EXPECT_EQ(sch.num_waiting(), 1);
    run(p);
    sch.add(arriving(3, 3, t0 + microseconds(2500)));
    p = sch.plan(t0 + microseconds(3400));  // 1.9 ms
    ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
    run(p);
    p = sch.plan(t0 + microseconds(3600));  // 2.1 ms: both in one step
    ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
    ASSERT_EQ(p.prefill.size(), 2u);
    EXPECT_EQ(p.prefill[0].seq->id, 2u);
    EXPECT_EQ(p.prefill[1].seq->id, 3u);
    run(p);
    // That step took 0.4 ms: the next wait is 0.8 ms, unless the prompts fill the budget (12).
    p = sch.plan(t0 + microseconds(4000));
    ASSERT_EQ(p.kind, StepPlan::Kind::kDecode);
    run(p);
    sch.add(arriving(4, 6, t0 + microseconds(4000)));
    p = sch.plan(t0 + microseconds(4100));
    EXPECT_EQ(p.kind, StepPlan::Kind::kDecode);
    run(p);
    sch.add(arriving(5, 6, t0 + microseconds(4100)));  // 6 + 6 tokens fill the budget
    p = sch.plan(t0 + microseconds(4200));
    ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
    EXPECT_EQ(p.prefill.size(), 2u);
    run(p);
    p = sch.plan(t0 + microseconds(4300));
    run(p);
    // Five running of a running set of 8: three arrivals fill it and go at once.
    for (uint64_t id : {6, 7}) sch.add(arriving(id, 2, t0 + microseconds(4300)));
    p = sch.plan(t0 + microseconds(4310));
    EXPECT_EQ(p.kind, StepPlan::Kind::kDecode);
    run(p);
    sch.add(arriving(8, 2, t0 + microseconds(4320)));
    p = sch.plan(t0 + microseconds(4330));
    ASSERT_EQ(p.kind, StepPlan::Kind::kPrefill);
    EXPECT_EQ(p.prefill.size(), 3u);
    EXPECT_EQ(sch.num_waiting(), 0);
  }
}

}  // namespace
}  // namespace tandem
