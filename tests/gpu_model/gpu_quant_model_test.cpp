// Whole models with quantized weights on the GPU: random FP8 block (128 x 128, W8A8) and Quark
// MXFP4 (W4A4) checkpoints of the tiny GLM-5.2 / DeepSeek-V3.2 layouts, loaded with their weights
// kept quantized on both devices, prompt logits on the GPU (bf16 activations, the quantized
// kernels of cuda_quant.cpp) against the CPU backend (f32 activations, the contract's reference).
// A smoke test of the wiring (formats, scale layouts, activation rules reaching the kernels):
// the kernels' numerics are held to the contract by tests/ops/cuda_quant_test.cpp; here bf16
// activations against f32 move a few activation codes per linear, so the tolerance is loose.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/init.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
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

TEST(GpuQuantModel, QuantizedCheckpointsMatchTheCpu) {
  if (!init_backends()) GTEST_SKIP() << "no CUDA device";
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("tandem_gpu_quant_" + std::to_string(::getpid()));
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(40);
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 250);
  for (const char* preset : {"tiny-glm5.2", "tiny-deepseek-v3.2"})
    for (const char* quant : {"fp8", "mxfp4"}) {
      const std::string dir = (tmp / (std::string(preset) + "_" + quant)).string();
      RandomCheckpointOptions o;
      o.seed = 21;
      o.quant = quant;
      write_random_checkpoint(preset_config(preset), dir, o);
      const std::vector<float> cpu = prompt_logits(dir, Device::cpu(), prompt);
      const std::vector<float> gpu = prompt_logits(dir, Device::cuda(), prompt);
      const double err = rel_err(gpu, cpu);
      std::printf("GPU_QUANT_MODEL %-20s %-6s prompt logits rel err %.2e\n", preset, quant, err);
      EXPECT_LE(err, 8e-2) << preset << " " << quant;
    }
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);
}

}  // namespace
}  // namespace tandem::test
