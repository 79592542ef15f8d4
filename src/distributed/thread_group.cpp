#include "distributed/thread_group.h"

namespace tandem {

namespace {

class ThreadGroup final : public ProcessGroup {
 public:
  ThreadGroup(std::shared_ptr<ThreadHub> hub, int rank) : hub_(std::move(hub)), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return hub_->world(); }
  void broadcast(Bytes& bytes) override {
    // Everyone takes part in one exchange; only rank 0's part is kept.
    std::vector<Bytes> all =
        hub_->exchange(rank_, rank_ == 0 ? bytes : Bytes{}, true, "a broadcast");
    if (rank_ != 0) bytes = std::move(all[0]);
  }
  std::vector<Bytes> all_gather(const Bytes& mine) override {
    return hub_->exchange(rank_, mine, false, "an all-gather");
  }
  void abort(const std::string& why) override { hub_->abort(why); }

 private:
  std::shared_ptr<ThreadHub> hub_;
  int rank_;
};

}  // namespace

std::vector<std::unique_ptr<ProcessGroup>> ThreadHub::make(int world) {
  auto hub = std::make_shared<ThreadHub>(world);
  std::vector<std::unique_ptr<ProcessGroup>> groups;
  for (int r = 0; r < world; ++r) groups.push_back(std::make_unique<ThreadGroup>(hub, r));
  return groups;
}

ThreadHub::ThreadHub(int world)
    : world_(world), slots_(static_cast<size_t>(world)), kinds_(static_cast<size_t>(world)) {}

std::vector<Bytes> ThreadHub::exchange(int rank, const Bytes& mine, bool wait_forever,
                                       const char* kind) {
  std::unique_lock<std::mutex> lk(mu_);
  // A rank may arrive for round n + 1 while slower ranks still collect round n's result.
  cv_.wait(lk, [&] { return departed_ == 0 || !aborted_.empty(); });
  if (!aborted_.empty()) throw PeerError(aborted_);
  const uint64_t my_round = round_;
  slots_[static_cast<size_t>(rank)] = mine;
  kinds_[static_cast<size_t>(rank)] = kind;
  if (++arrived_ == world_) {
    for (int r = 1; r < world_; ++r)
      if (std::string(kinds_[static_cast<size_t>(r)]) != kinds_[0]) {
        aborted_ = fmt::format(
            "the ranks have parted ways: rank 0 is in {}, rank {} in {} (they no longer run "
            "the same steps)",
            kinds_[0], r, kinds_[static_cast<size_t>(r)]);
        cv_.notify_all();
        throw PeerError(aborted_);
      }
    result_ = slots_;
    arrived_ = 0;
    departed_ = world_;
    ++round_;
    cv_.notify_all();
  } else {
    const auto done = [&] { return round_ != my_round || !aborted_.empty(); };
    if (wait_forever) {
      cv_.wait(lk, done);
    } else if (!cv_.wait_for(lk, collective_timeout(), done)) {
      aborted_ = fmt::format("rank {}: {} of {} ranks reached a collective within {} ms", rank,
                             arrived_, world_, collective_timeout().count());
      cv_.notify_all();
    }
    if (round_ == my_round) throw PeerError(aborted_);
  }
  std::vector<Bytes> out = result_;
  if (--departed_ == 0) cv_.notify_all();
  return out;
}

void ThreadHub::abort(const std::string& why) {
  std::lock_guard<std::mutex> g(mu_);
  if (aborted_.empty()) aborted_ = why;
  cv_.notify_all();
}

}  // namespace tandem
