// Internal error types of the template engine. The public API turns them into tandem::Error
// (syntax errors, at construction) and tandem::InvalidArgument (render errors, per request).
#pragma once

#include <fmt/format.h>

#include <string>

namespace tandem::jinja {

// A failure while rendering. The line is filled in by the innermost statement that sees the
// error, so helpers deep in the value code can throw without knowing where they are.
struct RenderError {
  std::string message;
  int line = 0;
  // True for raise_exception(): the message is the template author's text, passed on verbatim.
  bool raised_by_template = false;
};

template <typename... Args>
[[noreturn]] void render_fail(fmt::format_string<Args...> f, Args&&... args) {
  throw RenderError{fmt::format(f, std::forward<Args>(args)...)};
}

}  // namespace tandem::jinja
