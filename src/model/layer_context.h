// What a decoder layer needs besides its weights: the config, the batch, the cache and a
// workspace. Built once per forward.
#pragma once

#include "model/config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/weights.h"
#include "ops/workspace.h"

namespace tandem {

struct LayerContext {
  const ModelConfig& config;
  const ModelWeights& weights;  // for the shared RoPE tables
  const ForwardBatch& batch;
  KvCache& cache;
  Workspace& ws;
};

}  // namespace tandem
