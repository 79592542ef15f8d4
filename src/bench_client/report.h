// The printed result, in sglang.bench_serving's layout (labels padded to 40 columns, values to
// 10), the JSON line appended to --output-file, with bench_serving's keys, and the chart of
// --svg.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_client/driver.h"
#include "bench_client/svg_chart.h"

namespace tandem::bench {

struct RunDescription {
  Backend backend = Backend::kSglang;
  std::string dataset_name = "random";
  std::string model;
  double request_rate = INFINITY;
  int64_t max_concurrency = 0;  // 0: not set
  int64_t num_prompts = 0;
  int64_t random_input_len = 0;
  int64_t random_output_len = 0;
  double random_range_ratio = 0;
};

// Python's str(float): "inf", "4.0", "0.25".
std::string py_float(double v);

std::string format_report(const RunDescription& run, const BenchResult& res);
nlohmann::json result_json(const RunDescription& run, const BenchResult& res);

// `tandem bench --svg`: output tok/s and mean TPOT of each run against its --max-concurrency
// (0, no limit, drawn last), as the MTP series when the server reported an accept length for
// every run, else as the plain series; the per-position acceptance of the runs where the server
// published it.
BenchChart bench_chart(const std::string& title, const std::vector<int64_t>& max_concurrency,
                       const std::vector<BenchResult>& results);

}  // namespace tandem::bench
