#include "server/memory_policy.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "core/log.h"
#include "core/thread_name.h"

namespace tandem::server {

namespace {

// Two arenas: measured on the default model (docs/server.md, "Memory"), 2 return RSS to the
// baseline after large requests, 4 leave +8%, 8 +18%, glibc's default (8 per core) +33%.
// On a 16-core host, allocation shaped like the per-token streaming work ran at 0.85x the
// default's rate from 64 threads with 2 arenas, still about 100x what 64 streams need.
constexpr int kArenaMax = 2;

}  // namespace

std::string configure_allocator() {
#if defined(__GLIBC__)
  // TANDEM_MALLOC_ARENAS overrides the limit (0: glibc's default), for measuring the trade-off.
  int arenas = kArenaMax;
  if (const char* e = std::getenv("TANDEM_MALLOC_ARENAS"); e && *e) arenas = std::atoi(e);
  if (arenas > 0 && mallopt(M_ARENA_MAX, arenas) != 1)
    return "glibc malloc, arena limit not applied";
  return fmt::format(
      "glibc malloc, {}; free memory returned to the system (malloc_trim) when resident memory "
      "has grown {} MiB and no request is in flight, or {} MiB",
      arenas > 0 ? fmt::format("at most {} arenas", arenas) : std::string("default arenas"),
      TrimPolicy{}.idle_growth_bytes >> 20, TrimPolicy{}.busy_growth_bytes >> 20);
#else
  return "not glibc malloc: allocator left as it is";
#endif
}

int64_t resident_anon_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long long size = 0, resident = 0, shared = 0;
  const int n = std::fscanf(f, "%lld %lld %lld", &size, &resident, &shared);
  std::fclose(f);
  if (n != 3) return -1;
  return (resident - shared) * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

bool should_trim(const TrimPolicy& p, int64_t resident, const TrimReference& ref, bool idle) {
  if (resident < 0 || ref.idle < 0 || ref.any < 0) return false;
  return (idle && resident - ref.idle >= p.idle_growth_bytes) ||
         resident - ref.any >= p.busy_growth_bytes;
}

void trim_heap() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

MemoryTrimmer::MemoryTrimmer(std::function<bool()> idle, TrimPolicy p, TrimHooks h)
    : idle_(std::move(idle)), policy_(p), hooks_(std::move(h)), thread_([this] {
        name_this_thread("mem-trimmer");
        loop();
      }) {}

MemoryTrimmer::~MemoryTrimmer() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t MemoryTrimmer::trims() const {
  std::lock_guard<std::mutex> lk(mu_);
  return trims_;
}

void MemoryTrimmer::loop() {
  TrimReference ref;
  ref.idle = ref.any = hooks_.resident();
  std::unique_lock<std::mutex> lk(mu_);
  while (!cv_.wait_for(lk, policy_.period, [this] { return stop_; })) {
    lk.unlock();
    const int64_t now = hooks_.resident();
    // Memory the process gave back by itself lowers the references.
    ref.idle = std::min(ref.idle, now);
    ref.any = std::min(ref.any, now);
    const bool idle = idle_();
    bool trimmed = false;
    if (should_trim(policy_, now, ref, idle)) {
      const auto t0 = std::chrono::steady_clock::now();
      hooks_.trim();
      const int64_t after = hooks_.resident();
      log_debug("memory: malloc_trim{}: resident anonymous {} -> {} MiB in {} ms",
                idle ? "" : " (requests in flight)", now >> 20, after >> 20,
                std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - t0)
                    .count());
      // What a trim could not return is in use: the new reference, so a server that really needs
      // more memory is not trimmed every period.
      ref.any = after;
      if (idle) ref.idle = after;
      trimmed = true;
    }
    lk.lock();
    if (trimmed) ++trims_;
  }
}

}  // namespace tandem::server
