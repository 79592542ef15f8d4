// The GPU's discrete choices, replayed on the CPU reference. A whole-model comparison of bf16
// forwards is only as tight as its discrete steps allow: one routed expert or one indexer key
// chosen differently at a near-tie (two scores closer than bf16's rounding) moves the logits by
// tens of percent, and random checkpoints are full of near-ties. So the GPU forward records what
// it chose (routed experts and their weights, indexer top-k rows), and the emulated CPU forward
// takes the GPU's choice wherever the two differ, after checking that the reference itself was
// at a near-tie there: a choice the reference ranks clearly worse is a wrong kernel, and fails.
// With the choices shared, what is left to compare is continuous, and its tolerance can be tight.
#pragma once

#include <algorithm>
#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "backends/cpu/cpu_math.h"
#include "core/device.h"
#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/forwarding_backend.h"

namespace tandem::test {

// What the GPU chose, in call order (the CPU and GPU forwards issue the same ops in the same
// order, so the n-th routing call on one side is the n-th on the other).
struct ChoiceLog {
  struct Route {
    std::vector<int32_t> idx;  // [T, k]
    std::vector<float> w;      // [T, k]
  };
  std::deque<Route> routes;
  std::deque<std::vector<int32_t>> topk;  // [T, K] each
  void clear() { routes.clear(), topk.clear(); }
};

// How far the GPU's choices stray from the reference's, over every replayed call.
struct ChoiceStats {
  int64_t route_rows = 0, route_rows_differ = 0;
  int64_t topk_rows = 0, topk_rows_differ = 0;
  int64_t unmatched_calls = 0;  // a call with nothing recorded (the two sides diverged)
  // The largest deficit, relative to the row's score scale, of a GPU choice against the
  // reference's own last pick: how much worse than the reference's k-th choice the GPU's worst
  // extra choice scores. Near-ties give ~1e-3; a wrong kernel gives O(1).
  double route_deficit = 0, topk_deficit = 0;
  std::string worst_route, worst_topk;
};

// Forwards every op to the real CUDA backend and logs the results of the two choosing ops.
class RecordingBackend final : public ForwardingBackend {
 public:
  RecordingBackend(Backend& inner, ChoiceLog& log) : ForwardingBackend(inner), log_(log) {}

  void indexer_topk(const Tensor& q, const Tensor& w, const Tensor& p, const AttentionMeta& m,
                    Tensor& o) override {
    inner().indexer_topk(q, w, p, m, o);
    sync(o);
    log_.topk.push_back(to_int_vector(o));
  }
  void moe_route(const Tensor& l, const Tensor& bias, const RouteParams& p, Tensor& i,
                 Tensor& w) override {
    inner().moe_route(l, bias, p, i, w);
    sync(i);
    log_.routes.push_back({to_int_vector(i), to_float_vector(w)});
  }
  // Eager only: the log reads results back on the host.
  std::unique_ptr<GraphRunner> make_graph_runner(Workspace&) override { return nullptr; }

 private:
  // The op may run on the side stream: wait for the whole device before reading back.
  static void sync(const Tensor& t) { device_interface(DeviceType::CUDA).synchronize(t.device()); }
  ChoiceLog& log_;
};

// Registers the recorder as the CUDA backend for its lifetime.
class ScopedRecording {
 public:
  ScopedRecording(RecordingBackend& r, Backend& real) : real_(real) {
    register_backend(DeviceType::CUDA, &r);
  }
  ~ScopedRecording() { register_backend(DeviceType::CUDA, &real_); }

