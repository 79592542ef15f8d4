// Limits on untrusted JSON: request bodies and what the chat template engine converts from them.
// Header-only and dependency-free so the template engine can share the constant.
#pragma once

#include <cstddef>

namespace tandem::server {

// The deepest nesting a request body may have: a value inside N arrays/objects (the body's own
// object included) is at depth N. Real tool schemas nest a few dozen levels at most; anything
// deeper is refused while parsing, before recursive code (serializers, copies, the template
// engine) could overflow the stack on it.
inline constexpr int kMaxJsonDepth = 128;

// Client values quoted in error messages are cut to this many characters (then "...").
inline constexpr size_t kMaxQuotedValueChars = 100;

}  // namespace tandem::server
