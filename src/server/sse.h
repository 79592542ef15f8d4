// Server-sent events as the OpenAI and SGLang servers frame them: one "data: <json>\n\n" event
// per chunk and a final "data: [DONE]\n\n". Errors during a stream are an event carrying
// {"error": {...}} followed by [DONE].
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/json_fields.h"

namespace tandem::server {

std::string sse_event(const Json& data);
std::string sse_done();
std::string sse_error(int status, const std::string& message);

// Splits an SSE byte stream into the payloads of its data events (for tests and clients).
// Comment lines (":...") are skipped; an incomplete trailing event is left out.
std::vector<std::string> sse_data_payloads(std::string_view stream);

}  // namespace tandem::server
