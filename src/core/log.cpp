#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tandem {

namespace {
LogLevel initial_level() {
  const char* e = std::getenv("TANDEM_LOG");
  if (!e) return LogLevel::Info;
  if (!std::strcmp(e, "debug")) return LogLevel::Debug;
  if (!std::strcmp(e, "warn")) return LogLevel::Warn;
  if (!std::strcmp(e, "error")) return LogLevel::Error;
  return LogLevel::Info;
}
LogLevel g_level = initial_level();
std::mutex g_mu;
}  // namespace

LogLevel log_level() {
  return g_level;
}
void set_log_level(LogLevel l) {
  g_level = l;
}

void log_write(LogLevel l, const std::string& msg) {
  static const char* names[] = {"debug", "info", "warn", "error"};
  using namespace std::chrono;
  const double t = duration<double>(system_clock::now().time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(t);
  struct tm tmv;
  gmtime_r(&secs, &tmv);
  char ts[32];
  std::strftime(ts, sizeof ts, "%H:%M:%S", &tmv);
  std::lock_guard<std::mutex> g(g_mu);
  std::fprintf(stderr, "[%s.%03d %s] %s\n", ts, static_cast<int>((t - secs) * 1000),
               names[static_cast<int>(l)], msg.c_str());
}

}  // namespace tandem
