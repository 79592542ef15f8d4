#include "runtime/model_runner.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/backend.h"
#include "ops/ops.h"
#include "runtime/constrained_decoding.h"
#include "runtime/scheduler.h"

namespace tandem {

// The device inputs of one captured shape: (kind, padded batch, tokens per sequence).
struct ModelRunner::StaticBatch {
  int64_t bucket = 0, q = 0;
  ForwardBatch fb;
  Tensor hidden;  // [bucket * q, D]: the draft's hidden-state input
  Tensor reuse;   // [bucket * q, index_topk]: reused top-k rows
  ForwardResult out;
  // [3 T + 2 bucket + bucket * max_pages] i32: ids, positions, slots, lengths, logit rows and
  // the page table (FixedLayout::packed()), which fb's tensors view, so a step uploads its inputs
  // in one copy.
  Tensor inputs;
  // kDraftLoop only: one batch per draft step, sharing token_seq and the page table. Their
  // ids, positions, slots and lengths are views of step_meta, uploaded in one copy.
  std::vector<ForwardBatch> steps;  // [S - 1]
  Tensor step_meta;                 // [S - 1, 4, bucket] i32: ids, positions, slots, lengths
  Tensor drafts;                    // [S - 1, bucket] i32: d_2 .. d_S, written on the device
};

namespace {

// Padded batch sizes, each captured once: powers of two and their midpoints up to 256.
int64_t bucket_for(int64_t b) {
  for (int64_t x : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256})
    if (b <= x) return x;
  return (b + 63) / 64 * 64;
}

}  // namespace

std::vector<int64_t> decode_batch_buckets(int64_t max_batch) {
  std::vector<int64_t> out;
  for (int64_t b = 1; b <= max_batch;) {
    out.push_back(bucket_for(b));
    b = out.back() + 1;
  }
  return out;
}

namespace {

// flag: every token's logits (kTarget, kDraft*); reused top-k (kDraftLoop, whose q is S).
int64_t shape_key(ModelRunner::Kind kind, int64_t bucket, int64_t q, bool flag) {
  return (static_cast<int64_t>(kind) << 48) | (bucket << 16) | (q << 1) | (flag ? 1 : 0);
}

void put(Tensor& dst, const std::vector<int32_t>& v) {
  dst.copy_from(Tensor::from_vector(v, dst.shape()));
}

}  // namespace

ModelRunner::ModelRunner(std::shared_ptr<const Model> model, const EngineOptions& opt,
                         int64_t num_pages, int64_t context_length, int64_t draft_steps)
    : model_(std::move(model)),
      page_size_(opt.page_size),
      ctx_len_(context_length),
      S_(draft_steps),
      deterministic_(opt.deterministic),
      prefill_graph_tokens_(opt.prefill_graph_tokens(model_->device())) {
  KvCacheOptions ko;
  ko.num_pages = num_pages;
  ko.page_size = opt.page_size;
  ko.device = model_->device();
  ko.dtype = opt.kv_cache_fp8            ? DType::F8_E4M3
             : model_->device().is_cpu() ? DType::F32
                                         : DType::BF16;
  ko.with_mtp = draft_steps > 0;
  cache_ = std::make_unique<KvCache>(model_->config(), ko);
  workspace_ = ops::make_workspace(model_->device(), static_cast<size_t>(opt.workspace_mb) << 20);
  // Adaptive depth may decode plainly for a while; the draft then catches up from the stash.
  if (draft_steps > 0 && opt.spec.adaptive)
    stash_ = Tensor::zeros({num_pages * opt.page_size, model_->config().hidden_size},
                           model_->weights().embed.dtype(), model_->device());
  if (!model_->device().is_cpu() || opt.static_batches)
    graphs_ = make_graph_runner(*workspace_, opt.disable_cuda_graph || model_->device().is_cpu());
  counts_builds_ = graphs_ && !opt.disable_cuda_graph && !model_->device().is_cpu();
  if (draft_steps > 0 && !opt.spec.token_map.empty())
    draft_vocab_ = std::make_unique<DraftVocab>(*model_, *workspace_, opt.spec.token_map);
}

