// The DSA lightning indexer: fp32 scores sum_h w[h] * relu(q_h . k_j) over the causal window,
// then the top-k positions (ties broken towards the earlier position), returned ascending.
#include <algorithm>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

void CpuBackend::indexer_topk(const Tensor& q, const Tensor& w, const Tensor& pool,
                              const AttentionMeta& meta, Tensor& out) {
  const HostMeta m(meta);
  const int64_t T = q.size(0), Hi = q.size(1), Di = q.size(2), K = out.size(1);
  const float* qp = f32_ptr(q, "indexer_topk");
  const float* wp = f32_ptr(w, "indexer_topk");
  const float* kp = f32_ptr(pool, "indexer_topk");
  int32_t* o = out.data<int32_t>();
  parallel_for(T, [&](int64_t b, int64_t e) {
    std::vector<float> score;
    std::vector<int32_t> order;
    for (int64_t t = b; t < e; ++t) {
      const int64_t seq = m.token_seq[t], visible = m.token_pos[t] + 1;
      int32_t* row = o + t * K;
      std::fill(row, row + K, -1);
      if (visible <= K) {  // everything visible is selected: no scores needed
        for (int64_t j = 0; j < visible; ++j) row[j] = static_cast<int32_t>(j);
        continue;
      }
      score.resize(visible);
      for (int64_t j = 0; j < visible; ++j) {
        const float* k = kp + m.slot(seq, j) * Di;
        float acc = 0;
        for (int64_t h = 0; h < Hi; ++h) {
          const float d = dot(qp + t * q.stride(0) + h * q.stride(1), k, Di);
          acc += wp[t * w.stride(0) + h] * (d > 0 ? d : 0.0f);
        }
        score[j] = acc;
      }
      order.resize(visible);
      for (int64_t j = 0; j < visible; ++j) order[j] = static_cast<int32_t>(j);
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
