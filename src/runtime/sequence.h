// One request inside the engine: its committed tokens, where its KV lives, and its speculative
// state. Plain host data, owned by the engine thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/rng.h"
#include "runtime/engine.h"

namespace tandem {

class StreamImpl final : public RequestStream {
 public:
  explicit StreamImpl(uint64_t id) : id_(id) {}
  uint64_t id() const override { return id_; }
  bool next(RequestOutput& out, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, timeout, [&] { return !queue_.empty(); })) return false;
    out = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }
  bool set_notify(std::function<void()> fn) override {
    std::shared_ptr<const std::function<void()>> call;
    {
      std::lock_guard<std::mutex> g(mu_);
      notify_ = fn ? std::make_shared<const std::function<void()>>(std::move(fn)) : nullptr;
      if (!queue_.empty()) call = notify_;
    }
    if (call) (*call)();
    return true;
  }
  // Queues a message. A reader blocked in next() is woken; one served through set_notify is told
  // now, or with notify_later by notify() (the engine tells every stream of a step once all of
  // them have their messages, so the reader's thread does not start pulling, and contend for the
  // streams' locks, while the engine is still pushing).
  void push(RequestOutput o, bool notify_later = false) {
    std::shared_ptr<const std::function<void()>> notify;
    {
      std::lock_guard<std::mutex> g(mu_);
      queue_.push_back(std::move(o));
      if (!notify_later) notify = notify_;
    }
    cv_.notify_all();
    if (notify) (*notify)();
  }
  void notify() {
    std::shared_ptr<const std::function<void()>> notify;
    {
      std::lock_guard<std::mutex> g(mu_);
      notify = notify_;
    }
    if (notify) (*notify)();
  }

 private:
  uint64_t id_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  std::shared_ptr<const std::function<void()>> notify_;  // copied to call outside the lock
};

struct Sequence {
  uint64_t id = 0;
  Request req;
  std::shared_ptr<StreamImpl> stream;
  std::vector<int32_t> tokens;  // committed: prompt, then generated tokens
  int64_t prompt_len = 0;
  int64_t kv_len = 0;          // tokens[0, kv_len) have target (and draft) KV in the cache
  std::vector<int32_t> pages;  // covers at least kv_len tokens
  int64_t cached_tokens = 0;   // prompt tokens reused from the prefix cache
  int64_t generated = 0;
  Rng rng;
  bool prefilled = false;  // every committed token but the last has KV; decoding
  // Speculative state for the next round: d1 (from the last draft extend), the draft hidden
  // state that feeds the next draft step, and the indexer top-k row to reuse.
  int32_t next_draft = -1;
  std::vector<float> draft_hidden;  // [D]
  std::vector<int32_t> draft_topk;  // [index_topk] (index_share_for_mtp_iteration)
  // Positions whose draft KV is not written yet, the last draft_lag of [0, kv_len): with adaptive
  // depth the draft skips prompts, plain steps and reused prefixes until a speculative round
  // needs it. Their target hidden states wait in the runner's stash; the round drafts from them
  // first (SpecWorker::catch_up), and next_draft, draft_hidden and draft_topk are stale until
  // then.
  int64_t draft_lag = 0;
  int64_t spec_verify_steps = 0;
  int64_t spec_accepted = 0;
  int64_t spec_drafted = 0;
  std::chrono::steady_clock::time_point arrival;
  // The pending output message (tokens produced this step).
  RequestOutput pending;
  std::vector<std::vector<float>> pending_hidden;
  bool finished = false;
};

}  // namespace tandem