const Weight* ModelRunner::draft_head() const {
  return draft_vocab_ ? &draft_vocab_->head() : nullptr;
}

std::vector<int32_t> ModelRunner::draft_argmax(const Tensor& logits,
                                               const std::vector<const uint32_t*>& rows) {
  const bool masked =
      std::any_of(rows.begin(), rows.end(), [](const uint32_t* r) { return r != nullptr; });
  if (!draft_vocab_) {
    if (masked) mask_rows(logits, rows);
    return argmax(logits);
  }
  // Masks over the vocabulary -> masks over the subset's columns.
  std::vector<std::vector<uint32_t>> sub(rows.size());
  std::vector<const uint32_t*> sub_rows(rows.size(), nullptr);
  std::vector<int32_t> forced(rows.size(), -1);
  const int64_t V = model_->config().vocab_size;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r]) continue;
    if (draft_vocab_->subset_mask(rows[r], sub[r])) {
      sub_rows[r] = sub[r].data();
      continue;
    }
    for (int32_t t = 0; t < V && forced[r] < 0; ++t)
      if ((rows[r][t >> 5] >> (t & 31)) & 1u) forced[r] = t;
  }
  if (masked) mask_rows(logits, sub_rows);
  std::vector<int32_t> am = argmax(logits);
  for (size_t r = 0; r < am.size(); ++r)
    am[r] = r < forced.size() && forced[r] >= 0 ? forced[r] : draft_vocab_->token(am[r]);
  return am;
}

ModelRunner::~ModelRunner() = default;

void ModelRunner::begin_step() {
  workspace_->reset();
  backend_for(model_->device()).set_deterministic(deterministic_);
}

// A prefill step small enough to replay as a graph: the chunks as a fixed-width batch (sequences
// padded to a batch bucket, tokens to a bucket of the same list), the padding writing nowhere
// (fixed_layout's pad). Its hidden states come back in build_forward_batch's packed order, its
// logits one row per chunk, as the eager forward gives them. Why: on a small model an eager
// prefill step is launch-bound (the shipped model: ~1.4 ms on the H100 against 0.35-0.75 ms for a
// graphed decode step), and where requests finish one at a time (speculation, different answer
// lengths) every finish pays one.
ForwardResult ModelRunner::extend(const std::vector<SequenceChunk>& chunks, bool* graphed) {
  const int64_t q = graphed_prefill_width(chunks);
  if (graphed) *graphed = q > 0;
  if (q > 0) {
    const PaddedRows m = padded_rows(chunks, q);
    return unpad(run_static(Kind::kTarget, chunks, q, m.last, Tensor(), Tensor(), /*pad=*/true), m);
  }
  ForwardBatch fb = build_forward_batch(ForwardMode::kExtend, chunks, page_size_, device());
  ForwardResult r = model_->forward(*workspace_, fb, *cache_);
  if (stash_.defined()) ops::kv_store(r.hidden, fb.attn, stash_);  // the draft reads them later
  return r;
}

ModelRunner::PaddedRows ModelRunner::padded_rows(const std::vector<SequenceChunk>& chunks,
                                                 int64_t q) {
  PaddedRows m;
  int32_t off = 0;
  for (size_t b = 0; b < chunks.size(); ++b) {
    const int64_t n = static_cast<int64_t>(chunks[b].tokens.size());
    m.last.push_back(n - 1);
    for (int64_t i = 0; i < n; ++i) m.packed.push_back(static_cast<int32_t>(b * q + i));
    for (int64_t i = 0; i < q; ++i)
      m.padded.push_back(off + static_cast<int32_t>(std::min<int64_t>(i, n - 1)));
    off += static_cast<int32_t>(n);
  }
  return m;
}

