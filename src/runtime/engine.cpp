#include "runtime/engine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "ops/graph_runner.h"
#include "ops/ops.h"
#include "runtime/batch_builder.h"
#include "runtime/page_allocator.h"
#include "runtime/prefix_cache.h"
#include "runtime/sequence.h"
#include "runtime/spec_accept.h"

namespace tandem {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kError:
      return "error";
    default:
      return "";
  }
}

namespace {

using Clock = std::chrono::steady_clock;

int64_t pages_for(int64_t tokens, int64_t page_size) {
  return (tokens + page_size - 1) / page_size;
}

Tensor to_device(const std::vector<int32_t>& v, Device d) {
  Tensor t = Tensor::from_vector(v, {static_cast<int64_t>(v.size())});
  return d.is_cpu() ? t : t.to(d);
}

}  // namespace

struct Engine::Impl {
  std::shared_ptr<const Model> model;
  EngineOptions opt;
  int64_t ctx_len = 0;
  bool spec = false;
  int64_t S = 0;  // draft tokens per round
  PageAllocator pages;
  PrefixCache prefix;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Workspace> workspace;  // reset at the start of every step
  std::unique_ptr<GraphRunner> runner;   // decode-shaped forwards, captured per batch bucket
  struct StaticBatch;
  std::map<int64_t, std::unique_ptr<StaticBatch>> statics;

  // Messages from other threads.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::unique_ptr<Sequence>> inbox;
  std::vector<uint64_t> aborts;
  std::vector<std::promise<bool>> flushes;
  bool stopping = false;

  // Engine-thread state.
  std::deque<std::unique_ptr<Sequence>> waiting;
  std::vector<std::unique_ptr<Sequence>> running;
  std::atomic<uint64_t> next_id{1};

  mutable std::mutex metrics_mu;
  EngineMetrics m;
  std::deque<std::pair<Clock::time_point, int64_t>> recent_tokens;  // for last_gen_throughput

  std::thread thread;

