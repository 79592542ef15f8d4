#include "runtime/step_message.h"

#include <algorithm>
#include <cstring>
#include <map>

namespace tandem {

// Reads a step message; every read is bounds-checked (a malformed message is an Error).
class StepReader {
 public:
  explicit StepReader(const Bytes& b) : b_(b) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> get_vec() {
    const uint64_t n = get<uint64_t>();
    if (n > b_.size()) fail("step message: a list of {} elements in {} bytes", n, b_.size());
    need(n * sizeof(T));
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), b_.data() + at_, n * sizeof(T));  // (empty: data() is null)
    at_ += n * sizeof(T);
    return v;
  }

 private:
  void need(size_t n) const {
    if (at_ + n > b_.size()) fail("step message truncated at byte {} of {}", at_, b_.size());
  }
  const Bytes& b_;
  size_t at_ = 0;
};

namespace {

enum : uint8_t { kStep = 1, kStop = 2 };

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b_.insert(b_.end(), p, p + sizeof(T));
  }
  template <typename T>
  void put_vec(const T* p, size_t n) {
    put<uint64_t>(n);
    const auto* q = reinterpret_cast<const uint8_t*>(p);
    b_.insert(b_.end(), q, q + n * sizeof(T));
  }
  template <typename T>
  void put_vec(const std::vector<T>& v) {
    put_vec(v.data(), v.size());
  }
  Bytes take() { return std::move(b_); }

 private:
  Bytes b_;
};

enum : uint8_t { kFree = 0, kConstraintHeld = 1, kConstraintNew = 2 };

// One sequence; of its tokens only [from, to), the ones the step reads (a long prompt is not
// sent again with every chunk). A constraint the followers do not hold yet comes with its
// replica spec and the generated tokens it has accepted.
void put_sequence(Writer& w, const Sequence& s, int64_t from, int64_t to,
                  ReplicatedConstraints* replicated) {
  w.put<uint64_t>(s.id);
  w.put<int64_t>(s.prompt_len);
  w.put<int64_t>(s.kv_len);
  w.put<int64_t>(s.generated);
  w.put<uint8_t>(s.prefilled);
  w.put<uint8_t>(s.req.return_hidden_states);
  w.put<int64_t>(s.req.max_new_tokens);
  w.put<float>(s.req.sampling.temperature);
  w.put<int32_t>(s.req.sampling.top_k);
  w.put<float>(s.req.sampling.top_p);
  w.put<uint64_t>(s.req.sampling.seed);
  w.put<uint64_t>(s.rng.state());
  w.put_vec(s.req.stop_token_ids);
  w.put<int64_t>(static_cast<int64_t>(s.tokens.size()));
  w.put<int64_t>(from);
  w.put_vec(s.tokens.data() + from, static_cast<size_t>(to - from));
  w.put_vec(s.pages);
  w.put<int32_t>(s.next_draft);
  w.put<int64_t>(s.draft_lag);
  if (!s.req.constraint) {
    w.put<uint8_t>(kFree);
  } else if (replicated && replicated->count(s.id)) {
    w.put<uint8_t>(kConstraintHeld);
  } else {
    TD_CHECK(replicated, "step message: a constrained sequence without replication state");
    w.put<uint8_t>(kConstraintNew);
    const std::string spec = s.req.constraint->replica_spec();
    w.put_vec(spec.data(), spec.size());
    w.put_vec(s.tokens.data() + s.prompt_len, s.tokens.size() - static_cast<size_t>(s.prompt_len));
    replicated->insert(s.id);
  }
}

}  // namespace