// A padded static batch's result as the eager forward gives it: one logit row per chunk, hidden
// states and top-k in the packed order.
ForwardResult ModelRunner::unpad(const ForwardResult& r, const PaddedRows& m) {
  ForwardResult out;
  out.logits = r.logits.narrow(0, 0, static_cast<int64_t>(m.last.size()));  // [B, V]
  const Tensor rows = indices(m.packed);
  out.hidden = ops::gather_rows(*workspace_, r.hidden, rows);                    // [sum n, D]
  if (r.topk.defined()) out.topk = ops::gather_rows(*workspace_, r.topk, rows);  // [sum n, K]
  return out;
}

// The draft over prompts read with their prefill and over catch-ups: graphed like extend, its
// hidden input spread to the padded rows (a padding row repeats its chunk's last) and its hidden
// states and top-k gathered back to the packed order.
ForwardResult ModelRunner::extend_draft(const std::vector<SequenceChunk>& chunks,
                                        const Tensor& hidden) {
  if (const int64_t q = graphed_prefill_width(chunks); q > 0) {
    const PaddedRows m = padded_rows(chunks, q);
    const Tensor h = ops::gather_rows(*workspace_, hidden, indices(m.padded));  // [B * q, D]
    return unpad(run_static(Kind::kDraft, chunks, q, m.last, h, Tensor(), /*pad=*/true), m);
  }
  ForwardBatch fb = build_forward_batch(ForwardMode::kExtend, chunks, page_size_, device());
  return model_->forward_mtp(*workspace_, fb, hidden, *cache_, Tensor(), draft_head());
}

// Page-table width of static batches: the longest context plus a round's tokens.
int64_t ModelRunner::static_max_pages() const {
  return pages_for(ctx_len_ + S_ + 2, page_size_);
}

// Device buffers of a fixed-width batch of Bb sequences with q tokens each. Every per-step input
// is a view of *inputs; token_seq depends only on the shape and is written once, here.
ForwardBatch ModelRunner::static_forward_batch(int64_t Bb, int64_t q, bool logit_rows,
                                               Tensor* inputs) const {
  const Device dev = device();
  const int64_t T = Bb * q, maxp = static_max_pages();
  *inputs = Tensor::zeros({3 * T + 2 * Bb + Bb * maxp}, DType::I32, dev);
  int64_t at = 0;
  auto take = [&](int64_t n) {
    Tensor v = inputs->narrow(0, at, n);
    at += n;
    return v;
  };
  ForwardBatch fb;
  fb.mode = ForwardMode::kDecode;
  fb.input_ids = take(T);
  fb.attn.token_pos = take(T);
  fb.attn.slot_mapping = take(T);
  fb.attn.seq_lens = take(Bb);
  const Tensor rows = take(Bb);
  if (logit_rows) fb.logit_rows = rows;
  fb.attn.page_table = take(Bb * maxp).view({Bb, maxp});
  std::vector<int32_t> seq(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) seq[t] = static_cast<int32_t>(t / q);
  fb.attn.token_seq = indices(seq);
  fb.attn.page_size = page_size_;
  // Kernels read real lengths from the device; the capture is sized for the longest.
  fb.attn.max_seq_len = ctx_len_ + S_ + 1;
  return fb;
}

ForwardResult ModelRunner::forward_fixed(Kind kind, const std::vector<SequenceChunk>& chunks,
                                         int64_t q, const std::vector<int64_t>& logit_pos,
                                         const Tensor& hidden, const Tensor& reuse) {
  const Device dev = device();
  const int64_t B = static_cast<int64_t>(chunks.size());
  if (!graphs_) {
    ForwardBatch fb = build_forward_batch(ForwardMode::kDecode, chunks, page_size_, dev);
    if (!logit_pos.empty()) {
      std::vector<int32_t> rows;
      for (int64_t b = 0; b < B; ++b) rows.push_back(static_cast<int32_t>(b * q + logit_pos[b]));
      fb.logit_rows = indices(rows);
    } else {
      fb.logit_rows = Tensor();
    }
    if (kind == Kind::kTarget) {
      ForwardResult r = model_->forward(*workspace_, fb, *cache_);
      if (stash_.defined()) ops::kv_store(r.hidden, fb.attn, stash_);
      return r;
    }
    return model_->forward_mtp(*workspace_, fb, hidden, *cache_,
                               kind == Kind::kDraftReuse ? reuse : Tensor(), draft_head());
  }
  return run_static(kind, chunks, q, logit_pos, hidden, reuse, /*pad=*/false);
}

