// A loaded GLM-5 / DeepSeek-V3(.2) model: the main decoder stack and its MTP (NextN) layer,
// written once against the ops interface so it runs on any backend.
#pragma once

#include <memory>
#include <string>

#include "model/config.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/layer_context.h"
#include "model/loader.h"
#include "model/shard.h"
#include "model/weights.h"
#include "ops/collectives.h"
#include "ops/workspace.h"

namespace tandem {

class Model {
 public:
  // Merges the attention projections that share an input (fused_projections.h).
  // shard: which share of the checkpoint the weights are (model/shard.h).
  Model(ModelConfig config, ModelWeights weights, Device device, ShardSpec shard = {});

  // Reads config.json and the checkpoint in dir.
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& o);
  // Random weights of the configuration, created on o.device (no checkpoint).
  static std::unique_ptr<Model> dummy(const ModelConfig& c, const LoadOptions& o,
                                      uint64_t seed = 0);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  Device device() const { return device_; }
  bool has_mtp() const { return weights_.mtp.has_value(); }
  const ShardSpec& shard() const { return shard_; }
  // A sharded model joins its ranks' partial results through these (set before the first
  // forward; they must outlive the model's use; they run even over one rank when set). Every
  // rank runs the same forwards in the same order.
  void set_collectives(Collectives* c) { comm_ = c; }
  Collectives* collectives() const { return comm_; }

  // Main model over the batch; writes cache layers [0, L). Returns logits for batch.logit_rows
  // and the final-normed hidden states of every token.
  ForwardResult forward(Workspace& ws, const ForwardBatch& batch, KvCache& cache) const;

  // The MTP layer as a draft model. batch.input_ids hold x_{i+1}; hidden: [T, D] the LM-head
  // input at position i (the target's, or the draft's own on later draft steps). Writes cache
  // layer L. reuse_topk (may be undefined) replaces the MTP indexer's selection, for
  // index_share_for_mtp_iteration. The returned hidden is the draft's LM-head input. head, when
  // given, replaces the LM head (a [K, D] subset of its rows, unsharded: the draft's vocabulary,
  // runtime/draft_vocab.h); the logits are then [R, K], column k for the subset's k-th token.
  ForwardResult forward_mtp(Workspace& ws, const ForwardBatch& batch, const Tensor& hidden,
                            KvCache& cache, const Tensor& reuse_topk = Tensor(),
                            const Weight* head = nullptr) const;

 private:
  Tensor logits_for(Workspace& ws, const ForwardBatch& batch, const Tensor& normed,
                    const Weight* head = nullptr) const;
  Tensor embed(Workspace& ws, const Tensor& ids) const;  // [T] -> [T, D]
  LayerContext context(const ForwardBatch& batch, KvCache& cache, Workspace& ws) const;

  ModelConfig config_;
  ModelWeights weights_;
  Device device_;
  ShardSpec shard_;
  Collectives* comm_ = nullptr;
};

}  // namespace tandem
