// Minimal leveled logging to stderr. TANDEM_LOG=debug|info|warn|error sets the threshold.
#pragma once

#include <fmt/format.h>

#include <string>

namespace tandem {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

LogLevel log_level();
void set_log_level(LogLevel l);
void log_write(LogLevel l, const std::string& msg);

template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Info)
    log_write(LogLevel::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Warn)
    log_write(LogLevel::Warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Error)
    log_write(LogLevel::Error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Debug)
    log_write(LogLevel::Debug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tandem
