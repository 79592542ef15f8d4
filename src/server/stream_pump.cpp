#include "server/stream_pump.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "server/http_wire.h"

namespace tandem::server {

namespace {

using Clock = std::chrono::steady_clock;
// How often every stream is looked at whatever the events: stall deadlines, streams adopted or
// bodies notified whose wake-up was lost.
constexpr std::chrono::milliseconds kTick{100};
constexpr uint64_t kWakeKey = 0;  // epoll key of the shard's eventfd; streams are 1, 2, ...

// Stream ids whose body may have more, queued from any thread (the engine's, mostly). Shared
// with the bodies' callbacks, so a late notification after a stream ended, or after the pump
// stopped, finds a live object and is ignored.
class ReadyQueue {
 public:
  ReadyQueue() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    TD_CHECK(fd_ >= 0, "stream pump: eventfd: {}", std::strerror(errno));
  }
  ~ReadyQueue() { ::close(fd_); }
  int fd() const { return fd_; }
  // One eventfd write per batch: only the push that finds the queue empty wakes the thread.
  void push(uint64_t id) {
    bool wake;
    {
      std::lock_guard<std::mutex> g(mu_);
      wake = ids_.empty();
      ids_.push_back(id);
    }
    if (wake) this->wake();
  }
  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t w = ::write(fd_, &one, sizeof one);
  }
  // Consumes the wake-ups so far. Call it before looking at what they announced (the queued ids
  // and the shard's adopted streams): a wake-up that comes after it stays pending.
  void drain() {
    uint64_t n;
    while (::read(fd_, &n, sizeof n) > 0) {
    }
  }
  void take(std::vector<uint64_t>& out) {
    std::lock_guard<std::mutex> g(mu_);
    out.swap(ids_);
  }

 private:
  int fd_;
  std::mutex mu_;
  std::vector<uint64_t> ids_;
};

}  // namespace