 private:
  Backend& real_;
};

// --- The reference's view of a choice ---------------------------------------------------------

// How much worse, in the reference's selection scores, the GPU's routing row is than a correct
// one: 0 when the sets agree. Grouped routing decides in two steps, so the GPU is judged by each:
// every group it routed into may score at most this much under the reference's last kept group,
// and every expert it chose at most this much under the k-th best expert of the groups it
// routed into (a near-tie between groups legitimately changes which experts follow). Scores
// are sigmoids (plus bias) in [0, 1], so the deficit is on the row's scale.
inline double route_deficit(const float* logits, const float* bias, int64_t E, const RouteParams& p,
                            const int32_t* gpu_idx) {
  const int64_t k = p.top_k, per_group = E / p.n_group;
  std::vector<float> choice(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e)
    choice[e] = 1.0f / (1.0f + std::exp(-logits[e])) + (bias ? bias[e] : 0.0f);
  for (int64_t j = 0; j < k; ++j)
    if (gpu_idx[j] < 0 || gpu_idx[j] >= E) return INFINITY;
  std::vector<bool> used(static_cast<size_t>(p.n_group), false);
  for (int64_t j = 0; j < k; ++j) used[gpu_idx[j] / per_group] = true;
  double worst = 0;
  if (p.n_group > 1) {
    std::vector<double> gscore(static_cast<size_t>(p.n_group));
    for (int64_t g = 0; g < p.n_group; ++g) {
      std::vector<float> v(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
      std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
      gscore[g] = v[0] + v[1];  // a group scores its two best experts
    }
    std::vector<double> sorted = gscore;
    std::sort(sorted.rbegin(), sorted.rend());
    const double last_kept = sorted[static_cast<size_t>(p.topk_group - 1)];
    for (int64_t g = 0; g < p.n_group; ++g)
      if (used[g]) worst = std::max(worst, last_kept - gscore[g]);
  }
  std::vector<float> allowed;
  for (int64_t e = 0; e < E; ++e)
    if (used[e / per_group]) allowed.push_back(choice[e]);
  std::nth_element(allowed.begin(), allowed.begin() + (k - 1), allowed.end(),
                   std::greater<float>());
  const double kth = allowed[static_cast<size_t>(k - 1)];
  for (int64_t j = 0; j < k; ++j) worst = std::max(worst, kth - choice[gpu_idx[j]]);
  return std::max(worst, 0.0);
}

// The indexer's scores of every visible position of token t, as the CPU backend computes them.
// q: [T, Hi, Di] f32; w: [T, Hi] f32; pool: [S, Di] f32.
inline std::vector<float> indexer_scores(const Tensor& q, const Tensor& w, const Tensor& pool,
                                         const AttentionMeta& meta, int64_t t) {
  const cpu::HostMeta m(meta);
  const int64_t Hi = q.size(1), Di = q.size(2), seq = m.token_seq[t], n = m.token_pos[t] + 1;
  const float* qp = q.data<float>();
  const float* wp = w.data<float>();
  const float* kp = pool.data<float>();
  std::vector<float> s(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const float* key = kp + m.slot(seq, j) * Di;
    double acc = 0;
    for (int64_t h = 0; h < Hi; ++h) {
      double d = 0;
      for (int64_t c = 0; c < Di; ++c)
        d += double(qp[t * q.stride(0) + h * q.stride(1) + c]) * key[c];
      acc += wp[t * w.stride(0) + h] * std::max(d, 0.0);
    }
    s[j] = static_cast<float>(acc);
  }
  return s;
}

// The same deficit for one indexer row: the reference's K-th best score minus the worst score
// among positions only the GPU selected, over the row's largest score.
inline double topk_deficit(const std::vector<float>& score, const int32_t* ref, const int32_t* gpu,
                           int64_t K) {
  auto in = [&](const int32_t* row, int32_t j) { return std::find(row, row + K, j) != row + K; };
  double ref_min = INFINITY, scale = 1e-30;
  for (float s : score) scale = std::max<double>(scale, std::fabs(s));
  for (int64_t j = 0; j < K; ++j)
    if (ref[j] >= 0) ref_min = std::min<double>(ref_min, score[ref[j]]);
  double worst = 0;
  for (int64_t j = 0; j < K; ++j) {
    const int32_t pos = gpu[j];
    if (pos < 0 || in(ref, pos)) continue;
    if (pos >= static_cast<int32_t>(score.size())) return INFINITY;  // not even visible
    worst = std::max(worst, (ref_min - score[pos]) / scale);
  }
  return std::max(worst, 0.0);
}

// Whether two rows hold the same set (order aside).
inline bool same_set(const int32_t* a, const int32_t* b, int64_t n) {
  std::vector<int32_t> x(a, a + n), y(b, b + n);
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y;
}

}  // namespace tandem::test
