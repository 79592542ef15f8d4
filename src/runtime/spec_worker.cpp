#include "runtime/spec_worker.h"

#include <chrono>

#include "core/device.h"
#include "core/error.h"
#include "ops/ops.h"
#include "runtime/batch_builder.h"
#include "runtime/sampler.h"
#include "runtime/spec_accept.h"

namespace tandem {

namespace {

using Clock = std::chrono::steady_clock;

// Wall time of each phase of a round, with the device synchronized at every boundary so that
// queued work is charged to the phase that queued it.
struct PhaseClock {
  bool on = false;
  Device dev;
  Clock::time_point t;
  std::array<double, 4> seconds{};
  PhaseClock(bool enabled, Device d) : on(enabled), dev(d) {
    if (on) t = now();
  }
  Clock::time_point now() const {
    device_interface(dev.type).synchronize(dev);
    return Clock::now();
  }
  // Charges the time since the previous mark to phase i.
  void mark(int i) {
    if (!on) return;
    const Clock::time_point n = now();
    seconds[static_cast<size_t>(i)] += std::chrono::duration<double>(n - t).count();
    t = n;
  }
};

}  // namespace

SpecWorker::SpecWorker(ModelRunner& runner, OutputProcessor& out, const SpeculativeOptions& opt,
                       bool profile_phases, int64_t catch_up_tokens)
    : runner_(runner),
      out_(out),
      opt_(opt),
      simulated_rate_(simulated_accept_rate(opt.simulate_accept_length, opt.num_steps)),
      profile_(profile_phases),
      catch_up_tokens_(std::max<int64_t>(1, catch_up_tokens)) {}

// Pairs (h_i, x_{i+1}) over each prefilled chunk; the last pair of a finished prompt pairs the
// final prompt position with the token just sampled. With the stash, a chunk the draft does not
// read now (fill off, the draft already behind on the sequence, or nothing left to draft for)
// adds to the sequence's lag instead: the lag stays the tail of [0, kv_len), and a finished
// sequence's lag (with or without the stash) tells the prefix cache which pages lack draft KV.
std::pair<int64_t, double> SpecWorker::after_prefill(const std::vector<ScheduledChunk>& batch,
                                                     const ForwardResult& target, bool fill) {
  const bool stash = runner_.stashes();
  std::vector<SequenceChunk> chunks;
  std::vector<int32_t> hidden_rows;
  std::vector<Sequence*> seqs;
  int64_t row = 0, read = 0;
  for (auto& b : batch) {
    Sequence& s = *b.seq;
    const int64_t len = b.end - b.start;
    const bool draftable = !s.finished && static_cast<int64_t>(s.tokens.size()) > b.end;
    if (draftable && (!stash || (fill && s.draft_lag == 0))) {
      chunks.push_back({&s.pages,
                        b.start,
                        {s.tokens.begin() + b.start + 1, s.tokens.begin() + b.end + 1},
                        false});
      for (int64_t i = 0; i < len; ++i) hidden_rows.push_back(static_cast<int32_t>(row + i));
      seqs.push_back(&s);
      read += len;
    } else if (stash || s.finished) {  // (a finished sequence only tells the prefix cache)
      s.draft_lag += len;
    }
    row += len;
  }
  if (chunks.empty()) return {0, 0.0};
  // Timed on the host from an idle device (the target's prefill done) to the drafts read back.
  const Device dev = runner_.device();
  if (stash) device_interface(dev.type).synchronize(dev);
  const auto t0 = Clock::now();
  Tensor h = ops::gather_rows(runner_.workspace(), target.hidden, runner_.indices(hidden_rows));
  ForwardResult d = runner_.extend_draft(chunks, h);
  std::vector<int64_t> ends;
  int64_t off = 0;
  for (auto& ch : chunks) ends.push_back(off += static_cast<int64_t>(ch.tokens.size()));
  set_next_drafts(seqs, d, ends);
  return {read, stash ? std::chrono::duration<double>(Clock::now() - t0).count() : 0.0};
}

// From a draft forward: d1 = argmax of each sequence's logit row, and the draft hidden state
// and indexer top-k of the token that produced it.
void SpecWorker::set_next_drafts(const std::vector<Sequence*>& seqs, const ForwardResult& d,
                                 const std::vector<int64_t>& token_end) {
  Workspace& ws = runner_.workspace();
  const Model& model = runner_.model();
  // A constrained sequence's next d_1 is drawn from its masked draft distribution (one logit row
  // per sequence, in order): an invalid draft could never be accepted.
  std::vector<std::vector<uint32_t>> masks(seqs.size());
  std::vector<const uint32_t*> mask_rows(seqs.size(), nullptr);
  if (any_constrained(seqs)) {
    const int64_t V = model.config().vocab_size;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!is_constrained(*seqs[i])) continue;
      next_token_mask(*seqs[i], V, masks[i]);
      mask_rows[i] = masks[i].data();
    }
  }
  const std::vector<int32_t> am = runner_.draft_argmax(d.logits, mask_rows);
  std::vector<int32_t> rows;
  for (size_t i = 0; i < seqs.size(); ++i) rows.push_back(static_cast<int32_t>(token_end[i] - 1));
  const Tensor rows_t = runner_.indices(rows);
  const std::vector<float> hid = to_float_vector(ops::gather_rows(ws, d.hidden, rows_t));
  const int64_t D = model.config().hidden_size;
  std::vector<int32_t> topk;
  int64_t K = 0;
  if (d.topk.defined() && model.config().index_share_for_mtp_iteration) {
    topk = to_int_vector(ops::gather_rows(ws, d.topk, rows_t).contiguous());
    K = d.topk.size(1);
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    s.next_draft = am[i];  // one logit row per sequence, in order
    s.draft_hidden.assign(hid.begin() + static_cast<int64_t>(i) * D,
                          hid.begin() + static_cast<int64_t>(i + 1) * D);
    if (K)
      s.draft_topk.assign(topk.begin() + static_cast<int64_t>(i) * K,
                          topk.begin() + static_cast<int64_t>(i + 1) * K);
  }
}

