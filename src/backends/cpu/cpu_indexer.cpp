// The DSA lightning indexer: fp32 scores sum_h w[h] * relu(q_h . k_j) over the causal window,
// then the top-k positions (ties broken towards the earlier position), returned ascending.
// With an FP8 key pool the scores follow the reference's fp8_index: each query head is rotated
// and quantized like the keys, score = k_s * sum_h (w[h] * q_s[h]) * relu(q8_h . k8).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "core/dtype.h"
#include "core/thread_pool.h"
#include "ops/kv_fp8.h"

namespace tandem::cpu {

namespace {

// Token t's query as the scores use it: qv [Hi, Di] and per-head weights wv [Hi]. f32 keys:
// q and w as given. FP8 keys: q8 (rotated, quantized, as floats) and w[h] * q_s[h].
void prepare_query(const float* q, int64_t qs1, const float* w, int64_t Hi, int64_t Di, bool fp8,
                   std::vector<float>& qv, std::vector<float>& wv) {
  qv.resize(Hi * Di);
  wv.assign(w, w + Hi);
  for (int64_t h = 0; h < Hi; ++h) {
    float* r = qv.data() + h * Di;
    std::copy(q + h * qs1, q + h * qs1 + Di, r);
    if (!fp8) continue;
    kv_fp8::hadamard(r, Di);
    float amax = 0;
    for (int64_t i = 0; i < Di; ++i) amax = std::max(amax, std::fabs(r[i]));
    const float s = kv_fp8::ue8m0_scale(amax);
    std::vector<uint8_t> q8(Di);
    kv_fp8::quantize(r, Di, s, q8.data());
    for (int64_t i = 0; i < Di; ++i) r[i] = fp8_e4m3_to_f32(q8[i]);
    wv[h] = w[h] * s;
  }
}

}  // namespace

void CpuBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool,
                              const AttentionMeta& meta, Tensor& out) {
  const HostMeta m(meta);
  const int64_t T = q.size(0), Hi = q.size(1), Di = q.size(2), K = out.size(1);
  const bool fp8 = pool.dtype() == DType::F8_E4M3;
  const float* qp = f32_ptr(q, "indexer_topk");
  const float* wp = f32_ptr(w, "indexer_topk");
  const float* kp = fp8 ? nullptr : f32_ptr(pool, "indexer_topk");
  const uint8_t* kp8 = fp8 ? pool.data<uint8_t>() : nullptr;
  const int64_t RB = pool.size(1);
  int32_t* o = out.data<int32_t>();
  parallel_for(T, [&](int64_t b, int64_t e) {
    std::vector<float> score, qv, wv, k8(Di);
    std::vector<int32_t> order;
    for (int64_t t = b; t < e; ++t) {
      const int64_t seq = m.token_seq[t], visible = m.token_pos[t] + 1;
      int32_t* row = o + t * K;
      std::fill(row, row + K, -1);
      if (visible <= K) {  // everything visible is selected: no scores needed
        for (int64_t j = 0; j < visible; ++j) row[j] = static_cast<int32_t>(j);
        continue;
      }
      prepare_query(qp + t * q.stride(0), q.stride(1), wp + t * w.stride(0), Hi, Di, fp8, qv, wv);
      score.resize(visible);
      for (int64_t j = 0; j < visible; ++j) {
        float k_s = 1.0f;
        const float* k = kp ? kp + m.slot(seq, j) * Di : k8.data();
        if (fp8) k_s = kv_fp8::read_index_row(kp8 + m.slot(seq, j) * RB, Di, k8.data());
        float acc = 0;
        for (int64_t h = 0; h < Hi; ++h) {
          const float d = dot(qv.data() + h * Di, k, Di);
          // FP8: products of e4m3 values are exact, so dot() rounds the same with or without
          // FMA contraction, and the head sum is an explicit fma: the CUDA kernel, doing the
          // same operations in the same order, gets these scores bit for bit.
          if (fp8)
            acc = std::fma(wv[h], d > 0 ? d : 0.0f, acc);
          else
            acc += wv[h] * (d > 0 ? d : 0.0f);
        }
        score[j] = fp8 ? k_s * acc : acc;
      }
      order.resize(visible);
      for (int64_t j = 0; j < visible; ++j) order[j] = static_cast<int32_t>(j);
      // The one tie rule (docs/kv-cache.md): a higher score wins, equal scores go to the
      // earlier position.
      auto better = [&](int32_t a, int32_t c) {
        return score[a] > score[c] || (score[a] == score[c] && a < c);
      };
      std::nth_element(order.begin(), order.begin() + (K - 1), order.end(), better);
      std::sort(order.begin(), order.begin() + K);
      std::copy(order.begin(), order.begin() + K, row);
    }
  });
}

}  // namespace tandem::cpu
