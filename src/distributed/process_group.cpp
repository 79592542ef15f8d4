#include "distributed/process_group.h"

#include <atomic>

namespace tandem {

namespace {
std::atomic<int64_t> g_timeout_ms{300000};
}

std::chrono::milliseconds collective_timeout() {
  return std::chrono::milliseconds(g_timeout_ms.load());
}

void set_collective_timeout(std::chrono::milliseconds t) {
  g_timeout_ms.store(t.count());
}

}  // namespace tandem