// drafts[b] = d_1 .. d_S. Each of the S - 1 MTP steps feeds the draft's own hidden state and its
// previous draft token, one position further. With index_share_for_mtp_iteration the steps reuse
// the draft-extend token's top-k. With graphs the steps are one captured forward; without, or
// when a sequence is constrained (its mask for step j depends on the drafts before it, which
// only the host's constraint can follow), one forward per step, each draft passing through the
// host. masks follows every draft, so that it holds rows 0..S on return.
std::vector<std::vector<int32_t>> SpecWorker::draft(const std::vector<Sequence*>& seqs, int64_t S,
                                                    RoundMasks& masks) {
  const Model& model = runner_.model();
  const int64_t B = static_cast<int64_t>(seqs.size());
  const int64_t D = model.config().hidden_size;
  std::vector<std::vector<int32_t>> drafts(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) drafts[b].push_back(seqs[b]->next_draft);
  auto follow = [&](int64_t b) {
    if (masks.any()) masks.push(static_cast<size_t>(b), drafts[b].back());
  };
  for (int64_t b = 0; b < B; ++b) follow(b);
  if (S == 1) return drafts;
  std::vector<float> hid_host(static_cast<size_t>(B * D));
  for (int64_t b = 0; b < B; ++b)
    std::copy(seqs[b]->draft_hidden.begin(), seqs[b]->draft_hidden.end(), hid_host.begin() + b * D);
  Tensor hid = runner_.activations(hid_host, {B, D});  // [B, D]
  Tensor reuse;                                        // [B, K] or undefined
  if (model.config().index_share_for_mtp_iteration && !seqs.empty() &&
      !seqs[0]->draft_topk.empty()) {
    const int64_t K = static_cast<int64_t>(seqs[0]->draft_topk.size());
    std::vector<int32_t> all;
    for (auto* s : seqs) all.insert(all.end(), s->draft_topk.begin(), s->draft_topk.end());
    reuse = Tensor::from_vector(all, {B, K});
    if (!model.device().is_cpu()) reuse = reuse.to(model.device());
  }
  // Step j writes position kv_len - 1 + j.
  auto step_chunks = [&](int64_t j) {
    std::vector<SequenceChunk> chunks;
    for (int64_t b = 0; b < B; ++b)
      chunks.push_back({&seqs[b]->pages, seqs[b]->kv_len - 1 + j, {drafts[b].back()}, false});
    return chunks;
  };
  if (runner_.captures() && !masks.any()) {
    std::vector<std::vector<SequenceChunk>> steps;
    for (int64_t j = 1; j < S; ++j) steps.push_back(step_chunks(j));  // step 1's ids only count
    const auto out = runner_.draft_loop(steps, hid, reuse);           // [S - 1][B]
    for (const auto& step : out)
      for (int64_t b = 0; b < B; ++b) drafts[b].push_back(step[b]);
    return drafts;
  }
  for (int64_t j = 1; j < S; ++j) {
    const ForwardResult d = runner_.forward_fixed(
        reuse.defined() ? ModelRunner::Kind::kDraftReuse : ModelRunner::Kind::kDraft,
        step_chunks(j), 1, std::vector<int64_t>(static_cast<size_t>(B), 0), hid, reuse);
    std::vector<const uint32_t*> rows;
    if (masks.any()) {
      rows.resize(static_cast<size_t>(B));
      for (int64_t b = 0; b < B; ++b) rows[b] = masks.row(static_cast<size_t>(b), j);
    }
    const std::vector<int32_t> am = runner_.draft_argmax(d.logits, rows);
    for (int64_t b = 0; b < B; ++b) {
      drafts[b].push_back(am[b]);
      follow(b);
    }
    hid = d.hidden.narrow(0, 0, B);  // [B, D]
  }
  return drafts;
}

