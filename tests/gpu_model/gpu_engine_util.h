// Helpers shared by the GPU engine tests: the shipped model on the GPU, and every request of a
// batch run to completion on an engine.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "runtime/engine.h"

namespace tandem::test {

inline std::shared_ptr<const Model> gpu_austen() {
  LoadOptions lo;
  lo.device = Device::cuda();
  lo.dtype = DType::BF16;
  lo.show_progress = false;
  return std::shared_ptr<const Model>(
      Model::load(std::string(TANDEM_SOURCE_DIR) + "/models/tandem-austen", lo));
}

// Submits every request, then drains each stream; every request must end by its length limit.
inline std::vector<std::vector<int32_t>> run_to_length(Engine& e, const std::vector<Request>& reqs,
                                                       const std::string& what) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : reqs) streams.push_back(e.submit(r));
  std::vector<std::vector<int32_t>> out;
  for (auto& s : streams) {
    std::vector<int32_t> toks;
    RequestOutput ro;
    while (s->next(ro, std::chrono::seconds(120))) {
      toks.insert(toks.end(), ro.new_tokens.begin(), ro.new_tokens.end());
      if (ro.finished) break;
    }
    EXPECT_TRUE(ro.finished && ro.finish_reason == FinishReason::kLength)
        << what << ": " << ro.error;
    out.push_back(toks);
  }
  return out;
}

}  // namespace tandem::test
