#include "runtime/draft_read_cost.h"

#include <algorithm>
#include <vector>

namespace tandem {

DraftReadCost::DraftReadCost(int64_t untimed, int64_t window)
    : untimed_(untimed), window_(std::max<int64_t>(window, 2)) {}

void DraftReadCost::observe(int64_t positions, double seconds) {
  if (positions <= 0 || !(seconds > 0)) return;
  if (++seen_ <= untimed_) return;
  samples_.push_back({static_cast<double>(positions), seconds});
  if (static_cast<int64_t>(samples_.size()) > window_) samples_.pop_front();
  fit();
}

double DraftReadCost::seconds(int64_t positions) const {
  if (positions <= 0 || !known()) return 0.0;
  return fixed_ + per_position_ * static_cast<double>(positions);
}

namespace {

// The lower median: of two samples, the cheaper (a one-off cost only ever adds).
double median(std::vector<double> v) {
  const auto mid = v.begin() + static_cast<long>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

// Theil-Sen: the slope is the median of the slopes between every two samples of different
// lengths, the fixed cost the median of what each sample leaves over it. Unlike least squares, a
// few samples far off the line (a stall, a one-off cost the untimed reads did not absorb) cannot
// move it. A line that would make a short read cost less than nothing becomes one through the
// origin; reads all of one length cannot split fixed from per-position cost and are priced per
// position.
void DraftReadCost::fit() {
  std::vector<double> slopes, ratios;
  for (size_t i = 0; i < samples_.size(); ++i) {
    ratios.push_back(samples_[i].seconds / samples_[i].positions);
    for (size_t j = i + 1; j < samples_.size(); ++j)
      if (samples_[i].positions != samples_[j].positions)
        slopes.push_back((samples_[j].seconds - samples_[i].seconds) /
                         (samples_[j].positions - samples_[i].positions));
  }
  fixed_ = 0;
  per_position_ = median(ratios);
  if (slopes.empty()) return;
  const double slope = std::max(0.0, median(slopes));
  std::vector<double> rest;
  for (const Sample& x : samples_) rest.push_back(x.seconds - slope * x.positions);
  const double fixed = median(rest);
  if (fixed < 0) return;
  fixed_ = fixed;
  per_position_ = slope;
}

}  // namespace tandem