void SpecWorker::after_plain_step(const std::vector<Sequence*>& seqs) {
  TD_CHECK(runner_.stashes(), "a plain step of a speculating engine needs the hidden-state stash");
  for (Sequence* s : seqs) s->draft_lag += 1;  // the runner stashed each one's hidden state
}

// Pairs (h_i, x_{i+1}) for the lagging positions i, h_i from the stash at i's KV slot, in
// forwards of at most catch_up_tokens_ positions (a long prompt takes several, in order); a
// sequence's last forward gives its d_1.
int64_t SpecWorker::catch_up(const std::vector<Sequence*>& seqs) {
  const int64_t P = runner_.page_size();
  Workspace& ws = runner_.workspace();
  int64_t read = 0;
  for (;;) {
    std::vector<SequenceChunk> chunks;
    std::vector<int32_t> slots;
    std::vector<Sequence*> done;  // sequences whose lag this forward ends
    std::vector<int64_t> ends;    // their last row, + 1
    std::vector<int32_t> rows;    // their logit rows (one per chunk)
    std::vector<std::pair<Sequence*, int64_t>> taken;
    int64_t budget = catch_up_tokens_;
    for (Sequence* s : seqs) {
      if (s->draft_lag == 0 || budget == 0) continue;
      const int64_t from = s->kv_len - s->draft_lag, n = std::min(s->draft_lag, budget);
      chunks.push_back({&s->pages,
                        from,
                        {s->tokens.begin() + from + 1, s->tokens.begin() + from + n + 1},
                        false});
      for (int64_t p = from; p < from + n; ++p) slots.push_back(slot_of(s->pages, p, P));
      budget -= n;
      taken.emplace_back(s, n);
      if (n == s->draft_lag) {
        done.push_back(s);
        ends.push_back(static_cast<int64_t>(slots.size()));
        rows.push_back(static_cast<int32_t>(chunks.size() - 1));
      }
    }
    if (chunks.empty()) return read;
    read += static_cast<int64_t>(slots.size());
    const size_t mark = ws.mark();
    const Tensor h = runner_.stash_rows(slots);  // [positions, D]
    ForwardResult d = runner_.extend_draft(chunks, h);
    if (!done.empty()) {
      d.logits = ops::gather_rows(ws, d.logits, runner_.indices(rows));
      set_next_drafts(done, d, ends);
    }
    ws.release(mark);
    for (auto& [s, n] : taken) s->draft_lag -= n;
  }
}

