#include "runtime/spec_depth_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tandem {

int64_t SpecDepthPolicy::batch_class(int64_t b) {
  for (int64_t x : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256})
    if (b <= x) return x;
  return (b + 63) / 64 * 64;
}

SpecDepthPolicy::SpecDepthPolicy(SpecDepthOptions o) : o_(o) {
  TD_CHECK(o_.max_depth >= 1 && o_.initial_depth >= 0 && o_.initial_depth <= o_.max_depth,
           "speculative depth: initial {} outside [0, {}]", o_.initial_depth, o_.max_depth);
  TD_CHECK(o_.probe_steps >= 2 && o_.explore_every > o_.probe_steps,
           "speculative depth: probes of {} steps every {}", o_.probe_steps, o_.explore_every);
  accept_.assign(static_cast<size_t>(o_.max_depth), o_.prior_accept);
  accept_n_.assign(static_cast<size_t>(o_.max_depth), 0);
  histogram_.assign(static_cast<size_t>(o_.max_depth + 1), 0);
}

const SpecDepthPolicy::ClassState* SpecDepthPolicy::find(int64_t batch) const {
  const int64_t cls = batch_class(batch);
  for (const auto& [k, c] : classes_)
    if (k == cls) return &c;
  return nullptr;
}

// A class seen for the first time starts where the nearest known class has settled (so a batch
// that grows by one sequence into a new class does not jump back to the initial depth).
SpecDepthPolicy::ClassState& SpecDepthPolicy::state(int64_t batch) {
  const int64_t cls = batch_class(batch);
  const ClassState* nearest = nullptr;
  int64_t gap = 0;
  for (auto& [k, c] : classes_) {
    if (k == cls) return c;
    const int64_t g = std::abs(std::log2(static_cast<double>(k) / static_cast<double>(cls))) * 1024;
    if (!nearest || g < gap) nearest = &c, gap = g;
  }
  ClassState c;
  c.depth = nearest ? nearest->depth : o_.initial_depth;
  c.timing.resize(static_cast<size_t>(o_.max_depth + 1));
  classes_.emplace_back(cls, std::move(c));
  return classes_.back().second;
}

double SpecDepthPolicy::acceptance(int64_t j) const {
  if (j < 1 || j > o_.max_depth) return 0.0;
  // A position never drafted yet takes the deepest estimate below it (acceptance falls slowly
  // with depth), or the prior.
  for (int64_t i = j; i >= 1; --i)
    if (accept_n_[static_cast<size_t>(i - 1)] > 0) return accept_[static_cast<size_t>(i - 1)];
  return o_.prior_accept;
}

double SpecDepthPolicy::expected_tokens(int64_t depth) const {
  double e = 1.0, reach = 1.0;
  for (int64_t j = 1; j <= depth; ++j) {
    reach *= acceptance(j);
    e += reach;
  }
  return e;
}

// The class's measured time for depth, else a straight line through its measured depths >= 1
// (a round's cost grows about linearly with its drafts), else unknown (-1).
double SpecDepthPolicy::class_seconds(const ClassState& c, int64_t depth) const {
  const Timing& t = c.timing[static_cast<size_t>(depth)];
  if (depth == 0) return t.samples > 0 ? t.seconds : -1.0;
  if (t.samples > 0) return t.seconds + c.catch_up;
  int64_t lo = -1, hi = -1;  // the two measured depths nearest to depth
  for (int64_t d = 1; d <= o_.max_depth; ++d) {
    if (c.timing[static_cast<size_t>(d)].samples == 0) continue;
    if (lo < 0 || std::abs(d - depth) < std::abs(lo - depth)) {
      hi = lo;
      lo = d;
    } else if (hi < 0 || std::abs(d - depth) < std::abs(hi - depth)) {
      hi = d;
    }
  }
  if (lo < 0 || hi < 0) return -1.0;
  const double tl = c.timing[static_cast<size_t>(lo)].seconds;
  const double th = c.timing[static_cast<size_t>(hi)].seconds;
  const double slope = (th - tl) / static_cast<double>(hi - lo);
  const double est = tl + slope * static_cast<double>(depth - lo);
  return est > 0 ? est + c.catch_up : -1.0;
}

double SpecDepthPolicy::class_rate(const ClassState& c, int64_t depth, int64_t cls) const {
  const double t = class_seconds(c, depth);
  return t > 0 ? static_cast<double>(cls) * expected_tokens(depth) / t : -1.0;
}

double SpecDepthPolicy::step_seconds(int64_t depth, int64_t batch) const {
  const ClassState* c = find(batch);
  return c && depth >= 0 && depth <= o_.max_depth ? class_seconds(*c, depth) : -1.0;
}

int64_t SpecDepthPolicy::settled_depth(int64_t batch) const {
  const ClassState* c = find(batch);
  return c ? c->depth : o_.initial_depth;
}

void SpecDepthPolicy::start_probe(ClassState& c, int64_t depth) {
  c.probe_depth = depth;
  c.probe_left = o_.probe_steps;
}

