// A one-line progress bar on stderr ("  37/100 [#######.............]  4.2s"), redrawn at most
// ten times a second. Safe to tick from many threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>

namespace tandem::bench {

class ProgressBar {
 public:
  ProgressBar(int64_t total, bool enabled, std::FILE* out = stderr);
  void tick();    // one more request done
  void finish();  // final redraw and newline

 private:
  void draw();

  int64_t total_;
  bool enabled_;
  std::FILE* out_;
  std::mutex mu_;
  int64_t done_ = 0;
  int64_t drawn_ = -1;  // done_ at the last redraw
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tandem::bench