// Updates (or creates) the sequence the next record describes.
Sequence* FollowerSequences::read_sequence(StepReader& r) {
  const uint64_t id = r.get<uint64_t>();
  std::unique_ptr<Sequence>& slot = seqs_[id];
  if (!slot) {
    slot = std::make_unique<Sequence>();
    slot->id = id;
  }
  Sequence* s = slot.get();
  s->prompt_len = r.get<int64_t>();
  s->kv_len = r.get<int64_t>();
  s->generated = r.get<int64_t>();
  s->prefilled = r.get<uint8_t>() != 0;
  s->req.return_hidden_states = r.get<uint8_t>() != 0;
  s->req.max_new_tokens = r.get<int64_t>();
  s->req.sampling.temperature = r.get<float>();
  s->req.sampling.top_k = r.get<int32_t>();
  s->req.sampling.top_p = r.get<float>();
  s->req.sampling.seed = r.get<uint64_t>();
  s->rng = Rng(r.get<uint64_t>());
  s->req.stop_token_ids = r.get_vec<int32_t>();
  const int64_t total = r.get<int64_t>(), start = r.get<int64_t>();
  const std::vector<int32_t> window = r.get_vec<int32_t>();
  if (start < 0 || start + static_cast<int64_t>(window.size()) > total)
    fail("step message: sequence {} has tokens [{}, {}) of {}", s->id, start,
         start + static_cast<int64_t>(window.size()), total);
  // Positions outside the window are never read by the step; the length must be right (the step
  // compares against it) and the indices absolute.
  s->tokens.resize(static_cast<size_t>(total));
  std::copy(window.begin(), window.end(), s->tokens.begin() + start);
  s->pages = r.get_vec<int32_t>();
  s->next_draft = r.get<int32_t>();
  s->draft_lag = r.get<int64_t>();
  if (s->draft_lag < 0 || s->draft_lag > s->kv_len)
    fail("step message: sequence {} lags its draft by {} of {} positions", s->id, s->draft_lag,
         s->kv_len);
  const uint8_t constraint = r.get<uint8_t>();
  if (constraint == kFree) {
    s->req.constraint = nullptr;
  } else if (constraint == kConstraintHeld) {
    if (!s->req.constraint)
      fail("step message: sequence {} is constrained but this rank holds no copy", s->id);
  } else if (constraint == kConstraintNew) {
    const std::vector<char> spec = r.get_vec<char>();
    const std::vector<int32_t> accepted = r.get_vec<int32_t>();
    if (!factory_)
      fail("step message: sequence {} is constrained but this rank cannot build constraints",
           s->id);
    s->req.constraint = factory_(std::string(spec.begin(), spec.end()));
    // Rank 0's constraint has followed these tokens; this copy catches up.
    for (size_t i = 0; i < accepted.size(); ++i)
      if (!s->req.constraint->accept(accepted[i]))
        fail("step message: sequence {}'s constraint refuses its own token {} at {}", s->id,
             accepted[i], i);
  } else {
    fail("step message: sequence {} has constraint tag {}", s->id, constraint);
  }
  s->finished = false;
  s->pending = RequestOutput{};
  s->pending_hidden.clear();
  return s;
}

Bytes encode_step(const StepPlan& plan, const std::vector<uint64_t>& running,
                  ReplicatedConstraints* replicated) {
  // Followers forget sequences that are not running; so does the record of what they hold.
  if (replicated)
    for (auto it = replicated->begin(); it != replicated->end();)
      it = std::find(running.begin(), running.end(), *it) != running.end() ? std::next(it)
                                                                           : replicated->erase(it);
  Writer w;
  w.put<uint8_t>(kStep);
  w.put<uint8_t>(static_cast<uint8_t>(plan.kind));
  w.put<int64_t>(plan.draft_steps);
  w.put<uint8_t>(plan.fill_draft);
  // Each sequence once, with the token positions the step reads: a chunk [start, end) and the
  // token after it (the draft pairs h_i with x_{i+1}); a decode the last token.
  std::vector<const Sequence*> seqs;
  std::map<const Sequence*, int64_t> index;
  std::map<const Sequence*, std::pair<int64_t, int64_t>> window;
  auto add = [&](const Sequence* s, int64_t from, int64_t to) {
    to = std::min<int64_t>(to, static_cast<int64_t>(s->tokens.size()));
    auto [it, fresh] = index.emplace(s, static_cast<int64_t>(seqs.size()));
    if (fresh) {
      seqs.push_back(s);
      window[s] = {from, to};
    } else {
      window[s] = {std::min(window[s].first, from), std::max(window[s].second, to)};
    }
    return it->second;
  };
  std::vector<std::tuple<int64_t, int64_t, int64_t>> chunks;  // (sequence, start, end)
  for (const ScheduledChunk& c : plan.prefill)
    chunks.emplace_back(add(c.seq, c.start, c.end + 1), c.start, c.end);
  std::vector<int64_t> decode;
  for (const Sequence* s : plan.decode) {
    const int64_t n = static_cast<int64_t>(s->tokens.size());
    decode.push_back(add(s, n - 1, n));
  }
  w.put<uint32_t>(static_cast<uint32_t>(seqs.size()));
  for (const Sequence* s : seqs) put_sequence(w, *s, window[s].first, window[s].second, replicated);
  w.put<uint32_t>(static_cast<uint32_t>(chunks.size()));
  for (auto [i, b, e] : chunks) {
    w.put<int64_t>(i);
    w.put<int64_t>(b);
    w.put<int64_t>(e);
  }
  w.put_vec(decode);
  w.put_vec(running);
  return w.take();
}