// Between probes: first measure every depth never run in this class (the nearest first), then
// move one step toward the best estimated depth when it clearly beats the settled one, and every
// explore_every steps re-measure a neighbour (alternately above and below).
void SpecDepthPolicy::decide(ClassState& c, int64_t cls) {
  const int64_t d = c.depth;
  if (c.timing[static_cast<size_t>(d)].samples == 0) return;  // measure the settled depth first
  for (int64_t gap = 1; gap <= o_.max_depth; ++gap)
    for (int64_t n : {d - gap, d + gap})
      if (n >= 0 && n <= o_.max_depth && c.timing[static_cast<size_t>(n)].seen == 0) {
        start_probe(c, n);
        return;
      }
  // Periodically the depth measured longest ago; from plain decoding a probe upward also pays the
  // draft's catch-up of every live sequence, so there it comes four times less often.
  if (c.steps % (d == 0 ? 4 * o_.explore_every : o_.explore_every) == 0) {
    // Only depths within reach of the settled one's rate (25%) are worth the probe's cost.
    const double now = class_rate(c, d, cls);
    int64_t stalest = -1;
    for (int64_t x = 0; x <= o_.max_depth; ++x)
      if (x != d && 1.25 * class_rate(c, x, cls) >= now &&
          (stalest < 0 || c.timing[static_cast<size_t>(x)].updated <
                              c.timing[static_cast<size_t>(stalest)].updated))
        stalest = x;
    if (stalest >= 0) {
      start_probe(c, stalest);
      return;
    }
  }
  if (c.steps - c.last_move < o_.min_dwell) return;
  int64_t best = d;
  double best_rate = class_rate(c, d, cls);
  for (int64_t x = 0; x <= o_.max_depth; ++x) {
    const double r = class_rate(c, x, cls);
    if (r > best_rate) best = x, best_rate = r;
  }
  const double now = class_rate(c, d, cls);
  if (best == d || !(best_rate > now * (1.0 + o_.margin))) return;
  // One step toward the best, even through a slightly worse depth on the way (at batch 8 the
  // shipped model's rate dips at depth 1 between depth 2 and plain decoding).
  const int64_t next = d + (best > d ? 1 : -1);
  const double next_rate = class_rate(c, next, cls);
  c.depth = next;
  c.last_move = c.steps;
  changes_.push_back(fmt::format(
      "batch class {}: speculative depth {} -> {} (estimated {:.0f} -> {:.0f} tokens/s; accept "
      "length {:.2f} -> {:.2f})",
      cls, d, next, now, next_rate, expected_tokens(d), expected_tokens(next)));
}

int64_t SpecDepthPolicy::choose(int64_t batch) {
  int64_t depth = o_.initial_depth;
  if (o_.adaptive && batch > 0) {
    ClassState& c = state(batch);
    ++c.steps;
    if (c.probe_left == 0) decide(c, batch_class(batch));
    if (c.probe_left > 0) {
      --c.probe_left;
      depth = c.probe_depth;
    } else {
      depth = c.depth;
    }
  }
  ++histogram_[static_cast<size_t>(depth)];
  return depth;
}

void SpecDepthPolicy::observe(int64_t depth, int64_t batch, double seconds,
                              const std::vector<int64_t>& accepted, double catch_up_seconds) {
  if (depth < 0 || depth > o_.max_depth) return;
  for (int64_t k : accepted)
    for (int64_t j = 1; j <= std::min(k + 1, depth); ++j) {
      const size_t i = static_cast<size_t>(j - 1);
      const double hit = j <= k ? 1.0 : 0.0;
      // A plain mean over the first 1 / accept_alpha observations, a running average after.
      const double w = std::max(o_.accept_alpha, 1.0 / static_cast<double>(++accept_n_[i]));
      accept_[i] += w * (hit - accept_[i]);
    }
  if (!o_.adaptive || batch <= 0 || !(seconds > 0)) return;
  ClassState& c = state(batch);
  if (depth > 0) c.catch_up += o_.catch_up_alpha * (catch_up_seconds - c.catch_up);
  seconds -= catch_up_seconds;
  Timing& t = c.timing[static_cast<size_t>(depth)];
  if (++t.seen == 1) return;  // the first step of a shape may include its graph capture
  t.updated = c.steps;
  if (c.probe_depth == depth) {
    // A probe measures afresh: its median replaces what may be a stale average.
    t.probe.push_back(seconds);
    ++t.samples;
    if (c.probe_left == 0) {
      std::vector<double> v = t.probe;
      std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
      t.seconds = v[v.size() / 2];
      t.probe.clear();
      c.probe_depth = -1;
    }
    return;
  }
  if (t.samples == 0) {
    t.seconds = seconds;
  } else {
    // A stall (another shape's capture, the host descheduled) moves the average by a bounded
    // amount.
    const double s = std::min(seconds, 3.0 * t.seconds);
    t.seconds += o_.time_alpha * (s - t.seconds);
  }
  ++t.samples;
}

std::vector<std::string> SpecDepthPolicy::take_changes() {
  std::vector<std::string> out;
  out.swap(changes_);
  return out;
}

}  // namespace tandem
