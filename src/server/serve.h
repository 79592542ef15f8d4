// `tandem serve`: listens at once (so /health answers 503 while the model loads), loads the
// model, tokenizer and chat template, starts the engine, and serves until SIGINT/SIGTERM.
#pragma once

#include "server/server_args.h"

namespace tandem::server {

// Returns the process exit code. Throws tandem::Error for bad flags or an unloadable model.
int run_server(const ServerArgs& args, bool cuda_available);

}  // namespace tandem::server
