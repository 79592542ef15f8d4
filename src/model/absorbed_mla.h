// The absorbed MLA weights (W_UK^T, W_UV) are kv_b_proj's per-head blocks, transposed where the
// absorbed form needs it. One function for the loader and for dummy weights, so every model's
// two MLA forms (docs/architecture.md) compute the same function.
#pragma once

#include <cstdint>
#include <utility>

#include "core/tensor.h"

namespace tandem {

// kv_b: [H * (dn + dv), rkv] f32 on the host (per head: dn key rows, then dv value rows).
// Returns {W_UK^T [H, rkv, dn], W_UV [H, dv, rkv]}, f32 on the host.
std::pair<Tensor, Tensor> split_kv_b(const Tensor& kv_b, int64_t H, int64_t dn, int64_t dv,
                                     int64_t rkv);

}  // namespace tandem
