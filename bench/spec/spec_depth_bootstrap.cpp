#include "spec/spec_depth_bootstrap.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"

namespace tandem::bench {

void SpecDepthSamples::add_step(int64_t depth, int64_t batch, double seconds,
                                const std::vector<int64_t>& accepted) {
  if (depth < 0 || batch <= 0 || !(seconds > 0)) return;
  seconds_[SpecDepthPolicy::batch_class(batch)][depth].push_back(seconds);
  if (static_cast<int64_t>(reached_.size()) < depth) {
    reached_.resize(static_cast<size_t>(depth), 0);
    accepted_.resize(static_cast<size_t>(depth), 0);
  }
  // A sequence that accepted k drafts reached positions 1 .. min(k + 1, depth).
  for (int64_t k : accepted)
    for (int64_t j = 1; j <= std::min(k + 1, depth); ++j) {
      ++reached_[static_cast<size_t>(j - 1)];
      if (j <= k) ++accepted_[static_cast<size_t>(j - 1)];
    }
}

std::vector<int64_t> SpecDepthSamples::classes() const {
  std::vector<int64_t> out;
  for (const auto& [cls, by_depth] : seconds_)
    if (by_depth.size() >= 2) out.push_back(cls);
  return out;
}

std::vector<int64_t> SpecDepthSamples::depths(int64_t cls) const {
  std::vector<int64_t> out;
  if (const auto it = seconds_.find(cls); it != seconds_.end())
    for (const auto& [d, v] : it->second) out.push_back(d);
  return out;
}

double SpecDepthSamples::acceptance(int64_t j) const {
  for (int64_t i = std::min<int64_t>(j, static_cast<int64_t>(reached_.size())); i >= 1; --i)
    if (reached_[static_cast<size_t>(i - 1)] > 0)
      return static_cast<double>(accepted_[static_cast<size_t>(i - 1)]) /
             static_cast<double>(reached_[static_cast<size_t>(i - 1)]);
  return 0.6;
}

double SpecDepthSamples::expected_tokens(int64_t d) const {
  double e = 1.0, reach = 1.0;
  for (int64_t j = 1; j <= d; ++j) e += (reach *= acceptance(j));
  return e;
}

double SpecDepthSamples::mean_seconds(int64_t cls, int64_t d) const {
  const auto it = seconds_.find(cls);
  if (it == seconds_.end()) return -1.0;
  const auto& by_depth = it->second;
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  if (const auto m = by_depth.find(d); m != by_depth.end()) return mean(m->second);
  if (d == 0) return -1.0;
  int64_t lo = -1, hi = -1;  // the two measured depths >= 1 nearest to d
  for (const auto& [x, v] : by_depth) {
    if (x < 1) continue;
    if (lo < 0 || std::abs(x - d) < std::abs(lo - d)) {
      hi = lo;
      lo = x;
    } else if (hi < 0 || std::abs(x - d) < std::abs(hi - d)) {
      hi = x;
    }
  }
  if (lo < 0 || hi < 0) return -1.0;
  const double tl = mean(by_depth.at(lo)), th = mean(by_depth.at(hi));
  const double t = tl + (th - tl) / static_cast<double>(hi - lo) * static_cast<double>(d - lo);
  return t > 0 ? t : -1.0;
}

double SpecDepthSamples::draw_seconds(int64_t cls, int64_t d, double u) const {
  const auto& by_depth = seconds_.at(cls);
  int64_t from = -1;  // d itself, else the nearest measured depth >= 1
  if (by_depth.count(d)) {
    from = d;
  } else {
    for (const auto& [x, v] : by_depth)
      if (x >= 1 && (from < 0 || std::abs(x - d) < std::abs(from - d))) from = x;
  }
  const std::vector<double>& v = by_depth.at(from);
  const double s =
      v[std::min(v.size() - 1, static_cast<size_t>(u * static_cast<double>(v.size())))];
  return from == d ? s : s * mean_seconds(cls, d) / mean_seconds(cls, from);
}

namespace {

// One pass of `steps` decode steps of a batch of cls sequences through policy p (pin >= 0: every
// step at that depth instead, not asked; shown to p as calibration where `calibrate`): committed
// tokens per second. share[d] counts the steps at each depth.
double simulate(const SpecDepthSamples& s, int64_t cls, SpecDepthPolicy& p, int64_t steps, Rng& rng,
                const AnswerModel& answers, int64_t pin, std::vector<double>& share,
                bool calibrate = false) {
  struct Live {
    int64_t left, lag;
    double scale;  // the answer's acceptance factor
  };
  const bool answered = answers.tokens > 0;
  auto fresh = [&] {
    const std::vector<double>& f = answers.accept_scales;
    const double scale =
        f.empty() ? 1.0
                  : f[std::min(f.size() - 1,
                               static_cast<size_t>(rng.uniform() * static_cast<double>(f.size())))];
    return Live{answers.tokens, answers.prompt_positions, scale};
  };
  std::vector<Live> live;
  for (int64_t b = 0; b < cls; ++b) live.push_back(fresh());
  double tokens = 0, seconds = 0;
  std::vector<int64_t> accepted;
  for (int64_t i = 0; i < steps; ++i) {
    int64_t lag = 0, remaining = 0, max_remaining = 0;
    for (const Live& l : live)
      lag += l.lag, remaining += l.left, max_remaining = std::max(max_remaining, l.left);
    const int64_t d = pin >= 0   ? pin
                      : answered ? p.choose(cls, lag, remaining, max_remaining)
                                 : p.choose(cls);
    double t = s.draw_seconds(cls, d, rng.uniform());
    double read = 0;
    if (answered && d > 0 && lag > 0)
      read =
          answers.read_fixed_seconds + answers.read_seconds_per_position * static_cast<double>(lag);
    accepted.clear();
    for (int64_t b = 0; b < cls && d > 0; ++b) {
      const double scale = answered ? live[static_cast<size_t>(b)].scale : 1.0;
      auto accept = [&](int64_t j) {
        return scale == 1.0 ? s.acceptance(j) : std::min(0.98, scale * s.acceptance(j));
      };
      int64_t k = 0;
      while (k < d && rng.uniform() < accept(k + 1)) ++k;
      accepted.push_back(k);
    }
    for (size_t b = 0; b < live.size(); ++b) {
      // Each sequence's own token (the bonus, or plain) and its accepted drafts; an answer commits
      // no more than it has left.
      const int64_t k = d > 0 ? accepted[b] : 0;
      Live& l = live[b];
      if (!answered) {
        tokens += static_cast<double>(k + 1);
        continue;
      }
      const int64_t got = std::min(l.left, k + 1);
      tokens += static_cast<double>(got);
      l.left -= got;
      l.lag = d > 0 ? 0 : l.lag + 1;
      if (l.left == 0) l = fresh();
    }
    seconds += t + read;
    const int64_t read_tokens = read > 0 ? lag : 0;
    if (pin < 0)
      p.observe(d, cls, t + read, accepted, read, read_tokens);
    else if (calibrate)
      p.calibrate(d, cls, t + read, accepted, read, read_tokens);
    share[static_cast<size_t>(d)] += 1.0;
  }
  return tokens / seconds;
}

}  // namespace

BootstrapResult bootstrap_class(const SpecDepthSamples& s, int64_t cls, SpecDepthOptions o,
                                int64_t steps, int seeds, const AnswerModel& answers) {
  BootstrapResult r;
  // The depths the class can run: 0 .. the deepest with a time, measured or interpolated.
  int64_t max_depth = -1;
  for (int64_t d = 0; d <= o.max_depth && s.mean_seconds(cls, d) > 0; ++d) max_depth = d;
  if (max_depth < 1) return r;
  o.max_depth = max_depth;
  o.initial_depth = std::min(o.initial_depth, max_depth);
  o.adaptive = true;
  std::vector<double> unused(static_cast<size_t>(max_depth + 1), 0.0);
  for (int64_t d = 0; d <= max_depth; ++d) {
    double rate = 0;
    if (answers.tokens > 0) {  // the same draws as the policy's passes, pinned
      SpecDepthPolicy pinned(o);
      for (int seed = 1; seed <= seeds; ++seed) {
        Rng rng(static_cast<uint64_t>(seed));
        rate += simulate(s, cls, pinned, steps, rng, answers, d, unused) / seeds;
      }
    } else {
      rate = static_cast<double>(cls) * s.expected_tokens(d) / s.mean_seconds(cls, d);
    }
    if (rate > r.best_rate) r.best_rate = rate, r.best_depth = d;
  }
  r.depth_share.assign(static_cast<size_t>(max_depth + 1), 0.0);
  r.worst_ratio = 1e300;
  double sum = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    Rng rng(static_cast<uint64_t>(seed));
    SpecDepthPolicy p(o);
    if (answers.tokens > 0) {
      // As an engine starts (bench-offline's warm-up, Engine::pin_depth): each depth pinned for
      // a while, then the policy settles on what that measured.
      std::vector<double> warm(static_cast<size_t>(max_depth + 1), 0.0);
      for (int64_t d = 0; d <= max_depth; ++d)
        simulate(s, cls, p, answers.calibration_steps, rng, answers, d, warm, true);
      p.settle();
    }
    const double ratio = simulate(s, cls, p, steps, rng, answers, -1, r.depth_share) / r.best_rate;
    sum += ratio;
    r.worst_ratio = std::min(r.worst_ratio, ratio);
  }
  r.mean_ratio = sum / seeds;
  for (double& x : r.depth_share) x /= static_cast<double>(steps) * seeds;
  return r;
}

}  // namespace tandem::bench
