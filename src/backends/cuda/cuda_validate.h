// Argument checks of the CUDA backend's ops (host-only, g++): each throws tandem::Error naming
// the op and the tensor ("cuda rms_norm: w must be f32, got ..."). The single checks come first,
// then the groups that several ops share, each checking in the order the ops always did (so the
// first failing check, and its message, is the same).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "backends/cuda/kernels.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/backend.h"

namespace tandem::cuda::check {

// The kernels' element type of a bf16 or f32 tensor.
inline k::DT kdt(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() == DType::BF16) return k::DT::BF16;
  if (t.dtype() == DType::F32) return k::DT::F32;
  fail("cuda {}: {} must be bf16 or f32, got {}", op, what, t.str());
}

inline void need_dtype(const Tensor& t, DType d, const char* op, const char* what) {
  if (t.dtype() != d) fail("cuda {}: {} must be {}, got {}", op, what, dtype_name(d), t.str());
}

inline void need_cuda(const Tensor& t, const char* op, const char* what) {
  if (!t.device().is_cuda()) fail("cuda {}: {} must be on the GPU, got {}", op, what, t.str());
}

inline void need_contiguous(const Tensor& t, const char* op, const char* what) {
  if (!t.is_contiguous()) fail("cuda {}: {} must be contiguous, got {}", op, what, t.str());
}

inline void need_unit_last(const Tensor& t, const char* op, const char* what) {
  if (t.stride(-1) != 1)
    fail("cuda {}: {} must have unit stride in its last dim, got {}", op, what, t.str());
}

inline bool aligned16(const Tensor& t) {
  return (reinterpret_cast<uintptr_t>(t.raw()) & 15) == 0;
}

// 16-byte vector access: the base aligned and every listed stride a multiple of 8 elements.
inline void need_vec(const Tensor& t, std::initializer_list<int64_t> strides, const char* op,
                     const char* what) {
  bool ok = aligned16(t);
  for (int64_t s : strides) ok = ok && s % 8 == 0;
  if (!ok)
    fail(
        "cuda {}: {} needs 16-byte aligned rows (base and strides multiples of 8 elements), got {}",
        op, what, t.str());
}

// ---- groups shared by several ops ------------------------------------------------------------

// Every tensor in ts contiguous, one message for all of them ("every operand", ...).
inline void need_all_contiguous(std::initializer_list<const Tensor*> ts, const char* op,
                                const char* what) {
  for (const Tensor* t : ts) need_contiguous(*t, op, what);
}

// Norm weights and biases: f32 and contiguous (the loader keeps them in f32).
inline void need_f32_param(const Tensor& t, const char* op, const char* what) {
  need_dtype(t, DType::F32, op, what);
  need_contiguous(t, op, what);
}

// A device-read index tensor (slot mapping): contiguous and on the GPU.
inline void need_device_index(const Tensor& t, const char* op, const char* what) {
  need_contiguous(t, op, what);
  need_cuda(t, op, what);
}

// The element size of a row-copy op's rows (the kernels copy 2- or 4-byte elements).
inline int64_t copy_elem_bytes(const Tensor& t, const char* op, const char* what) {
  const int64_t es = dtype_size(t.dtype());
  TD_CHECK(es == 2 || es == 4, "cuda {}: 2- or 4-byte {} only, got {}", op, what, t.str());
  return es;
}

// The optional top-k positions of the attention ops: i32, contiguous; pointer and width (null
// and 0 when undefined: dense attention).
inline void optional_topk(const Tensor& topk, const char* op, const int32_t** ptr, int64_t* k) {
  if (!topk.defined()) return;
  need_dtype(topk, DType::I32, op, "topk");
  need_contiguous(topk, op, "topk");
  *ptr = topk.data<int32_t>();
  *k = topk.size(1);
}

// The paged-cache part of AttentionMeta as device pointers; its tensors defined, on the GPU,
// i32 and contiguous.
inline k::PagedMeta paged(const AttentionMeta& m, const char* op) {
  for (const Tensor* t : {&m.token_seq, &m.token_pos, &m.page_table, &m.seq_lens}) {
    TD_CHECK(t->defined(), "cuda {}: attention metadata is incomplete", op);
    need_cuda(*t, op, "attention metadata");
    need_dtype(*t, DType::I32, op, "attention metadata");
    need_contiguous(*t, op, "attention metadata");
  }
  k::PagedMeta p;
  p.token_seq = m.token_seq.data<int32_t>();
  p.token_pos = m.token_pos.data<int32_t>();
  p.page_table = m.page_table.data<int32_t>();
  p.seq_lens = m.seq_lens.data<int32_t>();
  p.max_pages = m.page_table.size(1);
  p.page_size = static_cast<int32_t>(m.page_size);
  p.num_seqs = static_cast<int32_t>(m.num_seqs());
  return p;
}

inline int64_t round_up(int64_t a, int64_t b) {
  return (a + b - 1) / b * b;
}

}  // namespace tandem::cuda::check
