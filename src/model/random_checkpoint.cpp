#include "model/random_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/checkpoint.h"
#include "model/weight_names.h"

namespace tandem {

namespace {

// Initial values per kind of tensor: unit-scale activations through every layer, norms near 1.
Tensor random_f32(const TensorSpec& s, Rng& rng) {
  Tensor t = Tensor::empty(Shape(s.shape), DType::F32);
  float* d = t.data<float>();
  const int64_t n = t.numel();
  const bool is_norm = s.param == "weight" && s.shape.size() == 1;
  const bool is_bias = s.param != "weight";
  const double std =
      s.slot == Slot::kEmbed ? 1.0 : 1.0 / std::sqrt(static_cast<double>(s.shape.back()));
  for (int64_t i = 0; i < n; ++i) {
    const double g = rng.normal();
    d[i] = static_cast<float>(is_norm ? 1.0 + 0.1 * g : is_bias ? 0.05 * g : std * g);
  }
  return t;
}

}  // namespace

std::pair<Tensor, Tensor> quantize_fp8_block(const Tensor& w, int64_t bn, int64_t bk) {
  const int64_t N = w.size(0), K = w.size(1), sn = (N + bn - 1) / bn, sk = (K + bk - 1) / bk;
  Tensor q = Tensor::empty({N, K}, DType::F8_E4M3), s = Tensor::empty({sn, sk}, DType::F32);
  const float* src = w.data<float>();
  auto* qp = static_cast<uint8_t*>(q.raw());
  for (int64_t bi = 0; bi < sn; ++bi)
    for (int64_t bj = 0; bj < sk; ++bj) {
      float amax = 0;
      for (int64_t i = bi * bn; i < std::min(N, (bi + 1) * bn); ++i)
        for (int64_t j = bj * bk; j < std::min(K, (bj + 1) * bk); ++j)
          amax = std::max(amax, std::fabs(src[i * K + j]));
      const float scale = std::max(amax, 1e-4f) / 448.0f;  // dequant multiplier (weight_scale_inv)
      s.data<float>()[bi * sk + bj] = scale;
      for (int64_t i = bi * bn; i < std::min(N, (bi + 1) * bn); ++i)
        for (int64_t j = bj * bk; j < std::min(K, (bj + 1) * bk); ++j)
          qp[i * K + j] = f32_to_fp8_e4m3(src[i * K + j] / scale);
    }
  return {q, s};
}

std::pair<Tensor, Tensor> quantize_mxfp4(const Tensor& w, int64_t g) {
  const int64_t N = w.size(0), K = w.size(1);
  TD_CHECK(K % 2 == 0 && K % g == 0, "mxfp4 needs K ({}) divisible by the group ({})", K, g);
  Tensor q = Tensor::empty({N, K / 2}, DType::U8), s = Tensor::empty({N, K / g}, DType::U8);
  const float* src = w.data<float>();
  auto* qp = static_cast<uint8_t*>(q.raw());
  auto* sp = static_cast<uint8_t*>(s.raw());
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (int64_t i = 0; i < N; ++i)
    for (int64_t gb = 0; gb < K / g; ++gb) {
      float amax = 0;
      for (int64_t j = gb * g; j < (gb + 1) * g; ++j)
        amax = std::max(amax, std::fabs(src[i * K + j]));
      // Smallest power of two that maps amax within fp4's largest magnitude, 6.
      const int e = amax > 0 ? static_cast<int>(std::ceil(std::log2(amax / 6.0f))) : -127;
      const int biased = std::clamp(e + 127, 0, 254);
      sp[i * (K / g) + gb] = static_cast<uint8_t>(biased);
      const float scale = std::ldexp(1.0f, biased - 127);
      for (int64_t j = gb * g; j < (gb + 1) * g; ++j) {
        const float v = src[i * K + j] / scale;
        int best = 0;
        for (int c = 1; c < 8; ++c)
          if (std::fabs(std::fabs(v) - kMag[c]) < std::fabs(std::fabs(v) - kMag[best])) best = c;
        const uint8_t code = static_cast<uint8_t>(best | (v < 0 && best ? 8 : 0));
        uint8_t& byte = qp[i * (K / 2) + j / 2];
        byte = (j % 2 == 0) ? static_cast<uint8_t>((byte & 0xf0) | code)
                            : static_cast<uint8_t>((byte & 0x0f) | (code << 4));
      }
    }
  return {q, s};
}

void write_random_checkpoint(const ModelConfig& cfg, const std::string& dir,
                             const RandomCheckpointOptions& o) {
  TD_CHECK(o.dtype == "bf16" || o.dtype == "f32",
           "make-checkpoint: --dtype must be bf16 or f32, got {}", o.dtype);
  TD_CHECK(o.quant.empty() || o.quant == "fp8" || o.quant == "mxfp4",
           "make-checkpoint: --quant must be fp8 or mxfp4, got {}", o.quant);
  ModelConfig c = cfg;
  c.torch_dtype = o.dtype == "bf16" ? "bfloat16" : "float32";
  if (o.quant == "fp8") {
    c.quant.method = "fp8";
  } else if (o.quant == "mxfp4") {
    // MoE-only MXFP4, as amd/GLM-5-MXFP4: attention, the MTP layer, routers and lm_head stay bf16.
    c.quant.method = "quark";
    c.quant.group_size = 32;
    c.quant.exclude = {"lm_head",
                       "re:.*mlp.gate$",
                       "re:.*self_attn.*",
                       "re:model.layers." + std::to_string(c.mtp_layer_index()) + ".*",
                       "re:.*shared_experts.*",
                       "re:.*mlp\\.(gate|up|down)_proj$"};
  }
  const DType store = o.dtype == "bf16" ? DType::BF16 : DType::F32;
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(std::filesystem::path(dir) / "config.json");
    out << c.to_json().dump(2) << "\n";
  }
  Rng rng(o.seed);
  std::vector<std::pair<std::string, Tensor>> tensors;
  const bool glm = c.arch == Arch::kGlmMoeDsa;
  for (const TensorSpec& s : weight_name_table(c, /*include_mtp=*/true)) {
    // GLM ships no MTP embed/head (they are shared); DeepSeek ships duplicates.
    if (s.optional && glm) continue;
    Tensor w = random_f32(s, rng);
    if (s.slot == Slot::kRouterBias) {
      tensors.emplace_back(s.name(), w);  // e_score_correction_bias stays fp32
      continue;
    }
    if (expects_quantized(c, s) && o.quant == "fp8") {
      auto [q, sc] = quantize_fp8_block(w, c.quant.block_n, c.quant.block_k);
      tensors.emplace_back(s.name(), q);
      tensors.emplace_back(s.module + ".weight_scale_inv", sc);
    } else if (expects_quantized(c, s) && o.quant == "mxfp4") {
      auto [q, sc] = quantize_mxfp4(w, c.quant.group_size);
      tensors.emplace_back(s.name(), q);
      tensors.emplace_back(s.module + ".weight_scale", sc);
    } else {
      tensors.emplace_back(s.name(), store == DType::F32 ? w : w.to_dtype(store));
    }
  }
  write_checkpoint_shards(dir, tensors, o.max_shard_bytes);
}

}  // namespace tandem
