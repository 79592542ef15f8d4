// A benchmark's results as one self-contained SVG (no scripts, no fonts, no external requests):
// output tok/s and TPOT against concurrency, plain and MTP, and the per-position acceptance of
// the MTP runs. Written by `bench-offline --svg` and `tandem bench --svg`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::bench {

struct BenchChart {
  std::string title;
  std::vector<int64_t> concurrency;  // x of every series, ascending; 0: no limit (drawn last)
  std::vector<double> plain_tok_s, mtp_tok_s;            // [concurrency]; empty: not run
  std::vector<double> plain_tpot_ms, mtp_tpot_ms;        // [concurrency]; empty: not run
  std::vector<std::vector<double>> accept_per_position;  // [concurrency][draft position]
};

std::string render_bench_svg(const BenchChart& c);

}  // namespace tandem::bench