int64_t ModelRunner::graphed_prefill_width(const std::vector<SequenceChunk>& chunks) const {
  if (!graphs_ || prefill_graph_tokens_ <= 0 || chunks.empty()) return 0;
  int64_t longest = 0;
  for (const SequenceChunk& ch : chunks) {
    if (ch.all_logits) return 0;  // (prompt logprobs: every row's logits)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(ch.tokens.size()));
  }
  const int64_t q = bucket_for(longest);
  return bucket_for(static_cast<int64_t>(chunks.size())) * q <= prefill_graph_tokens_ ? q : 0;
}

ForwardResult ModelRunner::run_static(Kind kind, const std::vector<SequenceChunk>& chunks,
                                      int64_t q, const std::vector<int64_t>& logit_pos,
                                      const Tensor& hidden, const Tensor& reuse, bool pad) {
  const Device dev = device();
  const int64_t B = static_cast<int64_t>(chunks.size());
  const int64_t Bb = bucket_for(B);
  const int64_t key = shape_key(kind, Bb, q, logit_pos.empty());
  std::unique_ptr<StaticBatch>& slot = statics_[key];
  if (!slot) {
    slot = std::make_unique<StaticBatch>();
    StaticBatch& sb = *slot;
    sb.bucket = Bb;
    sb.q = q;
    sb.fb = static_forward_batch(Bb, q, !logit_pos.empty(), &sb.inputs);
    const int64_t T = Bb * q;
    if (kind != Kind::kTarget)
      sb.hidden =
          Tensor::zeros({T, model_->config().hidden_size}, model_->weights().embed.dtype(), dev);
    if (kind == Kind::kDraftReuse) sb.reuse = Tensor::zeros({T, reuse.size(1)}, DType::I32, dev);
  }
  StaticBatch& sb = *slot;
  put(sb.inputs,
      fixed_layout(chunks, Bb, q, logit_pos, static_max_pages(), page_size_, pad).packed());
  if (kind != Kind::kTarget) {
    Tensor dst = sb.hidden.narrow(0, 0, B * q);
    dst.copy_from(hidden.contiguous());
  }
  if (kind == Kind::kDraftReuse) {
    Tensor dst = sb.reuse.narrow(0, 0, B * q);
    dst.copy_from(reuse.contiguous());
  }
  graphs_->run(key, [&](Workspace& w) {
    if (counts_builds_) graph_builds_.fetch_add(1, std::memory_order_relaxed);
    sb.out =
        kind == Kind::kTarget
            ? model_->forward(w, sb.fb, *cache_)
            : model_->forward_mtp(w, sb.fb, sb.hidden, *cache_,
                                  kind == Kind::kDraftReuse ? sb.reuse : Tensor(), draft_head());
    // Padding rows have slot -1 and write nowhere.
    if (kind == Kind::kTarget && stash_.defined()) ops::kv_store(sb.out.hidden, sb.fb.attn, stash_);
  });
  return sb.out;
}

