// Single-sequence generation over the paged cache: prefill (optionally in chunks), then one
// decode step per token. The serving engine batches many sequences; this is the plain loop the
// CLI's `generate` and the model tests use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/kv_cache.h"
#include "model/model.h"
#include "runtime/page_allocator.h"
#include "runtime/sampler.h"

namespace tandem {

struct GenerateRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 32;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these
  int64_t prefill_chunk = 0;      // 0: the whole prompt in one forward
};

struct GenerateResult {
  std::vector<int32_t> tokens;             // generated tokens (stop token included)
  std::vector<std::vector<float>> logits;  // [step][V]: the distribution each token came from
  bool stopped = false;                    // ended on a stop token
};

class Generator {
 public:
  // Sizes a private cache for max_len tokens.
  // kv_fp8: the cache holds FP8 rows (--kv-cache-dtype fp8_e4m3) instead of the compute dtype.
  Generator(const Model& model, int64_t max_len, int64_t page_size = 16, bool kv_fp8 = false);

  // on_token returns false to stop early.
  GenerateResult generate(const GenerateRequest& req,
                          const std::function<bool(int32_t)>& on_token = {});

 private:
  const Model& model_;
  int64_t page_size_;
  std::unique_ptr<KvCache> cache_;
  PageAllocator pages_;
};

}  // namespace tandem
