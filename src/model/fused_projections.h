// Projections that read the same activation, merged into one weight at load time so a decode
// step streams them in one GEMM: one launch and one ramp-up and tail instead of three (at batch 1-4
// these small GEMVs reach only 30-60% of the copy bandwidth on their own).
#pragma once

#include "model/weights.h"

namespace tandem {

// Builds w.qkv_a_proj = [q_a | kv_a | indexer wk], the three projections of the normed hidden
// state, when the parts are dense weights of one dtype on one device (otherwise leaves w as it
// is). The parts become row views of the fused weight: no bytes are duplicated and code that
// uses a part alone still works.
void fuse_attention_projections(AttentionWeights& w);

// fuse_attention_projections over every layer, the MTP layer included.
void fuse_projections(ModelWeights& mw);

}  // namespace tandem
