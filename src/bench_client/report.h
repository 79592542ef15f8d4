// The printed result, in sglang.bench_serving's layout (labels padded to 40 columns, values to
// 10), and the JSON line appended to --output-file, with bench_serving's keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bench_client/driver.h"

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

}  // namespace tandem::bench
