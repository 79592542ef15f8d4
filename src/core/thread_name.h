// Names the calling thread (Linux: at most 15 characters, longer names are cut), so that `top -H`,
// /proc/<pid>/task/*/comm and debuggers show which part of the server a thread belongs to, and
// the HTTP benchmark can add up CPU time per part (scripts/http_bench.py).
#pragma once

#include <pthread.h>

#include <string>

namespace tandem {

inline void name_this_thread(const std::string& name) {
  const std::string cut = name.substr(0, 15);
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace tandem