  Impl(std::shared_ptr<const Model> mdl, EngineOptions o)
      : model(std::move(mdl)),
        opt(std::move(o)),
        pages(opt.num_pages > 0 ? opt.num_pages : pages_for(opt.max_total_tokens, opt.page_size)),
        prefix(pages, opt.page_size) {
    const ModelConfig& c = model->config();
    if (opt.spec.enabled()) {
      if (opt.spec.algorithm != "EAGLE" && opt.spec.algorithm != "NEXTN")
        throw InvalidArgument(fmt::format(
            "--speculative-algorithm {} is not supported (EAGLE or NEXTN)", opt.spec.algorithm));
      if (opt.spec.eagle_topk != 1)
        throw InvalidArgument(
            fmt::format("--speculative-eagle-topk {}: only chain drafts (topk 1) are supported",
                        opt.spec.eagle_topk));
      if (opt.spec.num_steps < 1 || opt.spec.num_steps > 8)
        throw InvalidArgument(
            fmt::format("--speculative-num-steps must be in [1, 8], got {}", opt.spec.num_steps));
      if (opt.spec.num_draft_tokens != opt.spec.num_steps + 1)
        throw InvalidArgument(fmt::format(
            "--speculative-num-draft-tokens must be num_steps + 1 = {} with topk 1, got {}",
            opt.spec.num_steps + 1, opt.spec.num_draft_tokens));
      if (!model->has_mtp())
        throw InvalidArgument(
            "speculative decoding needs the checkpoint's MTP layer, which is not loaded");
      spec = true;
      S = opt.spec.num_steps;
    }
    KvCacheOptions ko;
    ko.num_pages = pages.num_pages();
    ko.page_size = opt.page_size;
    ko.device = model->device();
    ko.dtype = model->device().is_cpu() ? DType::F32 : DType::BF16;
    ko.with_mtp = spec;
    cache = std::make_unique<KvCache>(c, ko);
    workspace = ops::make_workspace(model->device(), static_cast<size_t>(opt.workspace_mb) << 20);
    if (!model->device().is_cpu() || opt.static_batches)
      runner = make_graph_runner(*workspace, opt.disable_cuda_graph || model->device().is_cpu());
    const int64_t capacity = pages.num_pages() * opt.page_size;
    ctx_len = opt.context_length > 0 ? opt.context_length : c.max_position_embeddings;
    ctx_len = std::min(ctx_len, capacity - (spec ? S + 1 : 1));
    m.kv_pages_total = pages.num_pages();
    m.spec_accepted_per_position.assign(static_cast<size_t>(S), 0);
    thread = std::thread([this] { loop(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> g(mu);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
  }

  // ---------------------------------------------------------------- messages

  std::shared_ptr<RequestStream> submit(Request r) {
    const int64_t V = model->config().vocab_size;
    if (r.prompt.empty()) throw InvalidArgument("the prompt is empty");
    for (int32_t t : r.prompt)
      if (t < 0 || t >= V)
        throw InvalidArgument(fmt::format("token id {} is outside the vocabulary [0, {})", t, V));
    if (r.max_new_tokens < 1)
      throw InvalidArgument(
          fmt::format("max_new_tokens must be at least 1, got {}", r.max_new_tokens));
    const int64_t P = static_cast<int64_t>(r.prompt.size());
    if (r.max_new_tokens > ctx_len - P)  // not P + max_new_tokens, which can overflow
      throw InvalidArgument(fmt::format(
          "the prompt ({} tokens) plus max_new_tokens ({}) exceeds the context length ({})", P,
          r.max_new_tokens, ctx_len));
    if (r.sampling.temperature < 0) throw InvalidArgument("temperature must not be negative");
    if (!(r.sampling.top_p > 0 && r.sampling.top_p <= 1))
      throw InvalidArgument("top_p must be in (0, 1]");
    auto s = std::make_unique<Sequence>();
    s->id = next_id++;
    s->tokens = r.prompt;
    s->prompt_len = P;
    s->rng = Rng(r.sampling.seed ^ (0x5851f42d4c957f2dull * s->id * (r.sampling.seed == 0)));
    s->req = std::move(r);
    s->stream = std::make_shared<StreamImpl>(s->id);
    s->arrival = Clock::now();
    auto stream = s->stream;
    {
      std::lock_guard<std::mutex> g(mu);
      inbox.push_back(std::move(s));
    }
    {
      std::lock_guard<std::mutex> g(metrics_mu);
      ++m.requests_total;
    }
    cv.notify_all();
    return stream;
  }

  void abort(uint64_t id) {
    {
      std::lock_guard<std::mutex> g(mu);
      aborts.push_back(id);
    }
    cv.notify_all();
  }

  bool flush() {
    std::future<bool> f;
    {
      std::lock_guard<std::mutex> g(mu);
      flushes.emplace_back();
      f = flushes.back().get_future();
    }
    cv.notify_all();
    return f.get();
  }

  // ---------------------------------------------------------------- the loop

  void loop() {
    for (;;) {
      std::vector<uint64_t> to_abort;
      std::vector<std::promise<bool>> to_flush;
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait_for(lk, std::chrono::milliseconds(20), [&] {
          return stopping || !inbox.empty() || !aborts.empty() || !flushes.empty() ||
                 !waiting.empty() || !running.empty();
        });
        if (stopping) break;
        while (!inbox.empty()) {
          waiting.push_back(std::move(inbox.front()));
          inbox.pop_front();
        }
        to_abort.swap(aborts);
        to_flush.swap(flushes);
      }
      for (uint64_t id : to_abort) abort_now(id);
      for (auto& p : to_flush) {
        const bool idle = running.empty() && waiting.empty();
        if (idle) prefix.clear();
        publish_metrics();  // callers read metrics right after the flush returns
        p.set_value(idle);
      }
      try {
        step();
      } catch (const std::exception& e) {
        // A failed forward must not take the server down: fail the requests it carried.
        log_error("engine step failed: {}", e.what());
        for (auto& s : running) finish(*s, FinishReason::kError, e.what());
        running.clear();
      }
      publish_metrics();
    }
    for (auto& s : running) finish(*s, FinishReason::kAbort, "server shutting down");
    for (auto& s : waiting) finish(*s, FinishReason::kAbort, "server shutting down");
  }

  void step() {
    workspace->reset();
    bool prefill_pending = !waiting.empty();
    for (auto& s : running) prefill_pending |= !s->prefilled;
    if (prefill_pending && prefill_step()) return;
    bool decoding = false;
    for (auto& s : running) decoding |= s->prefilled;
    if (!decoding) return;
    if (spec)
      spec_round();
    else
      decode_step();
  }

  // ---------------------------------------------------------------- pages

  bool allocate(Sequence& s, int64_t tokens) {
    const int64_t need = pages_for(tokens, opt.page_size) - static_cast<int64_t>(s.pages.size());
    if (need <= 0) return true;
    if (pages.num_free() < need) prefix.evict(need);
    return pages.allocate(need, s.pages);
  }

  void release_pages(Sequence& s) {
    if (opt.enable_prefix_cache) prefix.insert(s.tokens, s.kv_len, s.pages);
    pages.release(s.pages);
    s.pages.clear();
  }

  // Makes every decoding sequence hold pages for kv_len + extra tokens, preempting the most
  // recently admitted sequences when the cache is full.
  void ensure_decode_pages(int64_t extra) {
    for (;;) {
      int64_t need = 0;
      for (auto& s : running)
        if (s->prefilled)
          need += std::max<int64_t>(0, pages_for(s->kv_len + extra, opt.page_size) -
                                           static_cast<int64_t>(s->pages.size()));
      if (pages.num_free() < need) prefix.evict(need);
      if (pages.num_free() >= need || running.size() <= 1) break;
      preempt_last();
    }
    for (auto& s : running)
      if (s->prefilled && !allocate(*s, s->kv_len + extra))
        fail("KV cache exhausted: {} tokens do not fit in {} pages of {}", s->kv_len + extra,
             pages.num_pages(), opt.page_size);
  }

  void preempt_last() {
    std::unique_ptr<Sequence> s = std::move(running.back());
    running.pop_back();
    release_pages(*s);
    // It restarts from its committed tokens; the prefix cache usually still holds them.
    s->kv_len = 0;
    s->prefilled = false;
    s->next_draft = -1;
    waiting.push_front(std::move(s));
    std::lock_guard<std::mutex> g(metrics_mu);
    ++m.preemptions_total;
  }

  bool admit(Sequence& s) {
    const int64_t n = static_cast<int64_t>(s.tokens.size());
    if (s.pages.empty() && opt.enable_prefix_cache) {
      s.pages = prefix.match(s.tokens, n - 1);  // at least one token is always computed
      s.kv_len = static_cast<int64_t>(s.pages.size()) * opt.page_size;
      // The draft's pair (h_i, x_{i+1}) at the last cached position needs h_i: recompute it.
      if (spec && s.kv_len > 0) --s.kv_len;
      if (s.generated == 0) s.cached_tokens = s.kv_len;
    }
    if (!allocate(s, n + 1 + (spec ? S : 0))) {
      pages.release(s.pages);
      s.pages.clear();
      s.kv_len = 0;
      s.cached_tokens = 0;
      return false;
    }
    return true;
  }

  // ---------------------------------------------------------------- prefill

  struct Scheduled {
    Sequence* s;
    int64_t start, end;
  };

  bool prefill_step() {
    std::vector<Scheduled> batch;
    int64_t budget = opt.max_prefill_tokens;
    auto schedule = [&](Sequence& s) {
      const int64_t n = static_cast<int64_t>(s.tokens.size());
      const int64_t len = std::min({n - s.kv_len, opt.chunked_prefill_size, budget});
      if (len <= 0) return;
      batch.push_back({&s, s.kv_len, s.kv_len + len});
      budget -= len;
    };
    for (auto& s : running)
      if (!s->prefilled && budget > 0) schedule(*s);
    while (!waiting.empty() && budget > 0 &&
           static_cast<int64_t>(running.size()) < opt.max_running_requests) {
      Sequence& s = *waiting.front();
      if (!admit(s)) {
        if (running.empty())
          fail("KV cache too small for a {}-token request ({} pages of {})", s.tokens.size(),
               pages.num_pages(), opt.page_size);
        break;
      }
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
      schedule(*running.back());
    }
    if (batch.empty()) return false;

    std::vector<SequenceChunk> chunks;
    for (auto& b : batch)
      chunks.push_back({&b.s->pages,
                        b.start,
                        {b.s->tokens.begin() + b.start, b.s->tokens.begin() + b.end},
                        false});
    ForwardBatch fb =
        build_forward_batch(ForwardMode::kExtend, chunks, opt.page_size, model->device());
    Workspace& ws = *workspace;
    ForwardResult r = model->forward(ws, fb, *cache);
    count_step();

    // Chunks that reached the end of their sequence sample its next token from their logit row.
    std::vector<Sequence*> done;
    std::vector<int64_t> done_rows;
    for (size_t i = 0; i < batch.size(); ++i) {
      Sequence& s = *batch[i].s;
      s.kv_len = batch[i].end;
      if (batch[i].end == static_cast<int64_t>(s.tokens.size())) {
        done.push_back(&s);
        done_rows.push_back(
            static_cast<int64_t>(i));  // logit row i: each chunk contributes its last token
      }
    }
    if (!done.empty()) {
      const std::vector<int32_t> next = sample_rows(ws, r.logits, done, done_rows);
      for (size_t i = 0; i < done.size(); ++i) {
        Sequence& s = *done[i];
        s.prefilled = true;
        if (s.req.return_hidden_states)
          s.pending_hidden.push_back(hidden_row(r.hidden, last_token_row(batch, s)));
        commit(s, {next[i]});
      }
    }
    if (spec) draft_extend_after_prefill(ws, batch, r);
    flush_outputs();
    return true;
  }

  static int64_t last_token_row(const std::vector<Scheduled>& batch, const Sequence& s) {
    int64_t row = 0;
    for (auto& b : batch) {
      row += b.end - b.start;
      if (b.s == &s) return row - 1;
    }
    return row - 1;
  }

  // Draft KV for the prompt: pairs (h_i, x_{i+1}) over each prefilled chunk; the last pair of a
  // finished prompt pairs the final prompt position with the token just sampled.
  void draft_extend_after_prefill(Workspace& ws, const std::vector<Scheduled>& batch,
                                  const ForwardResult& target) {
    std::vector<SequenceChunk> chunks;
    std::vector<int32_t> hidden_rows;
    std::vector<Sequence*> seqs;
    int64_t row = 0;
    for (auto& b : batch) {
      Sequence& s = *b.s;
      const int64_t len = b.end - b.start;
      if (!s.finished && static_cast<int64_t>(s.tokens.size()) > b.end) {
        chunks.push_back({&s.pages,
                          b.start,
                          {s.tokens.begin() + b.start + 1, s.tokens.begin() + b.end + 1},
                          false});
        for (int64_t i = 0; i < len; ++i) hidden_rows.push_back(static_cast<int32_t>(row + i));
        seqs.push_back(&s);
      }
      row += len;
    }
    if (chunks.empty()) return;
    ForwardBatch fb =
        build_forward_batch(ForwardMode::kExtend, chunks, opt.page_size, model->device());
    Tensor h = ops::gather_rows(ws, target.hidden, to_device(hidden_rows, model->device()));
    ForwardResult d = model->forward_mtp(ws, fb, h, *cache);
    std::vector<int64_t> ends;
    int64_t off = 0;
    for (auto& ch : chunks) ends.push_back(off += static_cast<int64_t>(ch.tokens.size()));
    set_next_drafts(ws, seqs, d, ends);
  }

  // From a draft forward: d1 = argmax of each sequence's logit row, and the draft hidden state
  // and indexer top-k of the token that produced it.
  void set_next_drafts(Workspace& ws, const std::vector<Sequence*>& seqs, const ForwardResult& d,
                       const std::vector<int64_t>& token_end) {
    const std::vector<int32_t> am = to_int_vector(ops::argmax(ws, d.logits));
    std::vector<int32_t> rows;
    for (size_t i = 0; i < seqs.size(); ++i) rows.push_back(static_cast<int32_t>(token_end[i] - 1));
    const Tensor rows_t = to_device(rows, model->device());
    const std::vector<float> hid = to_float_vector(ops::gather_rows(ws, d.hidden, rows_t));
    const int64_t D = model->config().hidden_size;
    std::vector<int32_t> topk;
    int64_t K = 0;
    if (d.topk.defined() && model->config().index_share_for_mtp_iteration) {
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

  // ---------------------------------------------------------------- decode-shaped forwards

  // kDraftLoop: all S - 1 draft decode steps of a round in one forward (see draft_loop).
  enum class Kind { kTarget = 0, kDraft = 1, kDraftReuse = 2, kDraftLoop = 3 };

  // The device inputs of one captured shape: (kind, padded batch, tokens per sequence).
  struct StaticBatch {
    int64_t bucket = 0, q = 0;
    ForwardBatch fb;
    Tensor hidden;  // [bucket * q, D]: the draft's hidden-state input
    Tensor reuse;   // [bucket * q, index_topk]: reused top-k rows
    ForwardResult out;
    // [3 T + 2 bucket + bucket * max_pages] i32: ids, positions, slots, lengths, logit rows and
    // the page table, which fb's tensors view, so a step uploads its inputs in one copy.
    Tensor inputs;
    // kDraftLoop only: one batch per draft step, sharing token_seq and the page table. Their
    // ids, positions, slots and lengths are views of step_meta, uploaded in one copy.
    std::vector<ForwardBatch> steps;  // [S - 1]
    Tensor step_meta;                 // [S - 1, 4, bucket] i32: ids, positions, slots, lengths
    Tensor drafts;                    // [S - 1, bucket] i32: d_2 .. d_S, written on the device
  };

  static int64_t bucket_for(int64_t b) {
    for (int64_t x : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256})
      if (b <= x) return x;
    return (b + 63) / 64 * 64;
  }

  // flag: every token's logits (kTarget, kDraft*); reused top-k (kDraftLoop, whose q is S).
  static int64_t shape_key(Kind kind, int64_t bucket, int64_t q, bool flag) {
    return (static_cast<int64_t>(kind) << 48) | (bucket << 16) | (q << 1) | (flag ? 1 : 0);
  }

  // Page-table width of static batches: the longest context plus a round's tokens.
  int64_t static_max_pages() const { return pages_for(ctx_len + S + 2, opt.page_size); }

  // Device buffers of a fixed-width batch of Bb sequences with q tokens each. Every per-step
  // input is a view of *inputs (laid out as FixedLayout::packed()); token_seq depends only on the
  // shape and is written once, here.
  ForwardBatch static_forward_batch(int64_t Bb, int64_t q, bool logit_rows, Tensor* inputs) const {
    const Device dev = model->device();
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
    fb.attn.token_seq = to_device(seq, dev);
    fb.attn.page_size = opt.page_size;
    // Kernels read real lengths from the device; the capture is sized for the longest.
    fb.attn.max_seq_len = ctx_len + S + 1;
    return fb;
  }

  // Host values of a fixed-width batch, padded to Bb sequences: padding sequences have length 1,
  // read page 0 and write their KV nowhere (slot -1).
  struct FixedLayout {
    std::vector<int32_t> ids, pos, slots;  // [Bb * q]
    std::vector<int32_t> lens, rows;       // [Bb]
    std::vector<int32_t> table;            // [Bb, max_pages]
    // All of it in the order of StaticBatch::inputs.
    std::vector<int32_t> packed() const {
      std::vector<int32_t> v;
      v.reserve(ids.size() * 3 + lens.size() * 2 + table.size());
      for (const auto* p : {&ids, &pos, &slots, &lens, &rows, &table})
        v.insert(v.end(), p->begin(), p->end());
      return v;
    }
  };

  FixedLayout fixed_layout(const std::vector<SequenceChunk>& chunks, int64_t Bb, int64_t q,
                           const std::vector<int64_t>& logit_pos) const {
    const int64_t B = static_cast<int64_t>(chunks.size()), T = Bb * q, maxp = static_max_pages();
    FixedLayout l;
    l.ids.assign(T, 0);
    l.pos.assign(T, 0);
    l.slots.assign(T, -1);
    l.lens.assign(Bb, 1);
    l.rows.assign(Bb, 0);
    l.table.assign(Bb * maxp, 0);
    for (int64_t b = 0; b < B; ++b) {
      const SequenceChunk& ch = chunks[b];
      TD_CHECK(static_cast<int64_t>(ch.tokens.size()) == q, "forward_fixed: {} tokens, expected {}",
               ch.tokens.size(), q);
      TD_CHECK(static_cast<int64_t>(ch.pages->size()) <= maxp,
               "sequence holds more pages than the context allows");
      for (int64_t i = 0; i < q; ++i) {
        const int64_t p = ch.start_pos + i;
        l.ids[b * q + i] = ch.tokens[i];
        l.pos[b * q + i] = static_cast<int32_t>(p);
        l.slots[b * q + i] = (*ch.pages)[p / opt.page_size] * static_cast<int32_t>(opt.page_size) +
                             static_cast<int32_t>(p % opt.page_size);
      }
      std::copy(ch.pages->begin(), ch.pages->end(), l.table.begin() + b * maxp);
      l.lens[b] = static_cast<int32_t>(ch.start_pos + q);
      if (!logit_pos.empty()) l.rows[b] = static_cast<int32_t>(b * q + logit_pos[b]);
    }
    return l;
  }

  static void put(Tensor& dst, const std::vector<int32_t>& v) {
    dst.copy_from(Tensor::from_vector(v, dst.shape()));
  }

  // A forward in which every sequence runs exactly q query tokens (decode, verify, draft steps,
  // draft extend). logit_pos: for each sequence the index (0..q-1) of the token whose logits
  // are wanted, or empty for every token. hidden / reuse: the draft's inputs ([B * q, ...]).
  // On GPUs it runs from static buffers at a padded batch size, as a CUDA graph per shape.
  ForwardResult forward_fixed(Kind kind, const std::vector<SequenceChunk>& chunks, int64_t q,
                              const std::vector<int64_t>& logit_pos, const Tensor& hidden,
                              const Tensor& reuse) {
    const Device dev = model->device();
    const int64_t B = static_cast<int64_t>(chunks.size());
    if (!runner) {
      ForwardBatch fb = build_forward_batch(ForwardMode::kDecode, chunks, opt.page_size, dev);
      if (!logit_pos.empty()) {
        std::vector<int32_t> rows;
        for (int64_t b = 0; b < B; ++b) rows.push_back(static_cast<int32_t>(b * q + logit_pos[b]));
        fb.logit_rows = to_device(rows, dev);
      } else {
        fb.logit_rows = Tensor();
      }
      if (kind == Kind::kTarget) return model->forward(*workspace, fb, *cache);
      return model->forward_mtp(*workspace, fb, hidden, *cache,
                                kind == Kind::kDraftReuse ? reuse : Tensor());
    }
    const int64_t Bb = bucket_for(B);
    const int64_t key = shape_key(kind, Bb, q, logit_pos.empty());
    std::unique_ptr<StaticBatch>& slot = statics[key];
    if (!slot) {
      slot = std::make_unique<StaticBatch>();
      StaticBatch& sb = *slot;
      sb.bucket = Bb;
      sb.q = q;
      sb.fb = static_forward_batch(Bb, q, !logit_pos.empty(), &sb.inputs);
      const int64_t T = Bb * q;
      if (kind != Kind::kTarget)
        sb.hidden =
            Tensor::zeros({T, model->config().hidden_size}, model->weights().embed.dtype(), dev);
      if (kind == Kind::kDraftReuse) sb.reuse = Tensor::zeros({T, reuse.size(1)}, DType::I32, dev);
    }
    StaticBatch& sb = *slot;
    put(sb.inputs, fixed_layout(chunks, Bb, q, logit_pos).packed());  // one host-to-device copy
    if (kind != Kind::kTarget) {
      Tensor dst = sb.hidden.narrow(0, 0, B * q);
      dst.copy_from(hidden.contiguous());
    }
    if (kind == Kind::kDraftReuse) {
      Tensor dst = sb.reuse.narrow(0, 0, B * q);
      dst.copy_from(reuse.contiguous());
    }
    runner->run(key, [&](Workspace& w) {
      sb.out = kind == Kind::kTarget
                   ? model->forward(w, sb.fb, *cache)
                   : model->forward_mtp(w, sb.fb, sb.hidden, *cache,
                                        kind == Kind::kDraftReuse ? sb.reuse : Tensor());
    });
    return sb.out;
  }

  // ---------------------------------------------------------------- draft decode

  // Step 1 of a round: drafts[b] = d_1 .. d_S. Each of the S - 1 MTP steps feeds the draft's own
  // hidden state and its previous draft token, one position further. With
  // index_share_for_mtp_iteration the steps reuse the draft-extend token's top-k.
  std::vector<std::vector<int32_t>> draft_decode(const std::vector<Sequence*>& seqs) {
    const int64_t B = static_cast<int64_t>(seqs.size());
    const int64_t D = model->config().hidden_size;
    std::vector<std::vector<int32_t>> drafts(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) drafts[b].push_back(seqs[b]->next_draft);
    if (S == 1) return drafts;
    std::vector<float> hid_host(static_cast<size_t>(B * D));
    for (int64_t b = 0; b < B; ++b)
      std::copy(seqs[b]->draft_hidden.begin(), seqs[b]->draft_hidden.end(),
                hid_host.begin() + b * D);
    const Tensor hid = activations(hid_host, {B, D});  // [B, D]
    Tensor reuse;                                      // [B, K] or undefined
    if (model->config().index_share_for_mtp_iteration && !seqs.empty() &&
        !seqs[0]->draft_topk.empty()) {
      const int64_t K = static_cast<int64_t>(seqs[0]->draft_topk.size());
      std::vector<int32_t> all;
      for (auto* s : seqs) all.insert(all.end(), s->draft_topk.begin(), s->draft_topk.end());
      reuse = Tensor::from_vector(all, {B, K});
      if (!model->device().is_cpu()) reuse = reuse.to(model->device());
    }
    if (runner)
      draft_loop(seqs, hid, reuse, drafts);
    else
      draft_steps(seqs, hid, reuse, drafts);
    return drafts;
  }

  // Without a runner (the CPU's default): one forward per step, each draft token passing
  // through the host to build the next step's input.
  void draft_steps(const std::vector<Sequence*>& seqs, Tensor hid, const Tensor& reuse,
                   std::vector<std::vector<int32_t>>& drafts) {
    const int64_t B = static_cast<int64_t>(seqs.size());
    for (int64_t j = 1; j < S; ++j) {
      std::vector<SequenceChunk> chunks;
      for (int64_t b = 0; b < B; ++b)
        chunks.push_back({&seqs[b]->pages, seqs[b]->kv_len - 1 + j, {drafts[b].back()}, false});
      ForwardResult d = forward_fixed(reuse.defined() ? Kind::kDraftReuse : Kind::kDraft, chunks, 1,
                                      std::vector<int64_t>(static_cast<size_t>(B), 0), hid, reuse);
      const std::vector<int32_t> am = to_int_vector(ops::argmax(*workspace, d.logits));
      for (int64_t b = 0; b < B; ++b) drafts[b].push_back(am[b]);
      hid = d.hidden.narrow(0, 0, B);  // [B, D]
    }
  }

  // With a runner: the S - 1 steps as one forward, captured as one CUDA graph per bucket. Each
  // step's argmax is copied on the device into the next step's input ids and into the drafts
  // buffer, which reaches the host once, after the last step.
  void draft_loop(const std::vector<Sequence*>& seqs, const Tensor& hid, const Tensor& reuse,
                  std::vector<std::vector<int32_t>>& drafts) {
    const int64_t B = static_cast<int64_t>(seqs.size()), Bb = bucket_for(B);
    const int64_t key = shape_key(Kind::kDraftLoop, Bb, S, reuse.defined());
    std::unique_ptr<StaticBatch>& slot = statics[key];
    if (!slot) slot = make_draft_loop(Bb, reuse.defined() ? reuse.size(1) : 0);
    StaticBatch& sb = *slot;

    // Host values of every step: step j writes position kv_len - 1 + j. Only step 1's ids matter;
    // later steps' ids are written by the previous step on the device.
    std::vector<int32_t> meta;  // [S - 1, 4, Bb]
    for (int64_t j = 1; j < S; ++j) {
      std::vector<SequenceChunk> chunks;
      for (int64_t b = 0; b < B; ++b)
        chunks.push_back({&seqs[b]->pages, seqs[b]->kv_len - 1 + j, {drafts[b][0]}, false});
      FixedLayout l = fixed_layout(chunks, Bb, 1, {});
      for (const auto* v : {&l.ids, &l.pos, &l.slots, &l.lens})
        meta.insert(meta.end(), v->begin(), v->end());
      if (j == 1) put(sb.steps[0].attn.page_table, l.table);
    }
    put(sb.step_meta, meta);
    Tensor h0 = sb.hidden.narrow(0, 0, B);
    h0.copy_from(hid);
    if (reuse.defined()) {
      Tensor r0 = sb.reuse.narrow(0, 0, B);
      r0.copy_from(reuse);
    }
    runner->run(key, [&](Workspace& w) {
      Tensor h = sb.hidden;  // [Bb, D]: the draft hidden state that produced d_1
      for (int64_t j = 1; j < S; ++j) {
        const ForwardResult d = model->forward_mtp(w, sb.steps[j - 1], h, *cache, sb.reuse);
        const Tensor am = ops::argmax(w, d.logits);  // [Bb] i32: d_{j+1}
        Tensor row = sb.drafts.select(0, j - 1);
        ops::copy(am, row);
        if (j + 1 < S) ops::copy(am, sb.steps[j].input_ids);
        h = d.hidden;  // [Bb, D]
      }
    });
    const std::vector<int32_t> out = to_int_vector(sb.drafts);  // [S - 1, Bb]
    for (int64_t j = 1; j < S; ++j)
      for (int64_t b = 0; b < B; ++b) drafts[b].push_back(out[(j - 1) * Bb + b]);
  }

  // Static buffers of the draft loop for a bucket; K: the reused top-k width (0: the MTP
  // indexer runs at every step).
  std::unique_ptr<StaticBatch> make_draft_loop(int64_t Bb, int64_t K) const {
    const Device dev = model->device();
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
        Tensor::zeros({Bb, model->config().hidden_size}, model->weights().embed.dtype(), dev);
    if (K > 0) sb->reuse = Tensor::zeros({Bb, K}, DType::I32, dev);
    sb->drafts = Tensor::zeros({S - 1, Bb}, DType::I32, dev);
    return sb;
  }

  // ---------------------------------------------------------------- decode

  void decode_step() {
    ensure_decode_pages(1);
    std::vector<Sequence*> seqs;
    std::vector<SequenceChunk> chunks;
    for (auto& s : running) {
      if (!s->prefilled) continue;
      seqs.push_back(s.get());
      chunks.push_back({&s->pages, s->kv_len, {s->tokens.back()}, false});
    }
    Workspace& ws = *workspace;
    ForwardResult r = forward_fixed(Kind::kTarget, chunks, 1, std::vector<int64_t>(seqs.size(), 0),
                                    Tensor(), Tensor());
    count_step();
    std::vector<int64_t> rows(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) rows[i] = static_cast<int64_t>(i);
    const std::vector<int32_t> next = sample_rows(ws, r.logits, seqs, rows);
    for (size_t i = 0; i < seqs.size(); ++i) {
      Sequence& s = *seqs[i];
      s.kv_len += 1;
      if (s.req.return_hidden_states)
        s.pending_hidden.push_back(hidden_row(r.hidden, static_cast<int64_t>(i)));
      commit(s, {next[i]});
    }
    flush_outputs();
  }

  // ---------------------------------------------------------------- speculative round

  // Wall time of each phase of a speculative round, with the device synchronized at every
  // boundary so that queued work is charged to the phase that queued it.
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

  void spec_round() {
    PhaseClock clock(opt.profile_spec_phases, model->device());
    ensure_decode_pages(S + 1);
    std::vector<Sequence*> seqs;
    for (auto& s : running)
      if (s->prefilled) seqs.push_back(s.get());
    const int64_t B = static_cast<int64_t>(seqs.size());
    const Device dev = model->device();
    Workspace& ws = *workspace;

    // 1. Draft decode: S - 1 more draft tokens, each step feeding the draft's own hidden state.
    std::vector<std::vector<int32_t>> drafts = draft_decode(seqs);
    if (opt.spec.draft_override)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < S; ++j)
          drafts[b][j] =
              opt.spec.draft_override(seqs[b]->id, seqs[b]->kv_len + 1 + j, drafts[b][j]);
    clock.mark(0);

    // 2. Verify: the target runs [x_L, d_1 .. d_S] at positions L .. L + S.
    std::vector<SequenceChunk> chunks;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<int32_t> toks = {seqs[b]->tokens.back()};
      toks.insert(toks.end(), drafts[b].begin(), drafts[b].end());
      chunks.push_back({&seqs[b]->pages, seqs[b]->kv_len, toks, true});
    }
    ForwardResult v = forward_fixed(Kind::kTarget, chunks, S + 1, {}, Tensor(), Tensor());
    count_step();
    const std::vector<int32_t> target_am =
        to_int_vector(ops::argmax(ws, v.logits));  // [B * (S + 1)]
    clock.mark(1);

    // 3. Accept, commit, and count.
    std::vector<int64_t> accepted(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) {
      Sequence& s = *seqs[b];
      const int64_t base = b * (S + 1);
      std::vector<int32_t> t_next(target_am.begin() + base, target_am.begin() + base + S + 1);
      Acceptance a;
      if (opt.spec.simulate_accept_length > 0) {
        a = accept_simulated(drafts[b], t_next, opt.spec.simulate_accept_length, s.rng);
      } else if (s.req.sampling.greedy()) {
        a = accept_greedy(drafts[b], t_next);
      } else {
        std::vector<int32_t> rows;
        for (int64_t i = 0; i <= S; ++i) rows.push_back(static_cast<int32_t>(base + i));
        const std::vector<float> lg =
            to_float_vector(ops::gather_rows(ws, v.logits, to_device(rows, dev)));
        const int64_t V = v.logits.size(1);
        std::vector<std::vector<float>> probs(static_cast<size_t>(S + 1));
        for (int64_t i = 0; i <= S; ++i)
          sampling_distribution(lg.data() + i * V, V, s.req.sampling, probs[i]);
        a = accept_sampled(drafts[b], probs, s.rng);
      }
      accepted[b] = a.accepted;
      s.spec_verify_steps += 1;
      s.spec_accepted += a.accepted;
      {
        std::lock_guard<std::mutex> g(metrics_mu);
        m.spec_verify_steps += 1;
        m.spec_draft_tokens += static_cast<uint64_t>(S);
        m.spec_accepted_tokens += static_cast<uint64_t>(a.accepted);
        for (int64_t i = 0; i < a.accepted; ++i) m.spec_accepted_per_position[i] += 1;
      }
      if (s.req.return_hidden_states)
        for (int64_t i = 0; i <= a.accepted; ++i)
          s.pending_hidden.push_back(hidden_row(v.hidden, base + i));
      // Verified positions L .. L + k hold KV of committed tokens; the rest is overwritten later.
      s.kv_len += 1 + a.accepted;
      commit(s, a.tokens);
    }
    clock.mark(2);

    // 4. Draft extend, fixed width S + 1: the draft re-reads every verified position with the
    // target's hidden states, so its KV for committed positions comes from target states.
    std::vector<SequenceChunk> ext;
    std::vector<int32_t> hidden_rows;
    std::vector<int64_t> logit_pos;
    std::vector<Sequence*> live;
    std::vector<int64_t> ends;
    int64_t off = 0;
    for (int64_t b = 0; b < B; ++b) {
      Sequence& s = *seqs[b];
      if (s.finished) continue;
      const int64_t k = accepted[b], L = s.kv_len - 1 - k;
      std::vector<int32_t> toks(s.tokens.end() - (k + 1), s.tokens.end());  // d_1 .. d_k, bonus
      for (int64_t i = k + 1; i <= S; ++i) toks.push_back(target_am[b * (S + 1) + i]);  // filler
      ext.push_back({&s.pages, L, toks, false});
      for (int64_t i = 0; i <= S; ++i) hidden_rows.push_back(static_cast<int32_t>(b * (S + 1) + i));
      logit_pos.push_back(k);
      ends.push_back(off + k + 1);
      off += S + 1;
      live.push_back(&s);
    }
    if (!ext.empty()) {
      Tensor h = ops::gather_rows(ws, v.hidden, to_device(hidden_rows, dev));
      ForwardResult d = forward_fixed(Kind::kDraft, ext, S + 1, logit_pos, h, Tensor());
      set_next_drafts(ws, live, d, ends);
    }
    clock.mark(3);
    if (clock.on) {
      std::lock_guard<std::mutex> g(metrics_mu);
      for (size_t i = 0; i < clock.seconds.size(); ++i) m.spec_phase_seconds[i] += clock.seconds[i];
      ++m.spec_profiled_rounds;
    }
    flush_outputs();
  }

  // ---------------------------------------------------------------- sampling and outputs

  // Next token for each sequence from logit row rows[i]. Greedy rows use the device argmax;
  // sampled rows bring their logits to the host.
  std::vector<int32_t> sample_rows(Workspace& ws, const Tensor& logits,
                                   const std::vector<Sequence*>& seqs,
                                   const std::vector<int64_t>& rows) {
    bool all_greedy = true;
    for (auto* s : seqs) all_greedy &= s->req.sampling.greedy();
    std::vector<int32_t> picked;
    if (all_greedy) {
      picked = to_int_vector(ops::argmax(ws, logits));
    } else {
      // One sampling op on the device for every row; the uniforms come from each request's
      // seeded RNG, so a seed reproduces its tokens whatever else is batched with it.
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
      const Device dev = model->device();
      auto put = [&](const std::vector<float>& v) {
        Tensor t = Tensor::from_vector(v, {R});
        return dev.is_cpu() ? t : t.to(dev);
      };
      picked = to_int_vector(
          ops::sample(ws, logits, put(temp), to_device(top_k, dev), put(top_p), put(u)));
    }
    std::vector<int32_t> out(seqs.size());
    for (size_t i = 0; i < seqs.size(); ++i) out[i] = picked[static_cast<size_t>(rows[i])];
    return out;
  }

  // Host fp32 values as activations of the model's backend (its embedding dtype, on its device).
  Tensor activations(const std::vector<float>& v, const Shape& shape) const {
    Tensor t = Tensor::from_vector(v, shape);
    const DType dt = model->weights().embed.dtype();
    if (dt != DType::F32) t = t.to_dtype(dt);
    return model->device().is_cpu() ? t : t.to(model->device());
  }

  std::vector<float> hidden_row(const Tensor& hidden, int64_t row) {
    return to_float_vector(hidden.narrow(0, row, 1).contiguous());
  }

  // Appends tokens, stopping at a stop token or at max_new_tokens.
  void commit(Sequence& s, const std::vector<int32_t>& toks) {
    for (int32_t t : toks) {
      s.tokens.push_back(t);
      s.generated += 1;
      s.pending.new_tokens.push_back(t);
      const auto& stops = s.req.stop_token_ids;
      if (std::find(stops.begin(), stops.end(), t) != stops.end()) {
        s.pending.matched_stop_token = t;
        s.pending.finish_reason = FinishReason::kStop;
        s.finished = true;
        break;
      }
      if (s.generated >= s.req.max_new_tokens) {
        s.pending.finish_reason = FinishReason::kLength;
        s.finished = true;
        break;
      }
    }
    // KV never covers more than the committed tokens minus the newest one.
    s.kv_len = std::min<int64_t>(s.kv_len, static_cast<int64_t>(s.tokens.size()) - 1);
  }

  void fill_totals(Sequence& s, RequestOutput& o) {
    o.prompt_tokens = s.prompt_len;
    o.completion_tokens = s.generated;
    o.cached_tokens = s.cached_tokens;
    o.spec_verify_steps = s.spec_verify_steps;
    o.spec_accepted_drafts = s.spec_accepted;
  }

  // Sends each sequence's pending tokens and retires finished sequences.
  void flush_outputs() {
    int64_t produced = 0;
    for (auto& sp : running) {
      Sequence& s = *sp;
      if (s.pending.new_tokens.empty() && !s.finished) continue;
      produced += static_cast<int64_t>(s.pending.new_tokens.size());
      RequestOutput o = std::move(s.pending);
      s.pending = RequestOutput{};
      o.hidden_states = std::move(s.pending_hidden);
      s.pending_hidden.clear();
      fill_totals(s, o);
      o.finished = s.finished;
      if (s.finished) {
        release_pages(s);
        std::lock_guard<std::mutex> g(metrics_mu);
        ++m.requests_finished;
        m.prompt_tokens_total += static_cast<uint64_t>(s.prompt_len);
        m.cached_tokens_total += static_cast<uint64_t>(s.cached_tokens);
      }
      s.stream->push(std::move(o));
    }
    running.erase(
        std::remove_if(running.begin(), running.end(), [](const auto& s) { return s->finished; }),
        running.end());
    std::lock_guard<std::mutex> g(metrics_mu);
    m.generation_tokens_total += static_cast<uint64_t>(produced);
    recent_tokens.emplace_back(Clock::now(), produced);
  }

  void finish(Sequence& s, FinishReason why, const std::string& error) {
    RequestOutput o = std::move(s.pending);
    fill_totals(s, o);
    o.finished = true;
    o.finish_reason = why;
    o.error = error;
    s.finished = true;
    if (!s.pages.empty()) {
      // An abort arrives between steps, so the KV of the committed tokens is complete and
      // worth keeping (the server aborts requests that hit a stop string); a failed step's is not.
      if (why == FinishReason::kAbort && opt.enable_prefix_cache)
        prefix.insert(s.tokens, s.kv_len, s.pages);
      pages.release(s.pages);
      s.pages.clear();
    }
    s.stream->push(std::move(o));
    std::lock_guard<std::mutex> g(metrics_mu);
    ++m.requests_finished;
  }

  void abort_now(uint64_t id) {
    for (auto it = waiting.begin(); it != waiting.end(); ++it)
      if ((*it)->id == id) {
        finish(**it, FinishReason::kAbort, "");
        waiting.erase(it);
        return;
      }
    for (auto it = running.begin(); it != running.end(); ++it)
      if ((*it)->id == id) {
        finish(**it, FinishReason::kAbort, "");
        running.erase(it);
        return;
      }
    std::lock_guard<std::mutex> g(mu);
    for (auto it = inbox.begin(); it != inbox.end(); ++it)
      if ((*it)->id == id) {
        finish(**it, FinishReason::kAbort, "");
        inbox.erase(it);
        return;
      }
  }

  void count_step() {
    std::lock_guard<std::mutex> g(metrics_mu);
    ++m.forward_steps_total;
  }

  void publish_metrics() {
    std::lock_guard<std::mutex> g(metrics_mu);
    m.num_running = static_cast<int64_t>(running.size());
    m.num_waiting = static_cast<int64_t>(waiting.size());
    m.kv_pages_used = pages.num_pages() - pages.num_free();
    m.kv_pages_cached = prefix.evictable();
    const auto now = Clock::now();
    while (!recent_tokens.empty() && now - recent_tokens.front().first > std::chrono::seconds(5))
      recent_tokens.pop_front();
    int64_t n = 0;
    for (auto& [t, c] : recent_tokens) n += c;
    m.last_gen_throughput = recent_tokens.empty() ? 0.0 : n / 5.0;
  }
};

Engine::Engine(std::shared_ptr<const Model> model, EngineOptions opts)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(opts))) {}
Engine::~Engine() = default;
std::shared_ptr<RequestStream> Engine::submit(Request r) {
  return impl_->submit(std::move(r));
}
void Engine::abort(uint64_t id) {
  impl_->abort(id);
}
bool Engine::flush_cache() {
  return impl_->flush();
}
EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> g(impl_->metrics_mu);
  return impl_->m;
}
const EngineOptions& Engine::options() const {
  return impl_->opt;
}
const ModelConfig& Engine::model_config() const {
  return impl_->model->config();
}
int64_t Engine::context_length() const {
  return impl_->ctx_len;
}

}  // namespace tandem