Bytes encode_stop() {
  Writer w;
  w.put<uint8_t>(kStop);
  return w.take();
}

FollowerSequences::Step FollowerSequences::apply(const Bytes& b) {
  StepReader r(b);
  Step out;
  const uint8_t tag = r.get<uint8_t>();
  if (tag == kStop) {
    out.stop = true;
    return out;
  }
  if (tag != kStep) fail("step message: unknown tag {}", tag);
  const uint8_t kind = r.get<uint8_t>();
  if (kind > static_cast<uint8_t>(StepPlan::Kind::kDecode)) fail("step message: kind {}", kind);
  out.plan.kind = static_cast<StepPlan::Kind>(kind);
  out.plan.draft_steps = r.get<int64_t>();
  out.plan.fill_draft = r.get<uint8_t>() != 0;
  const uint32_t n = r.get<uint32_t>();
  std::vector<Sequence*> in_step;
  for (uint32_t i = 0; i < n; ++i) in_step.push_back(read_sequence(r));
  auto seq = [&](int64_t i) {
    if (i < 0 || i >= static_cast<int64_t>(in_step.size()))
      fail("step message: sequence index {} of {}", i, in_step.size());
    return in_step[static_cast<size_t>(i)];
  };
  const uint32_t nc = r.get<uint32_t>();
  for (uint32_t i = 0; i < nc; ++i) {
    ScheduledChunk c;
    c.seq = seq(r.get<int64_t>());
    c.start = r.get<int64_t>();
    c.end = r.get<int64_t>();
    if (c.start < 0 || c.end < c.start || c.end > static_cast<int64_t>(c.seq->tokens.size()))
      fail("step message: chunk [{}, {}) of a sequence of {} tokens", c.start, c.end,
           c.seq->tokens.size());
    out.plan.prefill.push_back(c);
  }
  for (int64_t i : r.get_vec<int64_t>()) out.plan.decode.push_back(seq(i));
  std::vector<uint64_t> running = r.get_vec<uint64_t>();
  std::sort(running.begin(), running.end());
  for (Sequence* s : in_step)  // a step's sequences are running by definition
    if (!std::binary_search(running.begin(), running.end(), s->id))
      fail("step message: sequence {} is in the step but not running", s->id);
  for (auto it = seqs_.begin(); it != seqs_.end();)
    it = std::binary_search(running.begin(), running.end(), it->first) ? std::next(it)
                                                                       : seqs_.erase(it);
  // A round drafts from this rank's draft state: without it this rank would draft other tokens
  // than rank 0 and the ranks would part ways, so stop instead.
  if (out.plan.draft_steps > 0)
    for (const Sequence* s : out.plan.decode)
      if (s->draft_hidden.empty() && s->draft_lag == 0 && out.plan.draft_steps > 1)
        fail(
            "step message: sequence {} decodes speculatively but this rank has no draft state "
            "for it",
            s->id);
  return out;
}

const Sequence* FollowerSequences::find(uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

}  // namespace tandem