class StreamPump::Shard {
 public:
  Shard(int index, std::chrono::milliseconds write_timeout)
      : write_timeout_(write_timeout), ready_(std::make_shared<ReadyQueue>()) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    TD_CHECK(epoll_fd_ >= 0, "stream pump: epoll_create1: {}", std::strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWakeKey;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ready_->fd(), &ev);
    thread_ = std::thread([this, index] {
      name_this_thread(fmt::format("http-stream-{}", index));
      loop();
    });
  }
  ~Shard() {
    stop();
    ::close(epoll_fd_);
  }

  void adopt(uint64_t id, int fd, std::string head, std::shared_ptr<BodyStream> body, bool chunked,
             Done done) {
    // First the callback, then the entry: a notification that comes before the thread knows the
    // id is dropped, which is harmless, as adoption reads whatever the body already has.
    std::shared_ptr<ReadyQueue> q = ready_;
    body->set_ready_callback([q, id] { q->push(id); });
    auto e = std::make_unique<Entry>();
    e->id = id;
    e->fd = fd;
    e->pending = std::move(head);
    e->body = std::move(body);
    e->chunked = chunked;
    e->done = std::move(done);
    {
      std::lock_guard<std::mutex> g(incoming_mu_);
      incoming_.push_back(std::move(e));
    }
    ready_->wake();
  }

  void stop() {
    if (stopping_.exchange(true)) return;
    ready_->wake();
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Entry {
    uint64_t id = 0;
    int fd = -1;
    std::shared_ptr<BodyStream> body;
    bool chunked = true;
    std::string pending;  // framed bytes not yet taken by the socket
    bool body_done = false;
    bool watching_out = false;
    Clock::time_point stall_deadline;
    Done done;
  };

  void loop() {
    std::vector<epoll_event> evs(128);
    std::vector<uint64_t> ids;
    Clock::time_point next_tick = Clock::now() + kTick;
    while (!stopping_) {
      const int n = epoll_wait(epoll_fd_, evs.data(), static_cast<int>(evs.size()),
                               static_cast<int>(kTick.count()));
      for (int i = 0; i < n; ++i) {
        const uint64_t key = evs[static_cast<size_t>(i)].data.u64;
        if (key == kWakeKey) {
          // Drained first: an adoption or a notification after this point wakes us again. (The
          // other way round, an adoption between take_incoming() and the drain lost its
          // wake-up, and its stream waited forever: seen under CPU contention.)
          ready_->drain();
          take_incoming();
          ready_->take(ids);
          for (uint64_t id : ids)
            if (Entry* e = find(id)) service(*e);
          ids.clear();
          continue;
        }
        Entry* e = find(key);
        if (!e) continue;
        const uint32_t what = evs[static_cast<size_t>(i)].events;
        if (what & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) {
          fail(*e);  // the client went away
        } else if (what & EPOLLOUT) {
          service(*e);
        }
      }
      const Clock::time_point now = Clock::now();
      if (now >= next_tick) {
        take_incoming();  // also every tick, whatever happened to the wake-ups
        std::vector<uint64_t> all;
        for (auto& [id, e] : entries_) all.push_back(id);
        for (uint64_t id : all) {
          Entry* e = find(id);
          if (!e) continue;
          if (!e->pending.empty() && now >= e->stall_deadline) {
            fail(*e);  // the client stopped reading
          } else {
            service(*e);
          }
        }
        next_tick = now + kTick;
      }
    }
    // Stopped: what is left (and anything adopted until the last moment) is cancelled.
    take_incoming();
    std::vector<uint64_t> all;
    for (auto& [id, e] : entries_) all.push_back(id);
    for (uint64_t id : all)
      if (Entry* e = find(id)) fail(*e);
  }

  Entry* find(uint64_t id) {
    auto it = entries_.find(id);
    return it == entries_.end() ? nullptr : it->second.get();
  }

  void take_incoming() {
    std::vector<std::unique_ptr<Entry>> in;
    {
      std::lock_guard<std::mutex> g(incoming_mu_);
      in.swap(incoming_);
    }
    for (auto& e : in) {
      epoll_event ev{};
      ev.events = EPOLLRDHUP;
      ev.data.u64 = e->id;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, e->fd, &ev);
      e->stall_deadline = Clock::now() + write_timeout_;
      const uint64_t id = e->id;
      entries_.emplace(id, std::move(e));
      service(*find(id));
    }
  }

  // Writes what is pending, then takes from the body whatever it has ready, until the body has
  // nothing more now, the socket is full, or the body ended.
  void service(Entry& e) {
    if (!flush(e)) return;
    while (e.pending.empty() && !e.body_done) {
      std::string piece;
      bool more;
      try {
        more = e.body->next(piece, std::chrono::milliseconds(0));
      } catch (const std::exception& ex) {
        log_error("streamed response: {}", ex.what());
        fail(e);
        return;
      }
      if (e.chunked) {
        append_chunk(e.pending, piece);
        if (!more) e.pending += kLastChunk;
      } else {
        e.pending += piece;
      }
      if (!more) e.body_done = true;
      if (!flush(e)) return;
      if (piece.empty()) break;
    }
    if (e.body_done && e.pending.empty()) finish(e, true);
  }

  // False if the stream failed (and is gone).
  bool flush(Entry& e) {
    size_t off = 0;
    while (off < e.pending.size()) {
      const ssize_t k =
          ::send(e.fd, e.pending.data() + off, e.pending.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        off += static_cast<size_t>(k);
        e.stall_deadline = Clock::now() + write_timeout_;
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      fail(e);
      return false;
    }
    e.pending.erase(0, off);
    const bool want_out = !e.pending.empty();
    if (want_out != e.watching_out) {
      epoll_event ev{};
      ev.events = EPOLLRDHUP | (want_out ? EPOLLOUT : 0u);
      ev.data.u64 = e.id;
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, e.fd, &ev);
      e.watching_out = want_out;
    }
    return true;
  }

  void fail(Entry& e) {
    e.body->cancel();
    finish(e, false);
  }

  void finish(Entry& e, bool sent_all) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, e.fd, nullptr);
    e.body->set_ready_callback({});
    Done done = std::move(e.done);
    entries_.erase(e.id);  // e is gone from here on
    done(sent_all);
  }

  std::chrono::milliseconds write_timeout_;
  std::shared_ptr<ReadyQueue> ready_;
  int epoll_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::mutex incoming_mu_;
  std::vector<std::unique_ptr<Entry>> incoming_;
  std::unordered_map<uint64_t, std::unique_ptr<Entry>> entries_;  // the thread's
};

StreamPump::StreamPump(int threads, std::chrono::milliseconds write_timeout) {
  for (int i = 0; i < std::max(threads, 1); ++i)
    shards_.push_back(std::make_unique<Shard>(i, write_timeout));
}

StreamPump::~StreamPump() {
  stop();
}

bool StreamPump::adopt(int fd, std::string head, std::shared_ptr<BodyStream> body, bool chunked,
                       Done done) {
  if (!body->set_ready_callback({})) return false;  // the body cannot notify
  const uint64_t id = next_.fetch_add(1) + 1;
  shards_[id % shards_.size()]->adopt(id, fd, std::move(head), std::move(body), chunked,
                                      std::move(done));
  return true;
}

void StreamPump::stop() {
  for (auto& s : shards_) s->stop();
}

}  // namespace tandem::server
