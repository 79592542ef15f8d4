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

SpecDepthPolicy::SpecDepthPolicy(SpecDepthOptions o) : o_(o), reads_(o.untimed_reads) {
  TD_CHECK(o_.max_depth >= 1 && o_.initial_depth >= 0 && o_.initial_depth <= o_.max_depth,
           "speculative depth: initial {} outside [0, {}]", o_.initial_depth, o_.max_depth);
  TD_CHECK(o_.probe_steps > o_.untimed_steps && o_.explore_every > o_.probe_steps,
           "speculative depth: probes of {} steps every {}", o_.probe_steps, o_.explore_every);
  TD_CHECK(o_.time_window >= o_.probe_steps, "speculative depth: a window of {} step times",
           o_.time_window);
  accept_.assign(static_cast<size_t>(o_.max_depth), o_.prior_accept);
  accept_n_.assign(static_cast<size_t>(o_.max_depth), 0);
  accept_slow_.assign(static_cast<size_t>(o_.max_depth), o_.prior_accept);
  histogram_.assign(static_cast<size_t>(o_.max_depth + 1), 0);
}

const SpecDepthPolicy::ClassState* SpecDepthPolicy::find(int64_t batch) const {
  const int64_t cls = batch_class(batch);
  for (const auto& [k, c] : classes_)
    if (k == cls) return &c;
  return nullptr;
}

// A class seen for the first time takes what its neighbours measured: their step times stand in
// for the depths it has not run (class_seconds), it starts where the nearest class has settled
// unless those estimates favour another depth by the move margin and inherits the nearest class's
// catch-up cost. So a batch that drains through many classes in a few dozen steps does not spend
// them re-probing depths every neighbour already found slow.
SpecDepthPolicy::ClassState& SpecDepthPolicy::state(int64_t batch) {
  const int64_t cls = batch_class(batch);
  for (auto& [k, c] : classes_)
    if (k == cls) return c;
  const ClassState* nearest = nearest_class(cls);
  ClassState c;
  c.cls = cls;
  c.depth = nearest ? nearest->depth : o_.initial_depth;
  if (nearest) c.catch_up = nearest->catch_up;
  c.timing.resize(static_cast<size_t>(o_.max_depth + 1));
  classes_.emplace_back(cls, std::move(c));
  ClassState& fresh = classes_.back().second;
  int64_t best = -1;
  double best_rate = 0;
  for (int64_t x = 0; x <= o_.max_depth; ++x) {
    const double r = class_rate(fresh, x, cls);
    if (r > best_rate) best = x, best_rate = r;
  }
  // As for a move: only for a clear margin over the neighbour's depth.
  if (best >= 0 && best_rate > class_rate(fresh, fresh.depth, cls) * (1.0 + o_.margin)) {
    changes_.push_back(fmt::format(
        "batch class {}: starts at speculative depth {} (neighbouring classes' step times; the "
        "nearest class is at {})",
        cls, best, fresh.depth));
    fresh.depth = best;
  }
  return fresh;
}

const SpecDepthPolicy::ClassState* SpecDepthPolicy::nearest_class(int64_t cls) const {
  const ClassState* nearest = nullptr;
  double gap = 0;
  for (const auto& [k, c] : classes_) {
    const double g = class_distance(k, cls);
    if (!nearest || g < gap) nearest = &c, gap = g;
  }
  return nearest;
}

double SpecDepthPolicy::class_distance(int64_t a, int64_t b) {
  return std::abs(std::log2(static_cast<double>(a) / static_cast<double>(b)));
}

