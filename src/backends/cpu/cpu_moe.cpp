// MoE routing (sigmoid + correction bias for selection, group-limited top-k, normalisation,
// routed scaling) and the routed experts' SwiGLU MLPs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "core/thread_pool.h"

namespace tandem::cpu {

void CpuBackend::moe_route(const Tensor& logits, const Tensor& bias, const RouteParams& p,
                           Tensor& idx, Tensor& weights) {
  const int64_t T = logits.size(0), E = logits.size(1), k = p.top_k;
  const int64_t per_group = E / p.n_group;
  const float* lp = f32_ptr(logits, "moe_route");
  const float* bp = bias.defined() ? f32_ptr(bias, "moe_route") : nullptr;
  int32_t* ip = idx.data<int32_t>();
  float* wp = f32_mut(weights, "moe_route");
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<float> s(E), choice(E), gscore(p.n_group);
  std::vector<int32_t> order(E), gorder(p.n_group);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      s[e] = 1.0f / (1.0f + std::exp(-lp[t * logits.stride(0) + e]));
      choice[e] = s[e] + (bp ? bp[e] : 0.0f);  // the bias steers selection only
    }
    if (p.n_group > 1) {
      // A group scores the sum of its two best experts; keep the topk_group best groups.
      for (int64_t g = 0; g < p.n_group; ++g) {
        float a = kNegInf, b = kNegInf;
        for (int64_t e = g * per_group; e < (g + 1) * per_group; ++e) {
          if (choice[e] > a)
            b = a, a = choice[e];
          else if (choice[e] > b)
            b = choice[e];
        }
        gscore[g] = a + b;
      }
      std::iota(gorder.begin(), gorder.end(), 0);
      std::stable_sort(gorder.begin(), gorder.end(),
                       [&](int32_t a, int32_t b) { return gscore[a] > gscore[b]; });
      for (int64_t r = p.topk_group; r < p.n_group; ++r)
        for (int64_t e = gorder[r] * per_group; e < (gorder[r] + 1) * per_group; ++e)
          choice[e] = kNegInf;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
    });
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += s[order[j]];
    // transformers adds 1e-20 to the denominator; it only matters for all-zero scores.
    const float norm = p.normalize ? 1.0f / (sum + 1e-20f) : 1.0f;
    for (int64_t j = 0; j < k; ++j) {
      ip[t * k + j] = order[j];
      wp[t * k + j] = s[order[j]] * norm * p.scaling;
    }
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                             const Tensor& idx, const Tensor& weights, Tensor& out) {
  const int64_t T = x.size(0), D = x.size(1), I = down.size(2), k = idx.size(1),
                E = gate_up.size(0);
  TD_CHECK(gate_up.is_contiguous() && down.is_contiguous(),
           "moe_experts: weights must be contiguous");
  const float* xp = f32_ptr(x, "moe_experts");
  const float* gu = f32_ptr(gate_up, "moe_experts");
  const float* dn = f32_ptr(down, "moe_experts");
  const int32_t* ip = idx.data<int32_t>();
  const float* wp = f32_ptr(weights, "moe_experts");
  float* o = f32_mut(out, "moe_experts");
  for (int64_t i = 0; i < T * k; ++i)
    TD_CHECK(ip[i] >= 0 && ip[i] < E, "moe_experts: expert {} outside [0, {})", ip[i], E);
  // Phase 1: h[t, j] = silu(gate x) * (up x) for every (token, chosen expert), split over rows.
  std::vector<float> h(static_cast<size_t>(T * k * I));
  parallel_for(T * k * I, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t tj = r / I, i = r % I, t = tj / k;
      const float* w = gu + static_cast<int64_t>(ip[tj]) * 2 * I * D;
      const float* xr = xp + t * x.stride(0);
      h[r] = silu(dot(xr, w + i * D, D)) * dot(xr, w + (I + i) * D, D);
    }
  });
  // Phase 2: out[t, d] = sum_j weight[t, j] * down_e[d] . h[t, j], in expert-slot order.
  parallel_for(T * D, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t t = r / D, d = r % D;
      float acc = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float* w = dn + static_cast<int64_t>(ip[t * k + j]) * D * I + d * I;
        acc += wp[t * k + j] * dot(w, h.data() + (t * k + j) * I, I);
      }
      o[t * D + d] = acc;
    }
  });
}

}  // namespace tandem::cpu