// Each step's argmax is copied on the device into the next step's input ids and into the drafts
// buffer, which reaches the host once, after the last step: one graph for the whole loop.
std::vector<std::vector<int32_t>> ModelRunner::draft_loop(
    const std::vector<std::vector<SequenceChunk>>& steps, const Tensor& hidden,
    const Tensor& reuse) {
  const int64_t S = static_cast<int64_t>(steps.size()) + 1;
  TD_CHECK(graphs_ && S >= 2 && S <= S_, "draft_loop: {} steps with at most S = {}", steps.size(),
           S_);
  const int64_t B = static_cast<int64_t>(steps[0].size()), Bb = bucket_for(B);
  const int64_t key = shape_key(Kind::kDraftLoop, Bb, S, reuse.defined());
  std::unique_ptr<StaticBatch>& slot = statics_[key];
  if (!slot) slot = make_draft_loop(Bb, reuse.defined() ? reuse.size(1) : 0, S);
  StaticBatch& sb = *slot;

  std::vector<int32_t> meta;  // [S - 1, 4, Bb]
  for (int64_t j = 0; j < S - 1; ++j) {
    const FixedLayout l = fixed_layout(steps[j], Bb, 1, {}, static_max_pages(), page_size_);
    for (const auto* v : {&l.ids, &l.pos, &l.slots, &l.lens})
      meta.insert(meta.end(), v->begin(), v->end());
    if (j == 0) put(sb.steps[0].attn.page_table, l.table);
  }
  put(sb.step_meta, meta);
  Tensor h0 = sb.hidden.narrow(0, 0, B);
  h0.copy_from(hidden);
  if (reuse.defined()) {
    Tensor r0 = sb.reuse.narrow(0, 0, B);
    r0.copy_from(reuse);
  }
  graphs_->run(key, [&](Workspace& w) {
    if (counts_builds_) graph_builds_.fetch_add(1, std::memory_order_relaxed);
    Tensor h = sb.hidden;  // [Bb, D]: the draft hidden state that produced d_1
    for (int64_t j = 1; j < S; ++j) {
      const ForwardResult d =
          model_->forward_mtp(w, sb.steps[j - 1], h, *cache_, sb.reuse, draft_head());
      Tensor am = ops::argmax(w, d.logits);  // [Bb] i32: d_{j+1} (its column of the subset)
      if (draft_vocab_) am = ops::gather_rows(w, draft_vocab_->ids_column(), am).view({Bb});
      Tensor row = sb.drafts.select(0, j - 1);
      ops::copy(am, row);
      if (j + 1 < S) ops::copy(am, sb.steps[j].input_ids);
      h = d.hidden;  // [Bb, D]
    }
  });
  const std::vector<int32_t> out = to_int_vector(sb.drafts);  // [S - 1, Bb]
  std::vector<std::vector<int32_t>> drafts(static_cast<size_t>(S - 1));
  for (int64_t j = 0; j < S - 1; ++j)
    drafts[j].assign(out.begin() + j * Bb, out.begin() + j * Bb + B);
  return drafts;
}

// Static buffers of the draft loop for a bucket; K: the reused top-k width (0: the MTP indexer
// runs at every step).
std::unique_ptr<ModelRunner::StaticBatch> ModelRunner::make_draft_loop(int64_t Bb, int64_t K,
                                                                       int64_t S) const {
  const Device dev = device();
  auto sb = std::make_unique<StaticBatch>();
  sb->bucket = Bb;
  sb->q = 1;
  sb->step_meta = Tensor::zeros({S - 1, 4, Bb}, DType::I32, dev);
  const ForwardBatch shared = static_forward_batch(Bb, 1, /*logit_rows=*/false, &sb->inputs);
  for (int64_t j = 0; j < S - 1; ++j) {
    ForwardBatch fb = shared;                     // token_seq, page table and max_seq_len
    const Tensor m = sb->step_meta.select(0, j);  // [4, Bb]
    fb.input_ids = m.select(0, 0);
    fb.attn.token_pos = m.select(0, 1);
    fb.attn.slot_mapping = m.select(0, 2);
    fb.attn.seq_lens = m.select(0, 3);
    sb->steps.push_back(fb);
  }
  sb->hidden =
      Tensor::zeros({Bb, model_->config().hidden_size}, model_->weights().embed.dtype(), dev);
  if (K > 0) sb->reuse = Tensor::zeros({Bb, K}, DType::I32, dev);
  sb->drafts = Tensor::zeros({S - 1, Bb}, DType::I32, dev);
  return sb;
}

