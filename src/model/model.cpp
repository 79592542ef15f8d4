#include "model/model.h"

#include <algorithm>
#include <filesystem>

#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "model/checkpoint.h"
#include "model/decoder_layer.h"
#include "model/dummy_weights.h"
#include "model/fused_projections.h"
#include "ops/ops.h"

namespace tandem {

Model::Model(ModelConfig config, ModelWeights weights, Device device, ShardSpec shard)
    : config_(std::move(config)), weights_(std::move(weights)), device_(device), shard_(shard) {
  fuse_projections(weights_);
}

namespace {

// Free device memory, to report what the weights take on a GPU (0 on the CPU).
size_t free_bytes(Device d) {
  if (d.is_cpu()) return 0;
  size_t free = 0, total = 0;
  device_interface(d.type).memory_info(d, &free, &total);
  return free;
}

void report_weight_bytes(const ModelConfig& c, Device d, size_t free_before, const char* what) {
  if (d.is_cpu()) return;
  const size_t free_after = free_bytes(d);
  const double gib =
      static_cast<double>(free_before - std::min(free_before, free_after)) / 1073741824.0;
  log_info("{} weights on the device: {:.2f} GiB ({})", what, gib,
           c.quant.method.empty() ? std::string("dense")
                                  : c.quant.method + (c.quant.online ? ", quantized at load" : ""));
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& dir, const LoadOptions& o) {
  ModelConfig c = ModelConfig::from_file((std::filesystem::path(dir) / "config.json").string());
  c.quant = apply_online_quant(c.quant, o.online_quant, dir);
  Checkpoint ck = Checkpoint::open(dir);
  const size_t free_before = free_bytes(o.device);
  ModelWeights w = load_weights(ck, c, o);
  report_weight_bytes(c, o.device, free_before, "checkpoint");
  return std::make_unique<Model>(std::move(c), std::move(w), o.device, o.shard);
}

std::unique_ptr<Model> Model::dummy(const ModelConfig& c, const LoadOptions& o, uint64_t seed) {
  const size_t free_before = free_bytes(o.device);
  ModelWeights w = dummy_weights(c, o, seed);
  report_weight_bytes(c, o.device, free_before, "dummy");
  return std::make_unique<Model>(c, std::move(w), o.device, o.shard);
}

LayerContext Model::context(const ForwardBatch& batch, KvCache& cache, Workspace& ws) const {
  TD_CHECK(!shard_.sharded() || comm_, "a sharded model needs its collectives before a forward");
  // The collectives run whenever they are set, even over one rank: the GPU suite checks the NCCL
  // path inside CUDA graphs that way on one device.
  return {config_, weights_, batch, cache, ws, &shard_, comm_};
}

Tensor Model::embed(Workspace& ws, const Tensor& ids) const {
  // Vocab-parallel: each rank looks up the ids in its slice (zero rows elsewhere), the sum over
  // ranks is the full lookup (one non-zero term per row, so exact).
  Tensor e = ops::embedding(ws, ids, weights_.embed, vocab_span(config_, shard_).begin,
                            shard_.sharded());  // [T, D]
  if (comm_) comm_->all_reduce_sum(e);
  return e;
}

Tensor Model::logits_for(Workspace& ws, const ForwardBatch& batch, const Tensor& normed,
                         const Weight* head) const {
  const Tensor rows =
      batch.logit_rows.defined() ? ops::gather_rows(ws, normed, batch.logit_rows) : normed;
  if (head) return ops::linear(ws, rows, *head, DType::F32);  // [R, K], fp32, whole on each rank
  Tensor local = ops::linear(ws, rows, weights_.lm_head, DType::F32);  // [R, V / tp], fp32
  if (!comm_) return local;
  // Every rank gets the whole row, so greedy argmax and seeded sampling pick the same token as
  // the unsharded head.
  Tensor all = ws.alloc({local.size(0), config_.vocab_size}, DType::F32);  // [R, V]
  comm_->all_gather_cols(ws, local, all);
  return all;
}

ForwardResult Model::forward(Workspace& ws, const ForwardBatch& batch, KvCache& cache) const {
  const LayerContext ctx = context(batch, cache, ws);
  // [T, D] residual stream, updated in place by every layer.
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const int64_t L = config_.num_hidden_layers;
  Tensor h = embed(ws, batch.input_ids);
  // [T, D] the next layer's normed input; each layer leaves it for the next (its last residual
  // add fused with that norm), the last one leaves the final norm: the LM-head input.
  Tensor a = ops::rms_norm(ws, h, L > 0 ? weights_.layers[0].input_norm : weights_.final_norm, eps);
  Tensor topk;        // [T, K]: the last full indexer's selection, reused by shared layers
  Tensor topk_carry;  // [T, index_topk] i32: where that selection outlives its layer
  if (config_.has_indexer)
    topk_carry = ws.alloc({batch.input_ids.size(0), config_.index_topk}, DType::I32);
  for (int64_t l = 0; l < L; ++l) {
    const bool full = !config_.has_indexer || config_.indexer_full[static_cast<size_t>(l)];
    const Tensor& next_norm =
        l + 1 < L ? weights_.layers[static_cast<size_t>(l + 1)].input_norm : weights_.final_norm;
    const size_t mark = ws.mark();
    decoder_layer(ctx, weights_.layers[static_cast<size_t>(l)], l, full, h, a, next_norm, topk);
    // Only h and a (in place, below the mark) and the top-k selection leave the layer; the arena
    // takes back the rest, so activations do not grow with the number of layers.
    if (topk.defined() && topk.raw() != topk_carry.raw()) {
      ops::copy(topk, topk_carry);
      topk = topk_carry;
    }
    ws.release(mark);
  }
  ForwardResult r;
  r.hidden = a;  // [T, D] final_norm(h)
  r.logits = logits_for(ws, batch, r.hidden);
  r.topk = topk;
  return r;
}

ForwardResult Model::forward_mtp(Workspace& ws, const ForwardBatch& batch, const Tensor& hidden,
                                 KvCache& cache, const Tensor& reuse_topk,
                                 const Weight* head) const {
  TD_CHECK(weights_.mtp.has_value(), "this model has no MTP layer loaded");
  const MtpWeights& m = *weights_.mtp;
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const LayerContext ctx = context(batch, cache, ws);
  // u = eh_proj([enorm(embed(x_{i+1})) ; hnorm(h_i)]): embedding first, hidden second.
  // Both norms write their half of the eh_proj input directly (no concatenation pass).
  const int64_t T = batch.input_ids.size(0), D = config_.hidden_size;
  Tensor eg = ws.alloc({T, 2 * D}, hidden.dtype());  // [T, 2D]
  Tensor e = eg.narrow(1, 0, D), g = eg.narrow(1, D, D);
  ops::rms_norm(embed(ws, batch.input_ids), m.enorm, eps, e);
  ops::rms_norm(hidden, m.hnorm, eps, g);
  Tensor h = ops::linear(ws, eg, m.eh_proj);                 // [T, D]
  Tensor a = ops::rms_norm(ws, h, m.layer.input_norm, eps);  // [T, D]
  Tensor topk = reuse_topk;
  decoder_layer(ctx, m.layer, config_.mtp_layer_index(), /*run_indexer=*/!reuse_topk.defined(), h,
                a, m.shared_head_norm, topk);
  ForwardResult r;
  r.hidden = a;  // [T, D] shared_head_norm(h)
  r.logits = logits_for(ws, batch, r.hidden, head);
  r.topk = topk;
  return r;
}

}  // namespace tandem
