#include "model/random_checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/checkpoint.h"
#include "model/quant_scheme.h"
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

QuantConfig fp8_checkpoint_quant(const ModelConfig& c) {
  QuantConfig q;
  q.method = "fp8";
  q.block_n = q.block_k = 128;
  // DeepSeek-V3 has no scale_fmt; V3.2 and the GLM-5.x FP8 releases say ue8m0.
  q.ue8m0 = c.arch != Arch::kDeepseekV3;
  if (c.arch == Arch::kGlmMoeDsa) {
    // GLM-5.x-FP8's list, "indexers_proj" included although it names no tensor (the real one is
    // indexer.weights_proj, high precision anyway): glm5-architecture.md §6.3.
    q.exclude = {"model.embed_tokens", "lm_head"};
    for (int64_t l = 0; l <= c.num_hidden_layers; ++l)
      if (c.has_indexer)
        q.exclude.push_back(fmt::format("model.layers.{}.self_attn.indexers_proj", l));
  }
  return q;
}

QuantConfig mxfp4_checkpoint_quant(const ModelConfig& c) {
  // MoE-only MXFP4, as amd/GLM-5-MXFP4 describes itself: routed experts W4A4, everything else
  // bf16 (glm5-architecture.md §6.4). The exclude list mixes Quark's two spellings: regexes for
  // the families, exact names for the dense layers' MLPs.
  QuantConfig q;
  q.method = "quark";
  q.group_size = 32;
  QuarkTensorQuant w;  // fp4, per_group 32, e8m0
  QuarkTensorQuant in = w;
  in.is_dynamic = true;
  q.global = {w, in};
  q.exclude = {"lm_head", "re:.*mlp.gate$", "re:.*self_attn.*",
               fmt::format("re:model.layers.{}.*", c.mtp_layer_index()), "re:.*shared_experts.*"};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (!c.is_moe_layer(l))
      for (const char* p : {"gate_proj", "up_proj", "down_proj"})
        q.exclude.push_back(fmt::format("model.layers.{}.mlp.{}", l, p));
  return q;
}

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

ModelConfig write_checkpoint_config(const ModelConfig& cfg, const std::string& dir,
                                    const RandomCheckpointOptions& o) {
  TD_CHECK(o.dtype == "bf16" || o.dtype == "f32",
           "make-checkpoint: --dtype must be bf16 or f32, got {}", o.dtype);
  TD_CHECK(o.quant.empty() || o.quant == "fp8" || o.quant == "mxfp4",
           "make-checkpoint: --quant must be fp8 or mxfp4, got {}", o.quant);
  ModelConfig c = cfg;
  c.torch_dtype = o.dtype == "bf16" ? "bfloat16" : "float32";
  if (o.quant == "fp8")
    c.quant = fp8_checkpoint_quant(c);
  else if (o.quant == "mxfp4")
    c.quant = mxfp4_checkpoint_quant(c);
  else
    c.quant = QuantConfig{};
  std::filesystem::create_directories(dir);
  std::ofstream out(std::filesystem::path(dir) / "config.json");
  out << c.to_json().dump(2) << "\n";
  return c;
}

void write_random_checkpoint(const ModelConfig& cfg, const std::string& dir,
                             const RandomCheckpointOptions& o) {
  const ModelConfig c = write_checkpoint_config(cfg, dir, o);
  const DType store = o.dtype == "bf16" ? DType::BF16 : DType::F32;
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
    const QuantScheme q = quant_scheme(c, s);
    if (q.format == WeightFormat::kFp8Block) {
      // Plain amax / 448 scales: scale_fmt ue8m0 is about activation scales (docs/quantization.md),
      // and nothing documents power-of-two weight scales in the published checkpoints.
      auto [qw, sc] = quantize_fp8_block(w, q.block_n, q.block_k);
      tensors.emplace_back(s.name(), qw);
      tensors.emplace_back(s.module + ".weight_scale_inv", sc);  // [ceil(N/bn), ceil(K/bk)] f32
    } else if (q.format == WeightFormat::kMxfp4) {
      auto [qw, sc] = quantize_mxfp4(w, q.block_k);
      tensors.emplace_back(s.name(), qw);                    // [N, K/2] u8, two e2m1 per byte
      tensors.emplace_back(s.module + ".weight_scale", sc);  // [N, K/32] u8 e8m0
    } else {
      tensors.emplace_back(s.name(), store == DType::F32 ? w : w.to_dtype(store));
    }
  }
  write_checkpoint_shards(dir, tensors, o.max_shard_bytes);
}

}  // namespace tandem
