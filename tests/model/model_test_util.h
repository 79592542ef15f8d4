// Helpers shared by the model tests: running a whole prompt through the model on the CPU with
// a private paged cache, and comparing logits.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backends/init.h"
#include "model/model.h"
#include "runtime/batch_builder.h"

namespace tandem::test {

inline std::string source_path(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/" + rel;
}

// A gtest-safe name for a preset or model name: "tiny-glm5.2" -> "tiny_glm5_2".
inline std::string test_name(std::string s) {
  for (char& ch : s)
    if (ch == '.' || ch == '-') ch = '_';
  return s;
}

// ||a - b|| / ||b|| over all elements. Outputs of different sizes, empty ones, a zero
// reference or a NaN anywhere are test failures and give +inf, so a short or missing output can
// never compare as error 0.
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) {
    ADD_FAILURE() << "rel_err: sizes differ or are zero (got " << a.size() << ", want " << b.size()
                  << ")";
    return std::numeric_limits<double>::infinity();
  }
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  if (!std::isfinite(num) || !(den > 0)) {
    ADD_FAILURE() << "rel_err: non-finite difference or all-zero reference (num " << num << ", den "
                  << den << ")";
    return std::numeric_limits<double>::infinity();
  }
  return std::sqrt(num / den);
}

// A model plus a cache big enough for a few sequences of `max_len` tokens.
struct Harness {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> cache;
  int64_t page_size;
  int64_t next_page = 0;

  // kv_dtype: the cache's rows, f32 (the CPU compute dtype) or F8_E4M3 (the FP8 rows).
  Harness(const std::string& dir, int64_t max_tokens, int64_t page_size_ = 16, bool mtp = true,
          DType kv_dtype = DType::F32)
      : page_size(page_size_) {
    init_backends();
    LoadOptions lo;
    lo.load_mtp = mtp;
    lo.show_progress = false;
    model = Model::load(dir, lo);
    KvCacheOptions ko;
    ko.page_size = page_size;
    ko.num_pages = (max_tokens + page_size - 1) / page_size;
    ko.with_mtp = mtp;
    ko.dtype = kv_dtype;
    cache = std::make_unique<KvCache>(model->config(), ko);
  }

  // Fresh pages for a sequence of up to len tokens (pages are never reused within a test).
  std::vector<int32_t> pages_for(int64_t len) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < (len + page_size - 1) / page_size; ++i)
      p.push_back(static_cast<int32_t>(next_page++));
    EXPECT_LE(next_page, cache->num_pages()) << "test cache too small";
    return p;
  }

  ForwardResult run(ForwardMode mode, const std::vector<int32_t>& pages, int64_t start,
                    const std::vector<int32_t>& tokens, bool all_logits) {
    SequenceChunk ch{&pages, start, tokens, all_logits};
    ForwardBatch fb = build_forward_batch(mode, {ch}, page_size, Device::cpu());
    Workspace ws(Device::cpu());
    return model->forward(ws, fb, *cache);
  }
};

}  // namespace tandem::test
