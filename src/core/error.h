// Errors: one exception type carrying a message that says what was expected and what was found.
// Load-time and request-time problems throw tandem::Error; callers at the edges (CLI, server)
// catch it and report it, so a bad checkpoint or request never crashes the process.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tandem {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Thrown for bad user input (a request or a flag), so servers can map it to HTTP 400.
class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& msg) : Error(msg) {}
};

// Thrown when a bounded queue is full, so servers can map it to HTTP 503 with Retry-After.
class Overloaded : public Error {
 public:
  explicit Overloaded(const std::string& msg) : Error(msg) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tandem

// TD_CHECK(cond, "fmt", args...): throws tandem::Error naming the failed condition and the message.
#define TD_CHECK(cond, ...)                                                                        \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      throw ::tandem::Error(fmt::format("{} ({}:{}: check '{}' failed)", fmt::format(__VA_ARGS__), \
                                        __FILE__, __LINE__, #cond));                               \
    }                                                                                              \
  } while (0)
