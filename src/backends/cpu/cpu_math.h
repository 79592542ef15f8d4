// Small numeric helpers shared by the CPU ops.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "ops/attention_meta.h"

namespace tandem::cpu {

// Dot product with 16 independent fp32 lanes and a fixed pairwise reduction: the compiler
// vectorises it without reassociating, and the result never depends on the caller.
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += a[i + j] * b[i + j];
  for (int j = 0; i < n; ++i, ++j) acc[j] += a[i] * b[i];
  for (int s = 8; s >= 1; s >>= 1)
    for (int j = 0; j < s; ++j) acc[j] += acc[j + s];
  return acc[0];
}

// y += a * x over n elements.
inline void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

inline float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

inline const float* f32_ptr(const Tensor& t, const char* op) {
  TD_CHECK(t.dtype() == DType::F32, "cpu {}: expects f32 tensors, got {}", op, t.str());
  return t.data<float>();
}
inline float* f32_mut(Tensor& t, const char* op) {
  TD_CHECK(t.dtype() == DType::F32, "cpu {}: expects f32 tensors, got {}", op, t.str());
  return t.data<float>();
}

// Host view of the attention metadata: slot lookup and per-sequence row offsets.
struct HostMeta {
  const int32_t* token_seq;
  const int32_t* token_pos;
  const int32_t* page_table;
  const int32_t* seq_lens;
  int64_t max_pages, page_size, num_seqs;

  explicit HostMeta(const AttentionMeta& m)
      : token_seq(m.token_seq.data<int32_t>()),
        token_pos(m.token_pos.data<int32_t>()),
        page_table(m.page_table.data<int32_t>()),
        seq_lens(m.seq_lens.data<int32_t>()),
        max_pages(m.page_table.size(1)),
        page_size(m.page_size),
        num_seqs(m.num_seqs()) {
    TD_CHECK(m.page_table.is_contiguous(), "page_table must be contiguous");
  }
  int64_t slot(int64_t seq, int64_t pos) const {
    return static_cast<int64_t>(page_table[seq * max_pages + pos / page_size]) * page_size +
           pos % page_size;
  }
};

}  // namespace tandem::cpu
