// Route tables: each adds its handlers to the router. The handlers share the ServerState.
#pragma once

#include "server/http_types.h"
#include "server/server_state.h"

namespace tandem::server {

// /v1/chat/completions, /v1/completions, /v1/models, /v1/models/{id}
void add_openai_routes(Router& r, ServerState& st);
// /generate, /get_server_info, /get_model_info, /flush_cache, /health, /health_generate,
// /metrics, /version, /tokenize, /detokenize
void add_native_routes(Router& r, ServerState& st);

// The version string /version and /get_server_info report.
inline constexpr const char* kTandemVersion = "0.1.0";

}  // namespace tandem::server