std::vector<int32_t> ModelRunner::sample(const Tensor& logits, const std::vector<Sequence*>& seqs,
                                         const std::vector<int64_t>& rows) {
  if (any_constrained(seqs)) {
    const int64_t V = logits.size(1);
    std::vector<std::vector<uint32_t>> masks(seqs.size());
    std::vector<const uint32_t*> by_row(static_cast<size_t>(logits.size(0)), nullptr);
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (!is_constrained(*seqs[i])) continue;
      next_token_mask(*seqs[i], V, masks[i]);
      by_row[static_cast<size_t>(rows[i])] = masks[i].data();
    }
    mask_rows(logits, by_row);
  }
  bool all_greedy = true;
  for (auto* s : seqs) all_greedy &= s->req.sampling.greedy();
  std::vector<int32_t> picked;
  if (all_greedy) {
    picked = argmax(logits);
  } else {
    // The uniforms come from each request's seeded RNG, so a seed reproduces its tokens
    // whatever else is batched with it.
    const int64_t R = logits.size(0);
    std::vector<float> temp(static_cast<size_t>(R), 0.0f), top_p(static_cast<size_t>(R), 1.0f),
        u(static_cast<size_t>(R), 0.0f);
    std::vector<int32_t> top_k(static_cast<size_t>(R), -1);
    for (size_t i = 0; i < seqs.size(); ++i) {
      const SamplingParams& sp = seqs[i]->req.sampling;
      const size_t r = static_cast<size_t>(rows[i]);
      temp[r] = sp.greedy() ? 0.0f : sp.temperature;
      top_k[r] = sp.top_k;
      top_p[r] = sp.top_p;
      u[r] = sp.greedy() ? 0.0f : static_cast<float>(seqs[i]->rng.uniform());
    }
    auto floats = [&](const std::vector<float>& v) {
      Tensor t = Tensor::from_vector(v, {R});
      return device().is_cpu() ? t : t.to(device());
    };
    picked = to_int_vector(
        ops::sample(*workspace_, logits, floats(temp), indices(top_k), floats(top_p), floats(u)));
  }
  std::vector<int32_t> out(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) out[i] = picked[static_cast<size_t>(rows[i])];
  return out;
}

void ModelRunner::mask_rows(const Tensor& logits, const std::vector<const uint32_t*>& rows) {
  const int64_t R = logits.size(0), W = mask_words(logits.size(1));
  std::vector<int32_t> host(static_cast<size_t>(R * W), -1);  // all ones: nothing masked
  bool any = false;
  for (size_t r = 0; r < rows.size() && static_cast<int64_t>(r) < R; ++r) {
    if (!rows[r]) continue;
    std::memcpy(host.data() + r * W, rows[r], static_cast<size_t>(W) * sizeof(uint32_t));
    any = true;
  }
  if (!any) return;
  Tensor l = logits;
  Tensor bits = Tensor::from_vector(host, {R, W});
  if (!device().is_cpu()) bits = bits.to(device());
  ops::mask_logits(*workspace_, l, bits);
}

Tensor ModelRunner::stash_rows(const std::vector<int32_t>& slots) {
  TD_CHECK(stash_.defined(), "stash_rows: this runner keeps no hidden-state stash");
  return ops::gather_rows(*workspace_, stash_, indices(slots));
}

std::vector<int32_t> ModelRunner::argmax(const Tensor& logits) {
  return to_int_vector(ops::argmax(*workspace_, logits));
}

Tensor ModelRunner::activations(const std::vector<float>& v, const Shape& shape) const {
  Tensor t = Tensor::from_vector(v, shape);
  const DType dt = model_->weights().embed.dtype();
  if (dt != DType::F32) t = t.to_dtype(dt);
  return device().is_cpu() ? t : t.to(device());
}

Tensor ModelRunner::indices(const std::vector<int32_t>& v) const {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  return device().is_cpu() ? t : t.to(device());
}

std::vector<float> ModelRunner::hidden_row(const Tensor& hidden, int64_t row) const {
  return to_float_vector(hidden.narrow(0, row, 1).contiguous());
}

}  // namespace tandem
