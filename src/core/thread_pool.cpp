#include "core/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

namespace {

class ThreadPool {
 public:
  explicit ThreadPool(int n) { resize(n); }
  ~ThreadPool() { stop(); }

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  void resize(int n) {
    stop();
    stopping_ = false;
    for (int i = 0; i < n - 1; ++i) workers_.emplace_back([this, i] { loop(i + 1); });
  }

  // Runs job(worker_index) on every thread (caller is index 0) and waits.
  void run(const std::function<void(int)>& job) {
    std::unique_lock<std::mutex> lk(m_);
    // One job at a time: nested or concurrent callers run inline.
    if (busy_) {
      lk.unlock();
      for (int i = 0; i < size(); ++i) job(i);
      return;
    }
    busy_ = true;
    job_ = &job;
    pending_ = static_cast<int>(workers_.size());
    ++generation_;
    error_ = nullptr;
    cv_.notify_all();
    lk.unlock();
    std::exception_ptr mine;
    try {
      job(0);
    } catch (...) {
      mine = std::current_exception();
    }
    lk.lock();
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    busy_ = false;
    job_ = nullptr;
    std::exception_ptr err = mine ? mine : error_;
    lk.unlock();
    if (err) std::rethrow_exception(err);
  }

 private:
  void loop(int index) {
    uint64_t seen = 0;
    for (;;) {
      std::unique_lock<std::mutex> lk(m_);
      cv_.wait(lk, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      const auto* job = job_;
      lk.unlock();
      try {
        (*job)(index);
      } catch (...) {
        std::lock_guard<std::mutex> g(m_);
        if (!error_) error_ = std::current_exception();
      }
      lk.lock();
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> g(m_);
      stopping_ = true;
      cv_.notify_all();
    }
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex m_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  bool busy_ = false;
  std::exception_ptr error_;
};

int default_threads() {
  if (const char* e = std::getenv("TANDEM_NUM_THREADS")) {
    const int n = std::atoi(e);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& pool() {
  static ThreadPool p(default_threads());
  return p;
}

}  // namespace

int num_threads() {
  return pool().size();
}
void set_num_threads(int n) {
  pool().resize(std::max(1, n));
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk) {
  if (n <= 0) return;
  const int threads = num_threads();
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, min_chunk));
  const int64_t chunks = std::min<int64_t>(threads, max_chunks);
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  pool().run([&](int worker) {
    if (worker >= chunks) return;
    const int64_t begin = n * worker / chunks, end = n * (worker + 1) / chunks;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace tandem
