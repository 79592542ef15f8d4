// MLA attention over the paged cache: the absorbed 576-dim MQA form (decode, verify, sparse)
// and the naive MHA form over expanded keys (prefill).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "core/thread_pool.h"
#include "ops/kv_fp8.h"

namespace tandem::cpu {

namespace {

// The key positions query t attends to, ascending: 0..pos (dense) or its top-k entries.
void visible_positions(const int32_t* topk, int64_t K, int64_t pos, std::vector<int32_t>& out) {
  out.clear();
  if (!topk) {
    for (int64_t j = 0; j <= pos; ++j) out.push_back(static_cast<int32_t>(j));
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    if (topk[k] >= 0 && topk[k] <= pos) out.push_back(topk[k]);
  std::sort(out.begin(), out.end());
}

// In place: scores -> softmax probabilities (max-subtracted, fp32).
void softmax(std::vector<float>& s) {
  float mx = -std::numeric_limits<float>::infinity();
  for (float v : s) mx = std::max(mx, v);
  float sum = 0;
  for (float& v : s) {
    v = std::exp(v - mx);
    sum += v;
  }
  const float inv = 1.0f / sum;
  for (float& v : s) v *= inv;
}

}  // namespace

void CpuBackend::mla_decode(const Tensor& q, const Tensor& pool, const AttentionMeta& meta,
                            const Tensor& topk, float scale, Tensor& out) {
  const HostMeta m(meta);
  const int64_t T = q.size(0), H = q.size(1), L = q.size(2), Lc = out.size(2);
  const float* qp = f32_ptr(q, "mla_decode");
  // FP8 rows are dequantized (exactly) into a per-thread buffer of the visible keys; the math
  // after that is the f32 path's.
  const bool fp8 = pool.dtype() == DType::F8_E4M3;
  const float* kv = fp8 ? nullptr : f32_ptr(pool, "mla_decode");
  const uint8_t* kv8 = fp8 ? pool.data<uint8_t>() : nullptr;
  const int64_t RB = pool.size(1);
  float* o = f32_mut(out, "mla_decode");
  const int32_t* tk = topk.defined() ? topk.data<int32_t>() : nullptr;
  const int64_t K = topk.defined() ? topk.size(1) : 0;
  parallel_for(T * H, [&](int64_t b, int64_t e) {
    std::vector<int32_t> keys;
    std::vector<float> s, rows;  // rows: [keys, L] dequantized (FP8 pools)
    for (int64_t th = b; th < e; ++th) {
      const int64_t t = th / H, h = th % H, seq = m.token_seq[t];
      visible_positions(tk ? tk + t * K : nullptr, K, m.token_pos[t], keys);
      if (fp8) {
        rows.resize(keys.size() * L);
        for (size_t j = 0; j < keys.size(); ++j)
          kv_fp8::dequantize_latent_row(kv8 + m.slot(seq, keys[j]) * RB, Lc, L - Lc,
                                        rows.data() + j * L);
      }
      const auto key = [&](size_t j) {
        return fp8 ? rows.data() + j * L : kv + m.slot(seq, keys[j]) * L;
      };
      const float* qv = qp + t * q.stride(0) + h * q.stride(1);
      s.resize(keys.size());
      for (size_t j = 0; j < keys.size(); ++j) s[j] = dot(qv, key(j), L) * scale;
      softmax(s);
      float* ov = o + (t * H + h) * Lc;
      std::fill(ov, ov + Lc, 0.0f);
      for (size_t j = 0; j < keys.size(); ++j) axpy(s[j], key(j), ov, Lc);
    }
  });
}

void CpuBackend::mla_prefill(const Tensor& q, const Tensor& kv, const Tensor& k_pe,
                             const AttentionMeta& meta, const Tensor& topk, float scale,
                             Tensor& out) {
  const HostMeta m(meta);
  const int64_t T = q.size(0), H = q.size(1), dqk = q.size(2), dr = k_pe.size(1), dn = dqk - dr;
  const int64_t dv = out.size(2);
  const float* qp = f32_ptr(q, "mla_prefill");
  const float* kvp = f32_ptr(kv, "mla_prefill");
  const float* pe = f32_ptr(k_pe, "mla_prefill");
  float* o = f32_mut(out, "mla_prefill");
  TD_CHECK(kv.is_contiguous(), "mla_prefill: kv must be contiguous");
  const int64_t pe_stride = k_pe.stride(0);
  // Row of position 0 of each sequence in kv (kv_gather order).
  std::vector<int64_t> start(m.num_seqs + 1, 0);
  for (int64_t b = 0; b < m.num_seqs; ++b) start[b + 1] = start[b] + m.seq_lens[b];
  TD_CHECK(start[m.num_seqs] == kv.size(0), "mla_prefill: kv has {} rows, seq_lens sum to {}",
           kv.size(0), start[m.num_seqs]);
  const int32_t* tk = topk.defined() ? topk.data<int32_t>() : nullptr;
  const int64_t K = topk.defined() ? topk.size(1) : 0;
  const int64_t row_stride = H * (dn + dv);
  parallel_for(T * H, [&](int64_t b, int64_t e) {
    std::vector<int32_t> keys;
    std::vector<float> s;
    for (int64_t th = b; th < e; ++th) {
      const int64_t t = th / H, h = th % H, seq = m.token_seq[t];
      visible_positions(tk ? tk + t * K : nullptr, K, m.token_pos[t], keys);
      const float* qv = qp + t * q.stride(0) + h * q.stride(1);
      s.resize(keys.size());
      for (size_t j = 0; j < keys.size(); ++j) {
        const int64_t r = start[seq] + keys[j];
        s[j] = (dot(qv, kvp + r * row_stride + h * (dn + dv), dn) +
                dot(qv + dn, pe + r * pe_stride, dr)) *
               scale;
      }
      softmax(s);
      float* ov = o + (t * H + h) * dv;
      std::fill(ov, ov + dv, 0.0f);
      for (size_t j = 0; j < keys.size(); ++j) {
        const int64_t r = start[seq] + keys[j];
        axpy(s[j], kvp + r * row_stride + h * (dn + dv) + dn, ov, dv);
      }
    }
  });
}

}  // namespace tandem::cpu
