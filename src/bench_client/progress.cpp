#include "bench_client/progress.h"

#include <string>

namespace tandem::bench {

ProgressBar::ProgressBar(int64_t total, bool enabled, std::FILE* out)
    : total_(total), enabled_(enabled), out_(out), start_(std::chrono::steady_clock::now()) {
  if (enabled_) {
    std::lock_guard<std::mutex> lock(mu_);
    draw();
  }
}

void ProgressBar::tick() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++done_;
  const auto now = std::chrono::steady_clock::now();
  if (done_ == total_ || now - last_draw_ >= std::chrono::milliseconds(100)) draw();
}

void ProgressBar::finish() {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (drawn_ != done_) draw();
  std::fputc('\n', out_);
  std::fflush(out_);
  enabled_ = false;
}

void ProgressBar::draw() {
  constexpr int kWidth = 30;
  last_draw_ = std::chrono::steady_clock::now();
  drawn_ = done_;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * done_ / total_) : kWidth;
  const double s = std::chrono::duration<double>(last_draw_ - start_).count();
  const std::string bar = std::string(static_cast<size_t>(filled), '#') +
                          std::string(static_cast<size_t>(kWidth - filled), '.');
  std::fprintf(out_, "\r%6lld/%lld [%s] %6.1fs", static_cast<long long>(done_),
               static_cast<long long>(total_), bar.c_str(), s);
  std::fflush(out_);
}

}  // namespace tandem::bench
