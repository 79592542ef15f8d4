// The sizes an engine's model runner is built with: draft steps per round, KV pages, and the
// longest request. Under tensor parallelism every rank must build the same ones (their KV caches
// mirror each other page for page), so the ranks agree on the smallest page count any of them
// can hold.
#pragma once

#include <cstdint>

#include "distributed/process_group.h"
#include "model/config.h"
#include "runtime/engine_options.h"

namespace tandem {

struct EngineGeometry {
  int64_t draft_steps = 0;  // the deepest round, S or the adaptive maximum (0: plain decoding)
  int64_t num_pages = 0;
  int64_t context_length = 0;  // longest prompt + output
};

// group: the ranks to agree with (null: this process alone).
EngineGeometry engine_geometry(const EngineOptions& o, const ModelConfig& c, ProcessGroup* group);

}  // namespace tandem