SpecWorker::RoundStats SpecWorker::round(const std::vector<Sequence*>& seqs, int64_t S) {
  RoundStats stats;
  bool lagging = false;
  for (const Sequence* s : seqs) lagging |= s->draft_lag > 0;
  if (lagging) {
    // Timed on the host: set_next_drafts reads its argmax back, so the device is done.
    const auto t0 = Clock::now();
    stats.catch_up_tokens = catch_up(seqs);
    stats.catch_up_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  PhaseClock clock(profile_, runner_.device());
  const int64_t B = static_cast<int64_t>(seqs.size());
  Workspace& ws = runner_.workspace();

  // 1. Draft: d_1 (from the last draft extend) and S - 1 more. Constrained sequences: the
  // masks follow the drafts (rows 0..S), and are rebuilt when a test overrides the drafts.
  RoundMasks masks(seqs, runner_.model().config().vocab_size, S);
  std::vector<std::vector<int32_t>> drafts = draft(seqs, S, masks);
  if (opt_.draft_override) {
    for (int64_t b = 0; b < B; ++b) {
      masks.rewind(static_cast<size_t>(b));
      for (int64_t j = 0; j < S; ++j)
        drafts[b][j] = opt_.draft_override(seqs[b]->id, seqs[b]->kv_len + 1 + j, drafts[b][j]);
    }
    masks = RoundMasks(seqs, runner_.model().config().vocab_size, S);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < S; ++j) masks.push(static_cast<size_t>(b), drafts[b][j]);
  }
  clock.mark(0);

  // 2. Verify: the target runs [x_L, d_1 .. d_S] at positions L .. L + S.
  std::vector<SequenceChunk> chunks;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int32_t> toks = {seqs[b]->tokens.back()};
    toks.insert(toks.end(), drafts[b].begin(), drafts[b].end());
    chunks.push_back({&seqs[b]->pages, seqs[b]->kv_len, toks, true});
  }
  ForwardResult v =
      runner_.forward_fixed(ModelRunner::Kind::kTarget, chunks, S + 1, {}, Tensor(), Tensor());
  out_.count_step();
  if (masks.any()) mask_verify(v.logits, masks, B, S);
  const std::vector<int32_t> target_am = runner_.argmax(v.logits);  // [B * (S + 1)]
  clock.mark(1);

  // 3. Accept, commit, and count.
  std::vector<int64_t> accepted(static_cast<size_t>(B)), round_start(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    Sequence& s = *seqs[b];
    const int64_t base = b * (S + 1);
    std::vector<int32_t> t_next(target_am.begin() + base, target_am.begin() + base + S + 1);
    Acceptance a;
    // The constraint is walked back to the committed tokens; commit() follows the accepted ones.
    masks.rewind(static_cast<size_t>(b));
    if (opt_.simulate_accept_length > 0 && !is_constrained(s)) {
      a = accept_simulated(drafts[b], t_next, simulated_rate_, s.rng);
    } else if (s.req.sampling.greedy()) {
      a = accept_greedy(drafts[b], t_next);
    } else {
      std::vector<int32_t> rows;
      for (int64_t i = 0; i <= S; ++i) rows.push_back(static_cast<int32_t>(base + i));
      const std::vector<float> lg =
          to_float_vector(ops::gather_rows(ws, v.logits, runner_.indices(rows)));
      a = accept_sampled(drafts[b], lg.data(), v.logits.size(1), s.req.sampling, s.rng);
    }
    accepted[b] = a.accepted;
    stats.accepted.push_back(a.accepted);
    s.spec_verify_steps += 1;
    s.spec_accepted += a.accepted;
    s.spec_drafted += S;
    out_.count_round(S, a.accepted);
    if (s.req.return_hidden_states)
      for (int64_t i = 0; i <= a.accepted; ++i)
        s.pending_hidden.push_back(runner_.hidden_row(v.hidden, base + i));
    // Verified positions L .. L + k hold KV of committed tokens; the rest is overwritten later.
    round_start[b] = s.kv_len;
    s.kv_len += 1 + a.accepted;
    OutputProcessor::commit(s, a.tokens);
  }
  clock.mark(2);

  // 4. Draft extend, fixed width S + 1: the draft re-reads every verified position with the
  // target's hidden states, so its KV for committed positions comes from target states. A
  // sequence that finished in this round is read too (its committed positions only count), so
  // that the prefix cache may hand its pages to a later turn with their draft KV complete; it
  // takes no next draft.
  std::vector<SequenceChunk> ext;
  std::vector<int32_t> hidden_rows, live_rows;
  std::vector<int64_t> logit_pos;
  std::vector<Sequence*> live;
  std::vector<int64_t> ends;
  int64_t off = 0;
  for (int64_t b = 0; b < B; ++b) {
    Sequence& s = *seqs[b];
    // The round's committed positions: k + 1, or fewer where a stop or the length limit cut it
    // (commit then clamps kv_len to them).
    const int64_t L = round_start[b], c = s.kv_len - L;
    if (c <= 0) continue;
    std::vector<int32_t> toks(s.tokens.begin() + L + 1, s.tokens.begin() + L + 1 + c);
    for (int64_t i = c; i <= S; ++i) toks.push_back(target_am[b * (S + 1) + i]);  // filler
    ext.push_back({&s.pages, L, toks, false});
    for (int64_t i = 0; i <= S; ++i) hidden_rows.push_back(static_cast<int32_t>(b * (S + 1) + i));
    logit_pos.push_back(c - 1);
    if (!s.finished) {
      live_rows.push_back(static_cast<int32_t>(ext.size() - 1));
      ends.push_back(off + c);
      live.push_back(&s);
    }
    off += S + 1;
  }
  if (!ext.empty()) {
    Tensor h = ops::gather_rows(ws, v.hidden, runner_.indices(hidden_rows));
    ForwardResult d =
        runner_.forward_fixed(ModelRunner::Kind::kDraft, ext, S + 1, logit_pos, h, Tensor());
    if (!live.empty()) {
      if (live.size() < ext.size())  // one logit row per live sequence, in order
        d.logits = ops::gather_rows(ws, d.logits, runner_.indices(live_rows));
      set_next_drafts(live, d, ends);
    }
  }
  clock.mark(3);
  if (clock.on) out_.add_phase_seconds(clock.seconds);
  return stats;
}

void SpecWorker::mask_verify(const Tensor& logits, const RoundMasks& masks, int64_t B, int64_t S) {
  std::vector<const uint32_t*> rows(static_cast<size_t>(B * (S + 1)), nullptr);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i <= S; ++i)
      rows[static_cast<size_t>(b * (S + 1) + i)] = masks.row(static_cast<size_t>(b), i);
  runner_.mask_rows(logits, rows);
}

}  // namespace tandem
