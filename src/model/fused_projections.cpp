#include "model/fused_projections.h"

#include <vector>

namespace tandem {

namespace {

// One weight whose rows are the parts' rows in order; each part becomes a view of its rows.
// Returns an undefined weight (and leaves the parts alone) unless every part is a dense weight
// with the same dtype, device and input width.
Weight stack_parts(const std::vector<Weight*>& parts) {
  const Weight& first = *parts.front();
  int64_t rows = 0;
  for (const Weight* p : parts) {
    if (!p->defined() || p->format != WeightFormat::kDense || !p->w.is_contiguous() ||
        p->w.dtype() != first.w.dtype() || p->w.device() != first.w.device() ||
        p->in_features() != first.in_features())
      return {};
    rows += p->out_features();
  }
  Tensor fused = Tensor::empty({rows, first.in_features()}, first.w.dtype(), first.w.device());
  int64_t at = 0;
  for (Weight* p : parts) {
    const int64_t n = p->out_features();
    Tensor dst = fused.narrow(0, at, n);  // [n, K], contiguous: a row range
    dst.copy_from(p->w);
    p->w = dst;
    at += n;
  }
  return Weight{fused, {}, WeightFormat::kDense};
}

}  // namespace

void fuse_attention_projections(AttentionWeights& w) {
  if (!w.q_a_proj.defined()) return;  // q_lora_rank == 0: q_proj reads the hidden state alone
  std::vector<Weight*> parts{&w.q_a_proj, &w.kv_a_proj};
  if (w.indexer) parts.push_back(&w.indexer->wk);
  w.qkv_a_proj = stack_parts(parts);
}

void fuse_projections(ModelWeights& mw) {
  for (LayerWeights& l : mw.layers) fuse_attention_projections(l.attn);
  if (mw.mtp) fuse_attention_projections(mw.mtp->layer.attn);
}

}  // namespace tandem
