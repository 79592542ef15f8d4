// CudaBackend: mla_decode (its split plan and kernel choice), mla_prefill, indexer_topk.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_validate.h"
#include "backends/cuda/heuristics.h"
#include "backends/cuda/kernels.h"
#include "core/error.h"

namespace tandem::cuda {

using namespace check;
using k::DT;

bool CudaBackend::mla_wide(int64_t T, int64_t H, int64_t L, int64_t Lc) const {
  return heuristics::mla_wide(mla_tensor_cores_, k::mla_decode_wide_applies(H, L, Lc),
                              mla_wide_mode_, deterministic_, T);
}

MlaDecodePlan CudaBackend::plan_mla_decode(int64_t T, int64_t H, int64_t range, int64_t Lc,
                                           bool wide, bool wgmma) const {
  return heuristics::plan_mla_decode(T, H, range, Lc, wide, num_sms_, deterministic_,
                                     mla_min_split_, mla_det_split_, wgmma, mla_chain_mode_);
}

void CudaBackend::mla_decode(const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                             const Tensor& topk, float scale, Tensor& out) {
  const char* op = "mla_decode";
  need_dtype(q, DType::BF16, op, "q");
  // FP8 rows (ops/kv_fp8.h) are read by every decode kernel (SIMT, 16-head and 64-head mma):
  // each converts a row's 8-value chunks to bf16 as it stages them, exactly.
  const bool fp8 = pool.dtype() == DType::F8_E4M3;
  if (!fp8)
    need_dtype(pool, DType::BF16, op, "pool (the latent cache must be bf16 or FP8 on the GPU)");
  need_dtype(out, DType::BF16, op, "out");
  need_contiguous(pool, op, "pool");
  need_contiguous(out, op, "out");
  need_unit_last(q, op, "q");
  need_vec(q, {q.stride(0), q.stride(1), q.size(2)}, op, "q");
  if (!fp8) need_vec(pool, {pool.size(1)}, op, "pool");
  const int64_t T = q.size(0), H = q.size(1), L = q.size(2), Lc = out.size(2);
  TD_CHECK(Lc % 8 == 0 && Lc <= 512,
           "cuda mla_decode: kv_lora_rank {} must be a multiple of 8 and at most 512", Lc);
  TD_CHECK(!fp8 || reinterpret_cast<uintptr_t>(pool.raw()) % 4 == 0,
           "cuda mla_decode: FP8 pool not 4-byte aligned");
  if (T == 0) return;
  k::MlaDecodeParams p;
  p.q = q.raw(), p.q_s0 = q.stride(0), p.q_s1 = q.stride(1);
  p.pool = pool.raw();
  p.kv_fp8 = fp8, p.kv_row_bytes = pool.size(1);
  optional_topk(topk, op, &p.topk, &p.topk_k);
  p.out = out.raw();
  p.meta = paged(meta, op);
  p.T = T, p.H = H, p.L = L, p.Lc = Lc, p.scale = scale;
  p.tensor_cores = mla_tensor_cores_;
  p.wide = mla_wide(T, H, L, Lc);
  p.wgmma = mla_wgmma_;
  // The chain keeps key slots as int32 (pools of up to 2^31 rows).
  const bool wgmma =
      p.wide && p.wgmma && k::mla_decode_wgmma_applies(H, L, Lc, fp8) && pool.size(0) <= INT32_MAX;
  const MlaDecodePlan plan =
      plan_mla_decode(T, H, topk.defined() ? topk.size(1) : meta.max_seq_len, Lc, p.wide, wgmma);
  p.split_len = plan.split_len, p.num_splits = plan.num_splits;
  if (wgmma) p.column_parts = heuristics::mla_column_parts(mla_column_parts_, plan.column_parts);
  if (plan.chain) {
    p.chain = scratch(plan.scratch_bytes);
    p.chain_blocks = plan.chain_blocks;
    p.scores_per_block = plan.scores_per_block;
    p.chain_value_cols = heuristics::chain_value_cols_for(mla_chain_value_cols_, T, num_sms_);
  } else if (plan.num_splits > 1) {
    auto* s = static_cast<float*>(scratch(plan.scratch_bytes));
    p.part_o = s;
    p.part_lse = s + T * H * plan.num_splits * Lc;
  }
  k::mla_decode(p, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& k_pe,
                              const AttentionMeta& meta, const Tensor& topk, float scale,
                              Tensor& out) {
  const char* op = "mla_prefill";
  need_dtype(q, DType::BF16, op, "q");
  need_dtype(kv, DType::BF16, op, "kv");
  need_dtype(k_pe, DType::BF16, op, "k_pe");
  need_dtype(out, DType::BF16, op, "out");
  need_contiguous(kv, op, "kv");
  need_contiguous(out, op, "out");
  need_unit_last(q, op, "q");
  need_unit_last(k_pe, op, "k_pe");
  const int64_t T = q.size(0), H = q.size(1), dqk = q.size(2), dr = k_pe.size(1), dn = dqk - dr,
                dv = out.size(2);
  TD_CHECK(
      dn % 8 == 0 && dr % 8 == 0 && dv % 8 == 0 && dv <= 256 && dqk <= 512,
      "cuda mla_prefill: head dims nope {} rope {} v {} must be multiples of 8 (v at most 256)", dn,
      dr, dv);
  need_vec(q, {q.stride(0), q.stride(1)}, op, "q");
  need_vec(kv, {}, op, "kv");
  need_vec(k_pe, {k_pe.stride(0)}, op, "k_pe");
  if (T == 0) return;
  k::MlaPrefillParams p;
  p.q = q.raw(), p.q_s0 = q.stride(0), p.q_s1 = q.stride(1);
  p.kv = kv.raw();
  p.k_pe = k_pe.raw(), p.pe_rs = k_pe.stride(0);
  optional_topk(topk, op, &p.topk, &p.topk_k);
  p.out = out.raw();
  p.meta = paged(meta, op);
  p.T = T, p.H = H, p.dn = dn, p.dr = dr, p.dv = dv, p.scale = scale;
  p.tensor_cores = mla_tensor_cores_;
  k::mla_prefill(p, stream_);
  TD_CUDA_LAUNCH_CHECK();
}

void CudaBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool,
                               const AttentionMeta& meta, Tensor& out) {
  const char* op = "indexer_topk";
  need_dtype(q, DType::BF16, op, "q");
  const bool fp8 = pool.dtype() == DType::F8_E4M3;  // the reference's fp8_index scores
  if (!fp8) need_dtype(pool, DType::BF16, op, "pool (indexer keys must be bf16 or FP8 on the GPU)");
  need_dtype(out, DType::I32, op, "out");
  need_unit_last(q, op, "q");
  need_unit_last(w, op, "w");
  need_contiguous(pool, op, "pool");
  need_contiguous(out, op, "out");
  if (!fp8) need_vec(pool, {pool.size(1)}, op, "pool");
  const int64_t T = q.size(0), Di = q.size(2);
  TD_CHECK(k::indexer_supports_head_dim(Di),
           "cuda indexer_topk: index_head_dim {} not supported (16, 32, 64, 128)", Di);
  if (T == 0) return;
  k::IndexerParams p;
  p.q = q.raw(), p.q_s0 = q.stride(0), p.q_s1 = q.stride(1);
  p.w = w.data<float>(), p.w_s0 = w.stride(0);
  p.pool = pool.raw();
  p.kv_fp8 = fp8;
  p.rot_scale = 1.0f / std::sqrt(static_cast<float>(Di));  // as kv_fp8::hadamard
  p.meta = paged(meta, op);
  p.out = out.data<int32_t>();
  p.T = T, p.Hi = q.size(1), p.Di = Di, p.K = out.size(1);
  p.tensor_cores = mla_tensor_cores_;
  need_vec(q, {q.stride(0), q.stride(1)}, op, "q");
  p.max_len = std::max<int64_t>(meta.max_seq_len, 1);
  const int64_t Tc = heuristics::indexer_token_chunk(T, p.max_len);
  if (p.max_len > p.K)
    p.scores = static_cast<float*>(scratch(static_cast<size_t>(Tc * p.max_len) * sizeof(float)));
  for (int64_t t0 = 0; t0 < T; t0 += Tc) {
    k::indexer_topk(p, t0, std::min(Tc, T - t0), stream_);
    TD_CUDA_LAUNCH_CHECK();
  }
}

}  // namespace tandem::cuda
