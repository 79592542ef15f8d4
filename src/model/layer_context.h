// What a decoder layer needs besides its weights: the config, the batch, the cache and a
// workspace. Built once per forward.
#pragma once

#include "model/config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/shard.h"
#include "model/weights.h"
#include "ops/collectives.h"
#include "ops/workspace.h"

namespace tandem {

// How attention runs for extend (prefill) batches. kAuto: the absorbed (MQA) form on sparse
// (DSA) layers and the naive (MHA) form on dense-attention ones (see mla_attention.cpp for
// why); the other two force one form, for benchmarks and the test that the two agree.
enum class ExtendAttention { kAuto, kNaive, kAbsorbed };

struct LayerContext {
  const ModelConfig& config;
  const ModelWeights& weights;  // for the shared RoPE tables
  const ForwardBatch& batch;
  KvCache& cache;
  Workspace& ws;
  // Tensor / expert parallelism: this rank's share and the collectives that join the shares
  // (null for an unsharded model).
  const ShardSpec* shard = nullptr;
  Collectives* comm = nullptr;
  ExtendAttention extend_attention = ExtendAttention::kAuto;

  // Row-parallel outputs are partial sums over the ranks: add them up.
  void all_reduce(Tensor& x) const {
    if (comm) comm->all_reduce_sum(x);
  }
};

}  // namespace tandem
