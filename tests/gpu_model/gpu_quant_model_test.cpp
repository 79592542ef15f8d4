// Whole models with quantized weights on the GPU: the trained default model quantized as the
// released checkpoints are (make-checkpoint --from: FP8 128 x 128 blocks W8A8 with ue8m0
// activation scales; Quark MXFP4 W4A4 experts), loaded with their weights kept quantized on both
// devices; prompt logits on the GPU (bf16 activations, the kernels of cuda_quant.cpp) against the
// CPU backend (f32 activations, the contract's reference), beside the same comparison for the bf16
// model. Random tiny checkpoints are not used here: their layers amplify the few activation codes
// that bf16 rounding moves into errors of 40-60% (measured), which says nothing about the wiring.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/init.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/quantize_checkpoint.h"
#include "runtime/batch_builder.h"

namespace tandem::test {
namespace {

// Prompt logits of every position through a model and its own paged cache on one device.
std::vector<float> prompt_logits(const std::string& dir, Device d,
                                 const std::vector<int32_t>& prompt) {
  LoadOptions lo;
  lo.device = d;
  lo.dtype = d.is_cpu() ? DType::F32 : DType::BF16;
  lo.show_progress = false;
  lo.load_mtp = false;
  lo.keep_quantized = true;
  auto model = Model::load(dir, lo);
  const int64_t ps = 16, len = static_cast<int64_t>(prompt.size());
  KvCacheOptions ko;
  ko.page_size = ps;
  ko.num_pages = (len + ps - 1) / ps;
  ko.dtype = lo.dtype;
  ko.device = d;
  KvCache cache(model->config(), ko);
  std::vector<int32_t> pages;
  for (int64_t i = 0; i < ko.num_pages; ++i) pages.push_back(static_cast<int32_t>(i));
  SequenceChunk ch{&pages, 0, prompt, true};
  ForwardBatch fb = build_forward_batch(ForwardMode::kExtend, {ch}, ps, d);
  Workspace ws(d);
  const ForwardResult r = model->forward(ws, fb, cache);
  return to_float_vector(r.logits);
}

double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

std::string source(const std::string& rel) {
  const char* env = std::getenv("TANDEM_SOURCE_DIR");  // the GPU machine's checkout
  return (std::filesystem::path(env && *env ? env : TANDEM_SOURCE_DIR) / rel).string();
}

TEST(GpuQuantModel, QuantizedDefaultModelMatchesTheCpu) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("tandem_gpu_quant_" + std::to_string(::getpid()));
  const std::string bf16 = source("models/tandem-austen");
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(200);  // past index_topk (64): the indexer selects
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 4000);
  double base = 0;
  for (const char* quant : {"bf16", "fp8", "mxfp4"}) {
    std::string dir = bf16;
    if (std::string(quant) != "bf16") {
      dir = (tmp / quant).string();
      quantize_checkpoint(bf16, dir, quant);
    }
    const std::vector<float> cpu = prompt_logits(dir, Device::cpu(), prompt);
    const std::vector<float> gpu = prompt_logits(dir, Device::cuda(), prompt);
    const double err = rel_err(gpu, cpu);
    if (std::string(quant) == "bf16") base = err;
    std::printf("GPU_QUANT_MODEL tandem-austen %-6s prompt logits rel err GPU vs CPU %.2e\n", quant,
                err);
    // Measured on the H200 (2026-12-01, suite on 93b6d6e): bf16 7.7e-3, FP8 W8A8 2.9e-2, MXFP4
    // W4A4 5.3e-2. Quantized activations add the codes that bf16 rounding moves across a rounding
    // edge (more on e2m1's coarse grid); the kernels themselves match the contract bit for bit on
    // the activation codes (tests/ops/cuda_quant_test.cpp). About twice the measured values:
    const double tol = std::string(quant) == "bf16"  ? 2e-2
                       : std::string(quant) == "fp8" ? 6e-2
                                                     : 1e-1;
    EXPECT_LE(err, tol) << quant;
  }
  EXPECT_GT(base, 0.0);
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
}

}  // namespace
}  // namespace tandem::test
