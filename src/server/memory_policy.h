// How the server gives memory back to the system (docs/server.md, "Memory").
//
// glibc malloc keeps what a thread frees in that thread's arena and returns only the top of the
// main heap by itself. A large request (a 10 MB prompt, a 100k-message chat) fills an arena with
// ~100 MB of short-lived pieces; with one arena per HTTP worker thread (up to 8 per core) every
// such request left RSS higher, to ~2 GB. Two measures bring it back to the baseline:
//  - at most two arenas (M_ARENA_MAX): the free memory of one large request is reused by the
//    next instead of sitting in another thread's arena, and what malloc_trim cannot return (the
//    free top of each secondary arena, up to glibc's trim threshold) is bounded by the arena count;
//  - a trimmer thread that calls malloc_trim(0) (returns the free pages inside every arena) once
//    the resident anonymous memory has grown since its last trim: when no request is in flight,
//    or at once when it has grown a lot.
// glibc's adaptive mmap and trim thresholds are left alone: fixing them low would map and fault
// large per-step buffers (sampled logits) on every step.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::server {

// Applies the allocator settings (call before the server starts its threads); returns what it
// did, for the start-up log.
std::string configure_allocator();

// Resident anonymous memory of this process (/proc/self/statm: resident minus file-backed and
// shared pages), in bytes; -1 when it cannot be read.
int64_t resident_anon_bytes();

struct TrimPolicy {
  int64_t idle_growth_bytes = int64_t{16} << 20;   // trim when idle and grown this much
  int64_t busy_growth_bytes = int64_t{256} << 20;  // trim even with requests in flight
  std::chrono::milliseconds period{1000};          // how often the trimmer looks
};

// What growth is measured from: the resident anonymous bytes after the trimmer's last trim made
// with no request in flight, and after its last trim of either kind (each lowered to the lowest
// value seen since). An idle trim leaves the idle baseline; one made under load may still see the
// requests' memory in use, so it must not raise the baseline the next idle trim is judged by.
struct TrimReference {
  int64_t idle = -1;
  int64_t any = -1;
};

// Whether to trim now, given the resident anonymous bytes now and whether no request is in flight.
bool should_trim(const TrimPolicy& p, int64_t resident, const TrimReference& ref, bool idle);

// Returns the free pages of every malloc arena to the system (malloc_trim(0)).
void trim_heap();

// What the trimmer measures and does; tests replace them.
struct TrimHooks {
  std::function<int64_t()> resident = resident_anon_bytes;
  std::function<void()> trim = trim_heap;
};

// The trimmer thread: every period, measures, decides (should_trim) and trims. idle() says
// whether no request is in flight; it and the hooks are called from the trimmer thread.
class MemoryTrimmer {
 public:
  explicit MemoryTrimmer(std::function<bool()> idle, TrimPolicy p = {}, TrimHooks h = {});
  ~MemoryTrimmer();
  MemoryTrimmer(const MemoryTrimmer&) = delete;
  MemoryTrimmer& operator=(const MemoryTrimmer&) = delete;

  int64_t trims() const;  // malloc_trim calls so far

 private:
  void loop();

  std::function<bool()> idle_;
  TrimPolicy policy_;
  TrimHooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t trims_ = 0;
  std::thread thread_;
};

}  // namespace tandem::server
