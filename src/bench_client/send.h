// Sends one benchmark request and measures it.
#pragma once

#include <chrono>

#include "bench_client/http.h"
#include "bench_client/request.h"
#include "bench_client/types.h"

namespace tandem::bench {

using Clock = std::chrono::steady_clock;

// Never throws: transport errors, HTTP errors and error events make a failed RequestOutput.
// start_time and every other time are measured from t0 (the benchmark start).
RequestOutput send_request(const Endpoint& ep, Backend backend, const DatasetRow& row,
                           int64_t output_len, const RequestOptions& opts, Clock::time_point t0);

}  // namespace tandem::bench
