// MoE routing (sigmoid + correction bias for selection, group-limited top-k, normalisation,
// routed scaling) and the routed experts' SwiGLU MLPs.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/cpu_quant.h"
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
      const int32_t e = order[j];
      ip[t * k + j] = p.local_count < 0 ? e
                      : e >= p.local_first && e < p.local_first + p.local_count
                          ? static_cast<int32_t>(e - p.local_first)
                          : -1;
      wp[t * k + j] = s[order[j]] * norm * p.scaling;
    }
  }
}

void CpuBackend::moe_experts(const Tensor& x, const Weight& gate_up, const Weight& down,
                             const Tensor& idx, const Tensor& weights, Tensor& out) {
  const int64_t E = gate_up.experts(), k = idx.size(1);
  const int32_t* ip = idx.data<int32_t>();
  for (int64_t i = 0; i < x.size(0) * k; ++i)
    TD_CHECK(ip[i] >= -1 && ip[i] < E,
             "moe_experts: expert {} outside [0, {}) (-1: another rank's)", ip[i], E);
  if (gate_up.quantized() || down.quantized())
    return moe_experts_quantized(x, gate_up, down, idx, weights, out);
  const int64_t T = x.size(0), D = x.size(1), I = down.in_features();
  TD_CHECK(gate_up.w.is_contiguous() && down.w.is_contiguous(),
           "moe_experts: weights must be contiguous");
  const float* xp = f32_ptr(x, "moe_experts");
  const float* gu = f32_ptr(gate_up.w, "moe_experts");
  const float* dn = f32_ptr(down.w, "moe_experts");
  const float* wp = f32_ptr(weights, "moe_experts");
  float* o = f32_mut(out, "moe_experts");
  // Phase 1: h[t, j] = silu(gate x) * (up x) for every (token, chosen expert), split over rows.
  std::vector<float> h(static_cast<size_t>(T * k * I));
  parallel_for(T * k * I, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t tj = r / I, i = r % I, t = tj / k;
      if (ip[tj] < 0) continue;  // another rank's expert
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
        if (ip[t * k + j] < 0) continue;
        const float* w = dn + static_cast<int64_t>(ip[t * k + j]) * D * I + d * I;
        acc += wp[t * k + j] * dot(w, h.data() + (t * k + j) * I, I);
      }
      o[t * D + d] = acc;
    }
  });
}

// Quantized experts, grouped by expert so each weight row is decoded once per call: every
// (token, slot) pair's input is quantized by the weight's rule (x for gate|up, h for down).
void CpuBackend::moe_experts_quantized(const Tensor& x, const Weight& gate_up, const Weight& down,
                                       const Tensor& idx, const Tensor& weights, Tensor& out) {
  TD_CHECK(gate_up.quantized() && down.quantized(),
           "cpu moe_experts: gate_up ({}) and down ({}) must both be quantized or both dense",
           gate_up.w.str(), down.w.str());
  const int64_t T = x.size(0), D = x.size(1), I = down.in_features(), k = idx.size(1),
                E = gate_up.experts(), P = T * k;
  const int32_t* ip = idx.data<int32_t>();
  const float* xp = f32_ptr(x, "moe_experts");
  const float* wp = f32_ptr(weights, "moe_experts");
  float* o = f32_mut(out, "moe_experts");
  std::vector<std::vector<int64_t>> pairs_of(static_cast<size_t>(E));  // pairs in pair order
  for (int64_t p = 0; p < P; ++p)
    if (ip[p] >= 0) pairs_of[ip[p]].push_back(p);
  std::vector<QuantInput> in_x(static_cast<size_t>(T));
  parallel_for(T, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) quantize_input(xp + t * x.stride(0), D, gate_up, in_x[t]);
  });
  // g [P, 2I]: gate | up of each pair.
  std::vector<float> g(static_cast<size_t>(P * 2 * I));
  parallel_for(E * 2 * I, [&](int64_t b, int64_t e_) {
    std::vector<float> row(static_cast<size_t>(D));
    for (int64_t r = b; r < e_; ++r) {
      const int64_t e = r / (2 * I), n = r % (2 * I);
      if (pairs_of[e].empty()) continue;
      const Weight we = gate_up.expert(e);
      decode_weight_row(we, n, row.data());
      for (int64_t p : pairs_of[e]) g[p * 2 * I + n] = quant_dot(we, n, row.data(), in_x[p / k]);
    }
  });
  std::vector<QuantInput> in_h(static_cast<size_t>(P));
  parallel_for(P, [&](int64_t b, int64_t e) {
    std::vector<float> h(static_cast<size_t>(I));
    for (int64_t p = b; p < e; ++p) {
      for (int64_t i = 0; i < I; ++i) h[i] = silu(g[p * 2 * I + i]) * g[p * 2 * I + I + i];
      quantize_input(h.data(), I, down, in_h[p]);
    }
  });
  // y [P, D]: each pair's down projection.
  std::vector<float> y(static_cast<size_t>(P * D));
  parallel_for(E * D, [&](int64_t b, int64_t e_) {
    std::vector<float> row(static_cast<size_t>(I));
    for (int64_t r = b; r < e_; ++r) {
      const int64_t e = r / D, d = r % D;
      if (pairs_of[e].empty()) continue;
      const Weight we = down.expert(e);
      decode_weight_row(we, d, row.data());
      for (int64_t p : pairs_of[e]) y[p * D + d] = quant_dot(we, d, row.data(), in_h[p]);
    }
  });
  for (int64_t t = 0; t < T; ++t)
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0;
      for (int64_t j = 0; j < k; ++j)
        if (ip[t * k + j] >= 0) acc += wp[t * k + j] * y[(t * k + j) * D + d];
      o[t * D + d] = acc;
    }
}

}  // namespace tandem::cpu