// The nearest other class's time for depth, scaled to this class by the two classes' ratio at
// the depth nearest to it that both have measured. A class that has measured nothing yet is
// related through the nearest class that has (so that all its estimates share one scale). -1 when
// no class has measured depth or nothing relates the two.
double SpecDepthPolicy::borrowed_seconds(const ClassState& c, int64_t depth) const {
  auto measured = [](const ClassState& x, int64_t d) {
    return x.timing[static_cast<size_t>(d)].samples > 0;
  };
  auto nearest = [&](auto&& ok) {
    const ClassState* found = nullptr;
    double gap = 0;
    for (const auto& [k, o] : classes_) {
      if (&o == &c || !ok(o)) continue;
      const double g = class_distance(k, c.cls);
      if (!found || g < gap) found = &o, gap = g;
    }
    return found;
  };
  auto any_measured = [&](const ClassState& x) {
    for (int64_t d = 0; d <= o_.max_depth; ++d)
      if (measured(x, d)) return true;
    return false;
  };
  const ClassState* donor = nearest([&](const ClassState& o) { return measured(o, depth); });
  const ClassState* scale_to = any_measured(c) ? &c : nearest(any_measured);
  if (!donor || !scale_to) return -1.0;
  const double t = donor->timing[static_cast<size_t>(depth)].seconds;
  if (donor == scale_to) return t;
  int64_t ref = -1;
  for (int64_t d = 0; d <= o_.max_depth; ++d)
    if (measured(*scale_to, d) && measured(*donor, d) &&
        (ref < 0 || std::abs(d - depth) < std::abs(ref - depth)))
      ref = d;
  if (ref < 0) return -1.0;
  return t * scale_to->timing[static_cast<size_t>(ref)].seconds /
         donor->timing[static_cast<size_t>(ref)].seconds;
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

// The class's measured time for depth; else a neighbouring class's, scaled to this one
// (borrowed_seconds); else a straight line through its own measured depths >= 1 (a round's cost
// grows about linearly with its drafts); else unknown (-1). Plain decoding is never extrapolated.
double SpecDepthPolicy::class_seconds(const ClassState& c, int64_t depth) const {
  const Timing& t = c.timing[static_cast<size_t>(depth)];
  const double catch_up = depth > 0 ? catch_up_seconds(c) : 0.0;
  if (t.samples > 0) return t.seconds + catch_up;
  if (const double b = borrowed_seconds(c, depth); b > 0) return b + catch_up;
  if (depth == 0) return -1.0;
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
  return est > 0 ? est + catch_up : -1.0;
}

double SpecDepthPolicy::catch_up_seconds(const ClassState& c) const {
  return c.catch_up.reads * reads_.fixed_seconds() +
         c.catch_up.positions * reads_.seconds_per_position() + c.catch_up.unpriced_seconds;
}

double SpecDepthPolicy::class_rate(const ClassState& c, int64_t depth, int64_t cls) const {
  const double t = class_seconds(c, depth);
  return t > 0 ? static_cast<double>(cls) * expected_tokens(depth) / (t * fill_factor(depth))
               : -1.0;
}

void SpecDepthPolicy::note_batch(int64_t batch) {
  const size_t window = static_cast<size_t>(std::max<int64_t>(o_.fill_window, 1));
  if (recent_batches_.size() < window)
    recent_batches_.push_back(batch);
  else
    recent_batches_[recent_next_] = batch;
  recent_next_ = (recent_next_ + 1) % window;
  const int64_t largest = *std::max_element(recent_batches_.begin(), recent_batches_.end());
  empty_slot_steps_ += static_cast<double>(largest - batch);
}

void SpecDepthPolicy::observe_finish(int64_t tokens) {
  ++finished_;
  finished_tokens_ += static_cast<double>(std::max<int64_t>(tokens, 0));
}

double SpecDepthPolicy::empty_slot_steps_per_request() const {
  return finished_ > 0 ? empty_slot_steps_ / static_cast<double>(finished_) : 0.0;
}

double SpecDepthPolicy::fill_factor(int64_t depth) const {
  if (!o_.batch_fill || finished_ < o_.fill_min_finished || !(finished_tokens_ > 0)) return 1.0;
  const double tokens_per_request = finished_tokens_ / static_cast<double>(finished_);
  return 1.0 + empty_slot_steps_per_request() * expected_tokens(depth) / tokens_per_request;
}

double SpecDepthPolicy::step_seconds(int64_t depth, int64_t batch) const {
  const ClassState* c = find(batch);
  return c && depth >= 0 && depth <= o_.max_depth ? class_seconds(*c, depth) : -1.0;
}

int64_t SpecDepthPolicy::settled_depth(int64_t batch) const {
  const ClassState* c = find(batch);
  return c ? c->depth : o_.initial_depth;
}

bool SpecDepthPolicy::drafts_at(int64_t batch) const {
  if (!o_.adaptive) return o_.initial_depth > 0;
  if (const ClassState* c = find(batch)) return c->depth > 0;
  const ClassState* nearest = nearest_class(batch_class(std::max<int64_t>(batch, 1)));
  return (nearest ? nearest->depth : o_.initial_depth) > 0;
}

bool SpecDepthPolicy::plain_measured_near(const ClassState& c) const {
  for (const auto& [k, o] : classes_)
    if (o.timing[0].samples > 0 && class_distance(k, c.cls) <= 1.0) return true;
  return false;
}

void SpecDepthPolicy::start_probe(ClassState& c, int64_t depth) {
  c.probe_depth = depth;
  c.probe_left = o_.probe_steps;
}

// Between probes: first measure the depths never run in this class that may compete (the nearest
// first; those whose estimate from neighbouring classes is more than 25% below the best are left
// to the periodic probe), then move one step toward the best estimated depth when it clearly
// beats the settled one, and every explore_every steps re-measure the depth measured longest ago.
void SpecDepthPolicy::decide(ClassState& c, int64_t cls) {
  const int64_t d = c.depth;
  // The settled depth is measured first, as a probe (the median of its steps: a class's first
  // steps may carry one-off costs, and one of them must not decide where it goes).
  if (c.timing[static_cast<size_t>(d)].seen == 0) {
    start_probe(c, d);
    return;
  }
  double best_estimate = 0;
  for (int64_t x = 0; x <= o_.max_depth; ++x)
    best_estimate = std::max(best_estimate, class_rate(c, x, cls));
  // Plain decoding first (the baseline every depth is judged against, and never estimated from
  // the others), then the rest nearest first; with two depths >= 1 measured, the others have a
  // straight-line estimate and may be left out.
  std::vector<int64_t> order = {0};
  for (int64_t gap = 1; gap <= o_.max_depth; ++gap)
    for (int64_t n : {d - gap, d + gap})
      if (n > 0 && n <= o_.max_depth) order.push_back(n);
  for (int64_t n : order) {
    if (c.timing[static_cast<size_t>(n)].seen > 0) continue;
    const double r = class_rate(c, n, cls);
    // Plain decoding's time borrowed from a class more than one doubling away is no reason to
    // leave it out: the ratio of two classes' times at one depth does not carry to plain
    // decoding (a verify of B x (S + 1) tokens grows with B unlike a plain step). A batch-64
    // class scaled batch 4's plain time by their ratio at depth 5 to 5.5x its own and never
    // measured it (settled at depth 1, 0.69x of plain decoding).
    if (n == 0 && !plain_measured_near(c)) {
      start_probe(c, n);
      return;
    }
    if (r < 0 || 1.25 * r >= best_estimate) {
      start_probe(c, n);
      return;
    }
  }
  // Periodically the depth measured longest ago; from plain decoding a probe upward also pays the
  // draft's catch-up of every live sequence, so there it comes four times less often.
  const int64_t period = d == 0 ? 4 * o_.explore_every : o_.explore_every;
  if (c.steps % period == 0) {
    // Mostly only depths within reach of the settled one's rate (10%) are worth the probe's cost;
    // every fourth time any depth, so that one bad measurement cannot shut a depth out for good.
    // (With 25% and every other time, probes of depths 15-25% behind cost the simulated engines
    // of the tests 0.5-0.6% of their rate: 40 seeds each, mean 0.979 -> 0.985 at batch 32.)
    const bool any = (c.steps / period) % 4 == 0;
    const double now = class_rate(c, d, cls);
    int64_t stalest = -1;
    for (int64_t x = 0; x <= o_.max_depth; ++x)
      if (x != d && (any || 1.1 * class_rate(c, x, cls) >= now) &&
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
  // Straight to the best when this class has measured it and it wins clearly (a short pass
  // cannot afford the walk), or when it is plain decoding, measured (there is no acceptance of
  // deep positions to learn on the way down; on the recorded H200 costs at batch 8 the walk
  // 3 -> 2 -> 1 -> 0 left the test's run at 0.979 of plain decoding, 0.991 without it); otherwise
  // one step at a time, even through a slightly worse depth on the way (at batch 8 the shipped
  // model's rate dips at depth 1 between depth 2 and plain decoding), so that every depth it
  // passes is measured, and the acceptance of the deep positions keeps being learned, before it
  // goes further.
  const bool measured = c.timing[static_cast<size_t>(best)].samples > 0;
  const bool jump = measured && (best == 0 || best_rate > now * (1.0 + o_.jump_margin));
  const int64_t next = jump ? best : d + (best > d ? 1 : -1);
  const double next_rate = class_rate(c, next, cls);
  c.depth = next;
  c.last_move = c.steps;
  changes_.push_back(fmt::format(
      "batch class {}: speculative depth {} -> {} (estimated {:.0f} -> {:.0f} tokens/s; accept "
      "length {:.2f} -> {:.2f})",
      cls, d, next, now, next_rate, expected_tokens(d), expected_tokens(next)));
}

int64_t SpecDepthPolicy::choose(int64_t batch, int64_t lag_tokens, int64_t remaining_tokens,
                                int64_t max_remaining_tokens) {
  int64_t depth = o_.initial_depth;
  if (o_.adaptive && batch > 0) {
    ClassState& c = state(batch);
    const int64_t cls = batch_class(batch);
    ++c.steps;
    if (c.probe_left == 0) decide(c, cls);
    depth = c.probe_left > 0 ? c.probe_depth : c.depth;
    // The tail of the batch's answers: a sequence with r tokens left commits at most r, so
    // drafts past r - 1 cost a deeper round and commit nothing (answers of 32 tokens at accept
    // length ~4: the last round of each, on the GLM-5.2 7-layer slice at concurrency 1, ran depth
    // 4-5 where 1-2 drafts could still count). A probe keeps its depth: its steps measure it.
    // Never below depth 1: a plain last step made the next answer's first round start from plain
    // decoding, which cost more than the depth-1 round it saved (the simulation of
    // TheCatchUpAfterPlainStepsIsNotACostOfTheDepth: 0.968 -> 0.945 of the best depth).
    if (c.probe_left == 0 && max_remaining_tokens > 0 && depth > 1)
      depth = std::max<int64_t>(std::min(depth, max_remaining_tokens - 1), 1);
    // However dear the catch-up looks, one is paid when the class has not speculated for as long
    // as a probe from plain decoding waits: the price is an estimate, and one that is wrong (a
    // stall measured as the read cost) would otherwise never be measured again.
    if (depth > 0 && c.steps - c.last_spec < 4 * o_.explore_every &&
        !worth_catching_up(c, cls, depth, lag_tokens, remaining_tokens)) {
      if (c.probe_left > 0) {  // a probe waits for a cheaper moment
        c.timing[static_cast<size_t>(c.probe_depth)].probe.clear();
        c.probe_left = 0;
        c.probe_depth = -1;
      }
      depth = 0;
    } else {
      if (depth > 0) c.last_spec = c.steps;
      if (c.probe_left > 0) --c.probe_left;
    }
  }
  ++histogram_[static_cast<size_t>(depth)];
  return depth;
}

// Speculating after plain steps first makes the draft read every position it skipped. For a
// probe a cheap catch-up (a few plain steps' worth) is always paid, so that probes keep learning;
// a dear one (the batch's prompts were never read: they arrived while it decoded plainly), and any
// one before a step at the settled depth, only when the tokens the batch may still generate would
// win it back at the depth's estimated rate, or when that rate is not known yet. In a short pass,
// one probe's catch-up of 64 prompts cost more than everything else (0.66x of plain decoding on
// the H200); and a draining batch whose smaller classes had settled on speculating (they measured
// depths 2-3 5-12% ahead of plain decoding) paid its sequences' whole lag at each of them for the
// few dozen tokens left (answers of 24-96 tokens at concurrency 32, H100: 0.87x of plain decoding).
bool SpecDepthPolicy::worth_catching_up(const ClassState& c, int64_t cls, int64_t depth,
                                        int64_t lag_tokens, int64_t remaining_tokens) const {
  return lag_tokens <= 0 ||
         worth_read(c, cls, depth, lag_tokens, remaining_tokens, /*cheap_ok=*/c.probe_left > 0);
}

bool SpecDepthPolicy::worth_read(const ClassState& c, int64_t cls, int64_t depth, int64_t positions,
                                 int64_t remaining_tokens, bool cheap_ok) const {
  if (!reads_.known()) return true;  // not known yet: read, and learn what it costs
  const double cost = reads_.seconds(positions);
  const double plain_step = class_seconds(c, 0);
  if (plain_step <= 0 || (cheap_ok && cost <= o_.max_catch_up_steps * plain_step)) return true;
  // Seconds per committed token of the batch at a depth (its round alone; the reading is the
  // cost); a depth not measured yet (a probe) is taken to be as good as the best one that is,
  // and only with no depth > 0 known at all is the reading paid to find out.
  auto token_seconds = [&](int64_t x) {
    const double step = class_seconds(c, x) - catch_up_seconds(c);
    return step > 0 ? step / (static_cast<double>(cls) * expected_tokens(x)) : -1.0;
  };
  double spec_token = depth > 0 ? token_seconds(depth) : -1.0;
  for (int64_t x = 1; spec_token <= 0 && x <= o_.max_depth; ++x) {
    const double t = token_seconds(x);
    if (t > 0 && (spec_token <= 0 || t < spec_token)) spec_token = t;
  }
  if (spec_token <= 0) return true;
  const double plain_token = plain_step / static_cast<double>(cls);
  return static_cast<double>(remaining_tokens) * (plain_token - spec_token) > cost;
}

bool SpecDepthPolicy::worth_reading(int64_t batch, int64_t positions,
                                    int64_t remaining_tokens) const {
  if (!drafts_at(batch)) return false;
  if (!o_.adaptive || positions <= 0) return true;
  const ClassState* c = find(batch);
  // No read is made only for being cheap: a prompt read where the batch then decodes plainly is
  // lost (a catch-up is at least followed by the speculative step it was for).
  return !c || worth_read(*c, batch_class(batch), c->depth, positions, remaining_tokens, false);
}

void SpecDepthPolicy::observe_prompt_reads(double seconds, int64_t positions) {
  if (positions <= 0 || !(seconds > 0)) return;
  reads_.observe(positions, seconds);
  ++pending_reads_;
  pending_positions_ += positions;
}

void SpecDepthPolicy::overridden(int64_t batch) {
  if (!o_.adaptive || batch <= 0) return;
  ClassState& c = state(batch);
  if (c.probe_depth < 0) return;
  c.timing[static_cast<size_t>(c.probe_depth)].probe.clear();
  c.probe_left = 0;
  c.probe_depth = -1;
}

void SpecDepthPolicy::observe(int64_t depth, int64_t batch, double seconds,
                              const std::vector<int64_t>& accepted, double catch_up_seconds,
                              int64_t catch_up_tokens) {
  record(depth, batch, seconds, accepted, catch_up_seconds, catch_up_tokens, false);
}

void SpecDepthPolicy::calibrate(int64_t depth, int64_t batch, double seconds,
                                const std::vector<int64_t>& accepted, double catch_up_seconds,
                                int64_t catch_up_tokens) {
  record(depth, batch, seconds, accepted, catch_up_seconds, catch_up_tokens, true);
}

void SpecDepthPolicy::settle() {
  if (!o_.adaptive) return;
  for (auto& [cls, c] : classes_) {
    bool any = false;
    for (const Timing& t : c.timing) any |= t.samples > 0;
    if (!any) continue;
    int64_t best = c.depth;
    double best_rate = class_rate(c, c.depth, cls);
    for (int64_t x = 0; x <= o_.max_depth; ++x) {
      const double r = class_rate(c, x, cls);
      if (r > best_rate) best = x, best_rate = r;
    }
    c.last_move = c.steps - o_.min_dwell;  // free to move again at once
    if (best == c.depth) continue;
    changes_.push_back(fmt::format(
        "batch class {}: settles at speculative depth {} (was {}; estimated {:.0f} tokens/s from "
        "pinned steps)",
        cls, best, c.depth, best_rate));
    c.depth = best;
  }
}

void SpecDepthPolicy::record(int64_t depth, int64_t batch, double seconds,
                             const std::vector<int64_t>& accepted, double catch_up_seconds,
                             int64_t catch_up_tokens, bool pinned) {
  if (depth < 0 || depth > o_.max_depth) return;
  reads_.observe(catch_up_tokens, catch_up_seconds);
  for (int64_t k : accepted)
    for (int64_t j = 1; j <= std::min(k + 1, depth); ++j) {
      const size_t i = static_cast<size_t>(j - 1);
      const double hit = j <= k ? 1.0 : 0.0;
      // A plain mean over the first 1 / accept_alpha observations, a running average after.
      const double n = static_cast<double>(++accept_n_[i]);
      const double w = std::max(o_.accept_alpha, 1.0 / n);
      accept_[i] += w * (hit - accept_[i]);
      accept_slow_[i] += std::max(o_.slow_alpha, 1.0 / n) * (hit - accept_slow_[i]);
    }
  if (o_.accept_relax && depth == 0 && batch > 0) {
    // batch sequence-steps without an observation, each a step toward the long-run mean.
    const double keep = std::pow(1.0 - o_.accept_alpha, static_cast<double>(batch));
    for (size_t i = 0; i < accept_.size(); ++i)
      if (accept_n_[i] > 0) accept_[i] = accept_slow_[i] + keep * (accept_[i] - accept_slow_[i]);
  }
  if (!o_.adaptive || batch <= 0 || !(seconds > 0)) return;
  note_batch(batch);
  ClassState& c = state(batch);
  // A speculative step right after a plain one of the class first catches the draft up on what
  // those plain steps skipped: a price of having decoded plainly, paid once on the way back (and
  // weighed there, worth_catching_up), not a cost of every step at the depth. Averaged in, it made
  // the depths of a class that had settled on plain decoding look dearer the longer it stayed
  // there: on the H200 the shipped model at concurrency 1 (depth 3 9% ahead of plain decoding) saw
  // each probe from plain decoding pay for 100-130 positions at ~20 us each and stayed plain
  // (0.87-0.92x of the best depth; the simulated engines of the tests at 20 us per position:
  // 0.93x). Its reads still price the fit.
  const bool transition = depth > 0 && c.last_observed == 0;
  c.last_observed = depth;
  if (depth > 0 && !transition) {
    // Prompts read with their prefill cost what their catch-up would have (not part of this
    // step's wall time, so not subtracted from it below). Counted in positions and priced by the
    // fitted read cost, not as measured: a one-off cost of the first reads would otherwise stay
    // in the average for as long as it kept the class from speculating. (A caller that does not
    // count the positions read is taken at its word.)
    const double a = o_.catch_up_alpha;
    const bool read = catch_up_tokens > 0;
    CatchUp& u = c.catch_up;
    u.reads += a * ((read ? 1.0 : 0.0) + static_cast<double>(pending_reads_) - u.reads);
    u.positions += a * (static_cast<double>(catch_up_tokens + pending_positions_) - u.positions);
    u.unpriced_seconds += a * ((read ? 0.0 : catch_up_seconds) - u.unpriced_seconds);
    pending_reads_ = pending_positions_ = 0;
  }
  seconds -= catch_up_seconds;
  Timing& t = c.timing[static_cast<size_t>(depth)];
  if (++t.seen <= o_.untimed_steps) return;  // one-off costs of a new shape
  t.updated = c.steps;
  const size_t window = static_cast<size_t>(o_.time_window);
  if (c.probe_depth == depth && !pinned) {
    // A probe measures afresh: its steps replace what may be stale ones.
    // Counted only when it ends: a depth half way through its first probe has no estimate.
    t.probe.push_back(seconds);
    if (c.probe_left == 0) {
      t.window.clear();
      t.next = 0;
      for (double s : t.probe) t.add(s, window);
      t.samples += static_cast<int64_t>(t.probe.size());
      t.probe.clear();
      c.probe_depth = -1;
    }
    return;
  }
  t.add(seconds, window);
  ++t.samples;
}

// The lower median: of two samples the cheaper (a stall cannot be half of the estimate), and
// a stall among the others moves it by at most one rank.
void SpecDepthPolicy::Timing::add(double s, size_t capacity) {
  if (window.size() < capacity) {
    window.push_back(s);
  } else {
    window[next] = s;
    next = (next + 1) % capacity;
  }
  std::vector<double> v = window;
  const auto mid = v.begin() + static_cast<long>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  seconds = *mid;
}

std::vector<std::string> SpecDepthPolicy::take_changes() {
  std::vector<std::string> out;
  out.swap(changes_);
  return out;
}

}  // namespace tandem
