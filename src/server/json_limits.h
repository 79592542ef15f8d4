// Limits on untrusted JSON in request bodies. Header-only and dependency-free. The chat template
// library bounds its own conversions with an equal constant of its own
// (kChatTemplateMaxJsonDepth in chat_template/chat_template.h), so it never depends on the
// server; tests/server/request_limits_test.cpp checks both messages name 128.
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
