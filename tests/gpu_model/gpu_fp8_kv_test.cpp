// The FP8 KV cache through whole models on the GPU: the default model's logits with FP8 rows
// against the same GPU model with bf16 rows and against the CPU with FP8 rows (prefill past
// index_topk, so the FP8 indexer selects, then teacher-forced decode steps); and the engine on
// an FP8 cache with CUDA graphs and speculation, token for token against eager.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/init.h"
#include "gpu_engine_util.h"
#include "model/model.h"
#include "model/safetensors.h"
#include "runtime/batch_builder.h"
#include "runtime/engine.h"

namespace tandem::test {
namespace {

std::string src(const std::string& rel) {
  return std::string(TANDEM_SOURCE_DIR) + "/" + rel;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return a.size() == b.size() && den > 0 ? std::sqrt(num / den) : INFINITY;
}

// A model and its cache on one device, with the given KV dtype.
struct KvRun {
  std::unique_ptr<Model> model;
  std::unique_ptr<KvCache> cache;
  Device dev;
  int64_t next_page = 0;
  KvRun(Device d, DType kv, int64_t pages) : dev(d) {
    LoadOptions lo;
    lo.device = d;
    lo.dtype = d.is_cpu() ? DType::F32 : DType::BF16;
    lo.load_mtp = false;
    lo.show_progress = false;
    model = Model::load(src("models/tandem-austen"), lo);
    KvCacheOptions ko;
    ko.page_size = 16;
    ko.num_pages = pages;
    ko.dtype = kv;
    ko.device = d;
    ko.with_mtp = false;
    cache = std::make_unique<KvCache>(model->config(), ko);
  }
  std::vector<int32_t> pages_for(int64_t len) {
    std::vector<int32_t> p;
    for (int64_t i = 0; i < (len + 15) / 16; ++i) p.push_back(static_cast<int32_t>(next_page++));
    return p;
  }
  std::vector<float> logits(ForwardMode mode, const std::vector<int32_t>& pages, int64_t start,
                            const std::vector<int32_t>& toks, bool all) {
    SequenceChunk ch{&pages, start, toks, all};
    ForwardBatch fb = build_forward_batch(mode, {ch}, 16, dev);
    Workspace ws(dev);
    return to_float_vector(model->forward(ws, fb, *cache).logits);
  }
};

// The CPU measures 1.4e-2 (prefill) and 2.6e-2 (decode) for FP8 against f32 rows on this model
// (tests/model/fp8_kv_test.cpp). Measured on the H200 (2026-12-01): worst 7.6e-2 against the
// GPU's bf16 rows and 7.8e-2 against the CPU's FP8 rows, both at one decode step (prompt 2, step
// 11; the cause is not yet isolated); every other row is under 6e-2.
constexpr double kFp8Tol = 1e-1;

TEST(GpuFp8Kv, DefaultModelLogitsNearBf16RowsAndTheCpu) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  auto gold = SafetensorsFile::open(src("tests/data/austen/golden.safetensors"));
  KvRun g8(Device::cuda(), DType::F8_E4M3, 256), g16(Device::cuda(), DType::BF16, 256),
      c8(Device::cpu(), DType::F8_E4M3, 256);
  const int64_t V = g8.model->config().vocab_size;
  double worst[2] = {0, 0};  // vs GPU bf16 rows, vs CPU FP8 rows
  for (int p = 0; gold->has("prompt_" + std::to_string(p)); ++p) {
    const std::vector<int32_t> prompt = to_int_vector(gold->tensor("prompt_" + std::to_string(p)));
    const int64_t n = static_cast<int64_t>(prompt.size()), steps = 16;
    ASSERT_GT(n, g8.model->config().index_topk);
    KvRun* runs[3] = {&g8, &g16, &c8};
    std::vector<int32_t> pages[3];
    std::vector<float> l[3];
    for (int r = 0; r < 3; ++r) {
      pages[r] = runs[r]->pages_for(n + steps);
      l[r] = runs[r]->logits(ForwardMode::kExtend, pages[r], 0, prompt, true);
    }
    for (int k = 0; k < 2; ++k) {
      const double e = rel(l[0], l[k + 1]);
      worst[k] = std::max(worst[k], e);
      EXPECT_LT(e, kFp8Tol) << "prompt " << p << " prefill, vs " << (k ? "CPU fp8" : "GPU bf16");
    }
    int32_t next = static_cast<int32_t>(std::max_element(l[2].end() - V, l[2].end()) -
                                        (l[2].end() - V));  // the CPU's choice
    for (int64_t i = 0; i < steps; ++i) {
      for (int r = 0; r < 3; ++r)
        l[r] = runs[r]->logits(ForwardMode::kDecode, pages[r], n + i, {next}, false);
      for (int k = 0; k < 2; ++k) {
        const double e = rel(l[0], l[k + 1]);
        worst[k] = std::max(worst[k], e);
        EXPECT_LT(e, kFp8Tol) << "prompt " << p << " decode " << i;
      }
      next = static_cast<int32_t>(std::max_element(l[2].begin(), l[2].end()) - l[2].begin());
    }
  }
  std::printf("  GPU FP8 cache, worst logits rel err: vs GPU bf16 rows %.2e, vs CPU FP8 %.2e\n",
              worst[0], worst[1]);
}

// The FP8 kernels are graph-capturable and replay bit for bit: the engine with CUDA graphs and
// MTP speculation commits exactly the eager engine's tokens (deterministic mode).
TEST(GpuFp8Kv, EngineGraphsAndSpeculationMatchEager) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  std::shared_ptr<const Model> model = gpu_austen();
  std::vector<Request> reqs;
  for (int i = 0; i < 6; ++i) {
    Request r;
    for (int j = 0; j < 40 + 17 * i; ++j) r.prompt.push_back((37 * i + 11 * j) % 4000);
    r.max_new_tokens = 24;
    reqs.push_back(r);
  }
  std::vector<std::vector<int32_t>> out[2];
  for (bool graphs : {true, false}) {
    EngineOptions o;
    o.kv_cache_fp8 = true;
    o.deterministic = true;
    o.workspace_mb = 512;
    o.disable_cuda_graph = !graphs;
    o.spec.algorithm = "EAGLE";
    o.spec.num_steps = 3;
    o.spec.num_draft_tokens = 4;
    Engine e(model, o);
    out[graphs] = run_to_length(e, reqs, graphs ? "graphs" : "eager");
  }
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(out[1][i], out[0][i]) << "request " << i;
}

}  // namespace
}  // namespace tandem::test
