// Quantization rules: parsing every quantization_config layout and the online flags, and
// resolving them per tensor through the name table (quant_scheme), including the MTP layer's
// checkpoint prefix, per-expert and fused-expert rules, and stored dtypes that contradict them.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/rng.h"
#include "model/checkpoint.h"
#include "model/online_quant.h"
#include "model/presets.h"
#include "model/quant_scheme.h"
#include "model/random_checkpoint.h"

namespace tandem {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The MXFP4 spec as AMD's exporter writes it (glm5-architecture.md §6.4).
json mx_spec(bool dynamic) {
  return {{"dtype", "fp4"},
          {"qscheme", "per_group"},
          {"group_size", 32},
          {"ch_axis", -1},
          {"scale_format", "e8m0"},
          {"scale_calculation_mode", "even"},
          {"round_method", "half_even"},
          {"is_dynamic", dynamic},
          {"observer_cls", "PerBlockMXObserver"}};
}

json quark_json(json exclude, json layer_cfg = json::object(), json type_cfg = json::object()) {
  return {{"quant_method", "quark"},
          {"quant_mode", "eager_mode"},
          {"version", "0.11"},
          {"export", {{"pack_method", "reorder"}, {"weight_format", "real_quantized"}}},
          {"global_quant_config",
           {{"weight", mx_spec(false)},
            {"input_tensors", mx_spec(true)},
            {"output_tensors", nullptr},
            {"bias", nullptr}}},
          {"layer_quant_config", layer_cfg},
          {"layer_type_quant_config", type_cfg},
          {"kv_cache_quant_config", json::object()},
          {"exclude", exclude}};
}

ModelConfig with_quant(const std::string& preset, const json& q) {
  ModelConfig c = preset_config(preset);
  c.quant = parse_quant_config(q, "test config.json");
  return c;
}

// The name table does not depend on the quantization config; built once per model shape.
const std::vector<TensorSpec>& table_of(const ModelConfig& c) {
  static std::map<std::string, std::vector<TensorSpec>> cache;
  const std::string key =
      fmt::format("{}/{}/{}", c.architecture, c.num_hidden_layers, c.hidden_size);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, weight_name_table(c, true)).first;
  return it->second;
}

TensorSpec spec(const ModelConfig& c, const std::string& name) {
  for (const auto& s : table_of(c))
    if (s.name() == name) return s;
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

QuantScheme scheme(const ModelConfig& c, const std::string& name) {
  return quant_scheme(c, spec(c, name));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

TEST(QuantRules, MtpPrefixExcludeKeepsTheMtpLayerHighPrecision) {
  // The same rule in Quark's regex spelling, fp8's prefix spelling and a glob.
  const json fp8 = {{"quant_method", "fp8"},
                    {"weight_block_size", {128, 128}},
                    {"modules_to_not_convert", {"model.layers.78"}}};
  for (const json& q :
       {quark_json({"re:model.layers.78.*"}), fp8, quark_json({"model.layers.78.*"})}) {
    const ModelConfig c = with_quant("glm5.2", q);
    int mtp = 0;
    for (const auto& s : weight_name_table(c, true)) {
      if (s.layer != 78) continue;
      const QuantScheme r = quant_scheme(c, s);
      EXPECT_EQ(r.format, WeightFormat::kDense) << s.name() << " " << q.dump();
      ++mtp;
    }
    EXPECT_GT(mtp, 3 * 256);  // attention, indexer, experts, eh_proj, norms
    for (const char* n : {"model.layers.78.eh_proj.weight", "model.layers.78.enorm.weight",
                          "model.layers.78.hnorm.weight", "model.layers.78.shared_head.norm.weight",
                          "model.layers.78.self_attn.q_a_proj.weight",
                          "model.layers.78.mlp.experts.0.up_proj.weight",
                          "model.layers.78.self_attn.indexer.wk.weight"})
      EXPECT_EQ(scheme(c, n).format, WeightFormat::kDense) << n;
    // The rule names layer 78 only: the main model's layers stay quantized.
    EXPECT_NE(scheme(c, "model.layers.77.mlp.experts.0.up_proj.weight").format,
              WeightFormat::kDense);
    EXPECT_NE(scheme(c, "model.layers.7.self_attn.q_a_proj.weight").format, WeightFormat::kDense);
  }
}

TEST(QuantRules, PerExpertLeafExcludeAppliesToThatExpert) {
  const ModelConfig c =
      with_quant("glm5.2", quark_json({"model.layers.78.mlp.experts.17.down_proj"}));
  const QuantScheme e17 = scheme(c, "model.layers.78.mlp.experts.17.down_proj.weight");
  EXPECT_EQ(e17.format, WeightFormat::kDense);
  EXPECT_TRUE(has(e17.rule, "exclude 'model.layers.78.mlp.experts.17.down_proj'")) << e17.rule;
  EXPECT_EQ(scheme(c, "model.layers.78.mlp.experts.16.down_proj.weight").format,
            WeightFormat::kMxfp4);
  EXPECT_EQ(scheme(c, "model.layers.78.mlp.experts.170.down_proj.weight").format,
            WeightFormat::kMxfp4);
  EXPECT_EQ(scheme(c, "model.layers.78.mlp.experts.17.gate_proj.weight").format,
            WeightFormat::kMxfp4);
  EXPECT_EQ(scheme(c, "model.layers.77.mlp.experts.17.down_proj.weight").format,
            WeightFormat::kMxfp4);
}

TEST(QuantRules, MixedExpertExcludesLoadTheFusedTensorDense) {
  const ModelConfig c =
      with_quant("glm5.2", quark_json({"model.layers.78.mlp.experts.17.down_proj"}));
  std::vector<TensorSpec> down, gate_up;
  for (const auto& s : weight_name_table(c, true)) {
    if (s.layer != 78) continue;
    if (s.slot == Slot::kExpertDown) down.push_back(s);
    if (s.slot == Slot::kExpertGate || s.slot == Slot::kExpertUp) gate_up.push_back(s);
  }
  ASSERT_EQ(down.size(), 256u);
  // One excluded expert of 256: the stacked [E, D, I] tensor cannot mix formats, so it is dense.
  const QuantScheme d = fused_quant_scheme(c, down, "model.layers.78.mlp.experts.down_proj");
  EXPECT_EQ(d.format, WeightFormat::kDense);
  EXPECT_TRUE(has(d.rule, "1 of 256 parts differ")) << d.rule;
  EXPECT_TRUE(has(d.rule, "experts.17.down_proj")) << d.rule;
  // gate|up of the same layer is untouched by the rule and stays MXFP4 W4A4.
  const QuantScheme gu = fused_quant_scheme(c, gate_up, "model.layers.78.mlp.experts.gate_up_proj");
  EXPECT_EQ(gu.format, WeightFormat::kMxfp4);
  EXPECT_EQ(gu.act, QuantActivation::kMxfp4);
}

TEST(QuantRules, FusedExpertsPrefixRuleAppliesToEveryExpert) {
  // A plain prefix, the fused runtime name in HF's spelling and a glob of the fused prefix.
  const ModelConfig c = with_quant(
      "glm5.2", quark_json({"model.layers.3.mlp.experts", "model.layers.4.mlp.experts.down_proj",
                            "*.layers.5.mlp.experts"}));
  for (int64_t e : {0, 17, 255}) {
    for (const char* p : {"gate_proj", "up_proj", "down_proj"}) {
      EXPECT_EQ(scheme(c, fmt::format("model.layers.3.mlp.experts.{}.{}.weight", e, p)).format,
                WeightFormat::kDense);
      EXPECT_EQ(scheme(c, fmt::format("model.layers.5.mlp.experts.{}.{}.weight", e, p)).format,
                WeightFormat::kDense);
    }
    EXPECT_EQ(scheme(c, fmt::format("model.layers.4.mlp.experts.{}.down_proj.weight", e)).format,
              WeightFormat::kDense);
    EXPECT_EQ(scheme(c, fmt::format("model.layers.4.mlp.experts.{}.up_proj.weight", e)).format,
              WeightFormat::kMxfp4);
  }
  // "experts" is a whole segment: the shared experts are another module.
  EXPECT_EQ(scheme(c, "model.layers.3.mlp.shared_experts.down_proj.weight").format,
            WeightFormat::kMxfp4);
  EXPECT_EQ(scheme(c, "model.layers.30.mlp.experts.1.down_proj.weight").format,
            WeightFormat::kMxfp4);
}

TEST(QuantRules, layer_quant_config_keys_remapped_without_mutation) {
  // Keys in checkpoint names: the MTP layer's experts weight-only, one expert of layer 3 and a
  // whole fused experts module of layer 4 unquantized, layer 5's experts by their fused name.
  json weight_only = {{"weight", mx_spec(false)}, {"input_tensors", nullptr}};
  json none = {{"weight", nullptr}, {"input_tensors", nullptr}};
  const json q = quark_json({"lm_head"}, {{"model.layers.78.mlp.experts.*", weight_only},
                                          {"model.layers.3.mlp.experts.9.up_proj", none},
                                          {"model.layers.4.mlp.experts", none},
                                          {"model.layers.5.mlp.experts.down_proj", weight_only}});
  const ModelConfig c = with_quant("glm5.2", q);
  const QuantConfig before = c.quant;
  // The draft (MTP) and target both resolve from the same object, in either order, twice.
  for (int pass = 0; pass < 2; ++pass) {
    const QuantScheme mtp = scheme(c, "model.layers.78.mlp.experts.5.gate_proj.weight");
    EXPECT_EQ(mtp.format, WeightFormat::kMxfp4);
    EXPECT_EQ(mtp.act, QuantActivation::kNone);
    EXPECT_TRUE(has(mtp.rule, "layer_quant_config 'model.layers.78.mlp.experts.*'")) << mtp.rule;
    const QuantScheme main = scheme(c, "model.layers.77.mlp.experts.5.gate_proj.weight");
    EXPECT_EQ(main.act, QuantActivation::kMxfp4);
    EXPECT_EQ(main.rule, "global_quant_config");
    EXPECT_EQ(scheme(c, "model.layers.3.mlp.experts.9.up_proj.weight").format,
              WeightFormat::kDense);
    EXPECT_EQ(scheme(c, "model.layers.3.mlp.experts.9.gate_proj.weight").format,
              WeightFormat::kMxfp4);
    EXPECT_EQ(scheme(c, "model.layers.4.mlp.experts.200.down_proj.weight").format,
              WeightFormat::kDense);
    const QuantScheme l5 = scheme(c, "model.layers.5.mlp.experts.8.down_proj.weight");
    EXPECT_EQ(l5.act, QuantActivation::kNone);
    EXPECT_TRUE(has(l5.rule, "experts.down_proj")) << l5.rule;
    EXPECT_EQ(scheme(c, "model.layers.5.mlp.experts.8.up_proj.weight").act,
              QuantActivation::kMxfp4);
  }
  for (const auto& s : weight_name_table(c, true)) (void)quant_scheme(c, s);
  EXPECT_TRUE(c.quant == before);
  EXPECT_EQ(quant_config_to_json(c.quant), quant_config_to_json(before));
  ASSERT_EQ(c.quant.layer_rules.size(), 4u);
  EXPECT_EQ(c.quant.layer_rules[3].first, "model.layers.78.mlp.experts.*");  // keys as written
}

TEST(QuantRules, RuleSpellings) {
  // Exact names and segment runs (modules_to_not_convert prefixes, bare suffixes).
  EXPECT_TRUE(quant_rule_matches("lm_head", "lm_head"));
  EXPECT_TRUE(quant_rule_matches("lm_head", "model.layers.78.shared_head.lm_head"));
  EXPECT_TRUE(quant_rule_matches("model.embed_tokens", "model.embed_tokens"));
  EXPECT_TRUE(quant_rule_matches("model.layers.1", "model.layers.1.self_attn.o_proj"));
  EXPECT_FALSE(quant_rule_matches("model.layers.1", "model.layers.12.self_attn.o_proj"));
  EXPECT_TRUE(quant_rule_matches("mlp.gate", "model.layers.5.mlp.gate"));
  EXPECT_FALSE(quant_rule_matches("mlp.gate", "model.layers.5.mlp.gate_proj"));
  EXPECT_FALSE(quant_rule_matches("gate", "model.layers.5.mlp.gate_proj"));
  // re: is Python's re.match: anchored at the start, open at the end unless the regex says $.
  EXPECT_TRUE(quant_rule_matches("re:.*mlp.gate$", "model.layers.5.mlp.gate"));
  EXPECT_FALSE(quant_rule_matches("re:.*mlp.gate$", "model.layers.5.mlp.gate_proj"));
  EXPECT_TRUE(quant_rule_matches("re:.*mlp.gate", "model.layers.5.mlp.gate_proj"));
  EXPECT_TRUE(quant_rule_matches("re:model.layers.78.*", "model.layers.78.eh_proj"));
  EXPECT_FALSE(quant_rule_matches("re:layers.78", "model.layers.78.eh_proj"));
  EXPECT_TRUE(quant_rule_matches("re:.*self_attn.*", "model.layers.2.self_attn.indexer.wk"));
  // Globs: fnmatch over the whole name, '*' crossing dots.
  EXPECT_TRUE(quant_rule_matches("*.mlp.gate", "model.layers.5.mlp.gate"));
  EXPECT_FALSE(quant_rule_matches("*.mlp.gate", "model.layers.5.mlp.gate_proj"));
  EXPECT_TRUE(quant_rule_matches("*expert*", "model.layers.5.mlp.shared_experts.up_proj"));
  EXPECT_TRUE(quant_rule_matches("model.layers.?.mlp.*", "model.layers.7.mlp.down_proj"));
  EXPECT_FALSE(quant_rule_matches("model.layers.?.mlp.*", "model.layers.17.mlp.down_proj"));
  EXPECT_TRUE(quant_rule_matches("model.layers.[0-2].mlp.*", "model.layers.2.mlp.up_proj"));
  EXPECT_FALSE(quant_rule_matches("model.layers.[!0-2].mlp.*", "model.layers.2.mlp.up_proj"));
  // Through the table: excludes in each spelling keep exactly their modules high precision.
  const ModelConfig c =
      with_quant("tiny-glm5.2", {{"quant_method", "fp8"},
                                 {"weight_block_size", {128, 128}},
                                 {"modules_to_not_convert", {"model.layers.0.mlp", "o_proj"}},
                                 {"ignored_layers", {"re:model.layers.1.self_attn.kv_.*"}}});
  EXPECT_EQ(scheme(c, "model.layers.0.mlp.down_proj.weight").format, WeightFormat::kDense);
  EXPECT_EQ(scheme(c, "model.layers.1.self_attn.o_proj.weight").format, WeightFormat::kDense);
  EXPECT_EQ(scheme(c, "model.layers.1.self_attn.kv_b_proj.weight").format, WeightFormat::kDense);
  EXPECT_EQ(scheme(c, "model.layers.1.self_attn.q_b_proj.weight").format, WeightFormat::kFp8Block);
  EXPECT_EQ(scheme(c, "model.layers.0.self_attn.kv_b_proj.weight").format, WeightFormat::kFp8Block);
  EXPECT_TRUE(has(scheme(c, "model.layers.1.self_attn.kv_b_proj.weight").rule, "re:model"));
}

TEST(QuantRules, AlwaysHighPrecisionWhateverTheConfig) {
  const ModelConfig c = with_quant("tiny-glm5.2", quark_json(json::array()));
  for (const auto& s : weight_name_table(c, true)) {
    const QuantScheme q = quant_scheme(c, s);
    const WeightFormat want =
        always_high_precision(s.slot) || !s.linear ? WeightFormat::kDense : WeightFormat::kMxfp4;
    EXPECT_EQ(q.format, want) << s.name();
  }
}

TEST(QuantRules, StoredDtypeContradictingTheRules) {
  const ModelConfig c = with_quant("tiny-glm5.2", {{"quant_method", "fp8"},
                                                   {"weight_block_size", {128, 128}},
                                                   {"modules_to_not_convert", {"o_proj"}}});
  const TensorSpec qa = spec(c, "model.layers.1.self_attn.q_a_proj.weight");  // FP8 expected
  const TensorSpec o = spec(c, "model.layers.1.self_attn.o_proj.weight");     // dense expected
  const QuantScheme sqa = quant_scheme(c, qa), so = quant_scheme(c, o);
  // As expected: no warning.
  StorageDecision d = resolve_storage(c, qa, sqa, {DType::F8_E4M3, true, false});
  EXPECT_EQ(d.format, WeightFormat::kFp8Block);
  EXPECT_EQ(d.warning, "");
  // bf16 where FP8 was expected: dense, warned, naming tensor and rule.
  d = resolve_storage(c, qa, sqa, {DType::BF16, false, false});
  EXPECT_EQ(d.format, WeightFormat::kDense);
  EXPECT_TRUE(has(d.warning, qa.name()) && has(d.warning, "weight_block_size")) << d.warning;
  // FP8 with its scale where the exclude list says dense: FP8, warned.
  d = resolve_storage(c, o, so, {DType::F8_E4M3, true, false});
  EXPECT_EQ(d.format, WeightFormat::kFp8Block);
  EXPECT_EQ(d.block_n, 128);
  EXPECT_TRUE(has(d.warning, "modules_to_not_convert 'o_proj'")) << d.warning;
  // Packed FP4 with its e8m0 scale: MXFP4, warned.
  d = resolve_storage(c, qa, sqa, {DType::U8, false, true});
  EXPECT_EQ(d.format, WeightFormat::kMxfp4);
  EXPECT_NE(d.warning, "");
  // Ambiguous: errors name the tensor and the rule.
  std::string e = error_of([&] { resolve_storage(c, qa, sqa, {DType::F8_E4M3, false, false}); });
  EXPECT_TRUE(has(e, qa.name()) && has(e, "weight_scale_inv") && has(e, "weight_block_size")) << e;
  e = error_of([&] { resolve_storage(c, o, so, {DType::U8, false, false}); });
  EXPECT_TRUE(has(e, o.name()) && has(e, "weight_scale") && has(e, "'o_proj'")) << e;
  e = error_of([&] { resolve_storage(c, o, so, {DType::BF16, true, false}); });
  EXPECT_TRUE(has(e, o.name()) && has(e, "ambiguous")) << e;
  e = error_of([&] { resolve_storage(c, qa, sqa, {DType::I32, false, false}); });
  EXPECT_TRUE(has(e, qa.name()) && has(e, "i32")) << e;
  const TensorSpec norm = spec(c, "model.layers.1.input_layernorm.weight");
  e = error_of([&] {
    resolve_storage(c, norm, quant_scheme(c, norm), {DType::F8_E4M3, true, false});
  });
  EXPECT_TRUE(has(e, norm.name()) && has(e, "not a linear weight")) << e;
  // Online: bf16 is what is expected, and it is quantized at load.
  ModelConfig on = preset_config("tiny-glm5.2");
  on.quant = apply_online_quant(on.quant, parse_online_quant("fp8", ""), "test");
  d = resolve_storage(on, qa, quant_scheme(on, qa), {DType::BF16, false, false});
  EXPECT_TRUE(d.quantize_at_load);
  EXPECT_EQ(d.warning, "");
}

const char* kPtpcFlag =
    R"({"online_quant_config":{"global_quant_config":"ptpc_fp8","exclude_layer":["lm_head","model.embed_tokens","*.mlp.gate","*expert*"]}})";

TEST(QuantRules, PtpcOnlineConfigParsesAndItsGlobsApply) {
  const OnlineQuantRequest r = parse_online_quant("", kPtpcFlag);
  EXPECT_EQ(r.scheme, "ptpc_fp8");
  EXPECT_EQ(r.exclude,
            (std::vector<std::string>{"lm_head", "model.embed_tokens", "*.mlp.gate", "*expert*"}));
  ModelConfig c = preset_config("tiny-glm5.2");
  c.quant = apply_online_quant(c.quant, r, "test");
  EXPECT_TRUE(c.quant.online && c.quant.per_channel);
  const TensorSpec qb = spec(c, "model.layers.1.self_attn.q_b_proj.weight");
  const QuantScheme q = quant_scheme(c, qb);
  EXPECT_EQ(q.format, WeightFormat::kFp8Block);
  EXPECT_EQ(q.block_n, 1);
  EXPECT_EQ(q.block_k, qb.shape[1]);  // one scale per output channel: the whole row
  EXPECT_EQ(q.act, QuantActivation::kFp8Group);
  EXPECT_TRUE(q.online);
  EXPECT_FALSE(expects_quantized(c, qb));  // the checkpoint itself is bf16
  // "*expert*" catches routed and shared experts; "*.mlp.gate" is the router, not gate_proj.
  for (const auto& s : weight_name_table(c, true)) {
    const QuantScheme r2 = quant_scheme(c, s);
    if (s.slot == Slot::kExpertDown || s.slot == Slot::kSharedUp) {
      EXPECT_EQ(r2.format, WeightFormat::kDense) << s.name();
      EXPECT_TRUE(has(r2.rule, "'*expert*'")) << r2.rule;
    }
    if (s.slot == Slot::kMlpGate) {
      EXPECT_EQ(r2.format, WeightFormat::kFp8Block) << s.name();
    }
  }
  // --quantization fp8 on the same bf16 checkpoint: 128x128 blocks, nothing excluded.
  ModelConfig b = preset_config("tiny-glm5.2");
  b.quant = apply_online_quant(b.quant, parse_online_quant("fp8", ""), "test");
  const QuantScheme bq = scheme(b, "model.layers.1.mlp.experts.0.down_proj.weight");
  EXPECT_EQ(bq.format, WeightFormat::kFp8Block);
  EXPECT_EQ(bq.block_n, 128);
  EXPECT_EQ(bq.block_k, 128);
  EXPECT_TRUE(bq.online);
}

TEST(QuantRules, OnlineFlagsRefuseUnknownKeysValuesAndContradictions) {
  auto err = [](const std::string& q, const std::string& extra) {
    return error_of([&] { parse_online_quant(q, extra); });
  };
  EXPECT_TRUE(has(err("", R"({"online_quant_config":{"global_quant_config":"ptpc_int8"}})"),
                  "global_quant_config"));
  EXPECT_TRUE(
      has(err("", R"({"online_quant_config":{"global_quant_config":"ptpc_fp8","exclude":[]}})"),
          "online_quant_config.exclude'"));
  EXPECT_TRUE(has(err("", R"({"online_quant":{}})"), "unknown key 'online_quant'"));
  EXPECT_TRUE(has(err("", R"({"online_quant_config":{"exclude_layer":["x"]}})"),
                  "global_quant_config' is missing"));
  EXPECT_TRUE(has(
      err("",
          R"({"online_quant_config":{"global_quant_config":"ptpc_fp8","exclude_layer":"lm_head"}})"),
      "exclude_layer"));
  EXPECT_TRUE(has(err("", "{not json"), "--model-loader-extra-config"));
  EXPECT_TRUE(has(err("gptq", ""), "--quantization 'gptq'"));
  EXPECT_EQ(err("", R"({"enable_multithread_load":true})"), "");  // SGLang loader knob: no-op
  // Against the checkpoint.
  const QuantConfig fp8ck =
      parse_quant_config({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}, "ck");
  const QuantConfig quark = parse_quant_config(quark_json({"lm_head"}), "ck");
  auto apply_err = [](const QuantConfig& ck, const std::string& q, const std::string& extra) {
    return error_of([&] { apply_online_quant(ck, parse_online_quant(q, extra), "ck"); });
  };
  EXPECT_TRUE(has(apply_err(fp8ck, "", kPtpcFlag), "already quantized"));
  EXPECT_TRUE(has(apply_err(quark, "fp8", ""), "contradicts the checkpoint's quant_method quark"));
  EXPECT_TRUE(has(apply_err(QuantConfig{}, "quark", ""), "needs an MXFP4 checkpoint"));
  EXPECT_TRUE(has(apply_err(QuantConfig{}, "fp8", kPtpcFlag), "give one"));
  // Naming the checkpoint's own method changes nothing.
  EXPECT_TRUE(apply_online_quant(fp8ck, parse_online_quant("fp8", ""), "ck") == fp8ck);
  EXPECT_TRUE(apply_online_quant(quark, parse_online_quant("quark", ""), "ck") == quark);
}

TEST(QuantRules, WeightOnlyFlagDropsEveryActivationRule) {
  // A W4A4 checkpoint (global input_tensors MXFP4) with W4A4 rules per layer and per type too.
  json w4a4 = {{"weight", mx_spec(false)}, {"input_tensors", mx_spec(true)}};
  const json q =
      quark_json({"lm_head"}, {{"model.layers.5.mlp.experts.down_proj", w4a4}}, {{"Linear", w4a4}});
  ModelConfig c = with_quant("glm5.2", q);
  const QuantConfig parsed = c.quant;
  const char* global = "model.layers.77.mlp.experts.5.gate_proj.weight";
  const char* by_layer = "model.layers.5.mlp.experts.8.down_proj.weight";
  EXPECT_EQ(scheme(c, global).act, QuantActivation::kMxfp4);
  EXPECT_EQ(scheme(c, by_layer).act, QuantActivation::kMxfp4);
  OnlineQuantRequest r = parse_online_quant("", "");
  r.weight_only = true;
  EXPECT_FALSE(r.empty());
  c.quant = apply_online_quant(parsed, r, "ck");
  for (const char* name : {global, by_layer}) {
    const QuantScheme s = scheme(c, name);
    EXPECT_EQ(s.format, WeightFormat::kMxfp4) << name;  // the weights stay as stored
    EXPECT_EQ(s.act, QuantActivation::kNone) << name;
  }
  EXPECT_FALSE(c.quant == parsed);
  EXPECT_TRUE(parsed == parse_quant_config(q, "test config.json"));  // a copy was changed
  // With --quantization naming the method too, and refused where there are no input_tensors.
  r.quantization = "quark";
  EXPECT_TRUE(apply_online_quant(parsed, r, "ck") == c.quant);
  const QuantConfig fp8ck =
      parse_quant_config({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}, "ck");
  r.quantization.clear();
  EXPECT_TRUE(has(error_of([&] { apply_online_quant(fp8ck, r, "ck"); }),
                  "--weight-only-quant applies to Quark / MXFP4 checkpoints"));
  EXPECT_TRUE(
      has(error_of([&] { apply_online_quant(QuantConfig{}, r, "ck"); }), "quant_method is none"));
}

TEST(QuantRules, Fp8ConfigFieldsAreReadAndCheckedByName) {
  const json glm = {{"quant_method", "fp8"},
                    {"activation_scheme", "dynamic"},
                    {"fmt", "e4m3"},
                    {"scale_fmt", "ue8m0"},
                    {"weight_block_size", {128, 128}},
                    {"modules_to_not_convert", {"model.embed_tokens", "lm_head"}},
                    {"ignored_layers", {"re:.*kv_b_proj"}}};
  const QuantConfig q = parse_quant_config(glm, "c");
  EXPECT_EQ(q.method, "fp8");
  EXPECT_TRUE(q.ue8m0);
  EXPECT_EQ(q.exclude,
            (std::vector<std::string>{"model.embed_tokens", "lm_head", "re:.*kv_b_proj"}));
  EXPECT_FALSE(
      parse_quant_config({{"quant_method", "fp8"}, {"weight_block_size", {128, 64}}}, "c").ue8m0);
  auto err = [&](const char* key, json v) {
    json j = glm;
    j[key] = v;
    return error_of([&] { parse_quant_config(j, "c"); });
  };
  EXPECT_TRUE(has(err("activation_scheme", "static"), "'quantization_config.activation_scheme'"));
  EXPECT_TRUE(has(err("fmt", "e5m2"), "'quantization_config.fmt'"));
  EXPECT_TRUE(has(err("scale_fmt", "fp32"), "'quantization_config.scale_fmt'"));
  EXPECT_TRUE(has(err("weight_block_size", {128}), "weight_block_size"));
  EXPECT_TRUE(has(err("weight_block_size", {0, 128}), "weight_block_size"));
  EXPECT_TRUE(has(err("modules_to_not_convert", {1}), "modules_to_not_convert"));
  EXPECT_TRUE(has(err("quant_method", "gptq"), "quant_method"));
}

TEST(QuantRules, QuarkConfigFieldsAreReadAndCheckedByName) {
  QuantConfig q = parse_quant_config(quark_json({"lm_head", "re:.*self_attn.*"}), "c");
  EXPECT_EQ(q.method, "quark");
  ASSERT_TRUE(q.global.weight && q.global.input);
  EXPECT_TRUE(q.global.input->is_dynamic);
  EXPECT_EQ(q.exclude.size(), 2u);
  // input_tensors null: weight-only (W4A16).
  json wo = quark_json({});
  wo["global_quant_config"]["input_tensors"] = nullptr;
  ModelConfig c = preset_config("tiny-glm5.2");
  c.quant = parse_quant_config(wo, "c");
  EXPECT_EQ(scheme(c, "model.layers.1.self_attn.o_proj.weight").act, QuantActivation::kNone);
  // layer_type_quant_config "Linear" decides before the global config.
  c.quant = parse_quant_config(
      quark_json({}, json::object(),
                 {{"Linear", {{"weight", nullptr}, {"input_tensors", nullptr}}}}),
      "c");
  const QuantScheme t = scheme(c, "model.layers.1.mlp.experts.0.up_proj.weight");
  EXPECT_EQ(t.format, WeightFormat::kDense);
  EXPECT_TRUE(has(t.rule, "layer_type_quant_config 'Linear'")) << t.rule;
  auto err = [](const std::function<void(json&)>& edit) {
    json j = quark_json({});
    edit(j);
    return error_of([&] { parse_quant_config(j, "c"); });
  };
  EXPECT_TRUE(has(err([](json& j) { j["global_quant_config"]["weight"]["dtype"] = "fp8_e4m3"; }),
                  "global_quant_config'.weight.dtype"));
  EXPECT_TRUE(has(err([](json& j) { j["global_quant_config"]["weight"]["group_size"] = 16; }),
                  "weight.group_size"));
  EXPECT_TRUE(
      has(err([](json& j) { j["global_quant_config"]["input_tensors"]["is_dynamic"] = false; }),
          "input_tensors.is_dynamic"));
  EXPECT_TRUE(has(err([](json& j) { j["global_quant_config"]["output_tensors"] = mx_spec(true); }),
                  "output_tensors"));
  EXPECT_TRUE(has(err([](json& j) {
                    j["layer_quant_config"]["*.o_proj"] = {{"weight", {{"dtype", "int4"}}}};
                  }),
                  "layer_quant_config.*.o_proj'.weight.dtype"));
  EXPECT_TRUE(has(err([](json& j) { j["exclude"] = {"re:(unclosed"}; }), "re:(unclosed"));
  EXPECT_TRUE(has(err([](json& j) {
                    j["kv_cache_quant_config"] = {{"dtype", "fp8_e4m3"}};
                  }),
                  "kv_cache_quant_config"));
  EXPECT_TRUE(has(err([](json& j) { j.erase("global_quant_config"); }), "global_quant_config"));
}

TEST(QuantRules, CheckpointQuantConfigsRoundTripThroughJson) {
  for (const char* preset : {"tiny-glm5.2", "tiny-deepseek-v3"}) {
    const ModelConfig c = preset_config(preset);
    for (const QuantConfig& q : {fp8_checkpoint_quant(c), mxfp4_checkpoint_quant(c)}) {
      const QuantConfig back = parse_quant_config(quant_config_to_json(q), "round trip");
      EXPECT_TRUE(back == q) << quant_config_to_json(q).dump();
    }
  }
}

// A straightforward per-row FP8 quantizer to check quantize_weight's per-channel path against.
TEST(QuantRules, OnlineQuantizeWeightMatchesAReference) {
  Rng rng(11);
  const int64_t N = 48, K = 200;
  Tensor w = Tensor::empty({N, K}, DType::F32);
  for (int64_t i = 0; i < w.numel(); ++i)
    w.data<float>()[i] = static_cast<float>(rng.normal() * (1 + i / K % 5));
  QuantScheme ptpc;
  ptpc.format = WeightFormat::kFp8Block;
  ptpc.block_n = 1;
  ptpc.block_k = K;
  const Weight q = quantize_weight(w, ptpc);
  ASSERT_EQ(q.scale.shape().vec(), (std::vector<int64_t>{N, 1}));
  const Tensor d = dequantize_to_f32(q);
  for (int64_t n = 0; n < N; ++n) {
    float amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w.data<float>()[n * K + k]));
    const float s = std::max(amax, 1e-4f) / 448.0f;
    EXPECT_EQ(q.scale.data<float>()[n], s);
    for (int64_t k = 0; k < K; ++k) {
      const float ref = fp8_e4m3_to_f32(f32_to_fp8_e4m3(w.data<float>()[n * K + k] / s)) * s;
      ASSERT_EQ(d.data<float>()[n * K + k], ref) << n << "," << k;
    }
  }
  // Stacked experts [E, N, K] with 128x128 blocks: each expert as quantized alone.
  Tensor e3 = Tensor::empty({3, 130, 256}, DType::F32);
  for (int64_t i = 0; i < e3.numel(); ++i) e3.data<float>()[i] = static_cast<float>(rng.normal());
  QuantScheme blk = ptpc;
  blk.block_n = blk.block_k = 128;
  const Weight qe = quantize_weight(e3, blk);
  ASSERT_EQ(qe.scale.shape().vec(), (std::vector<int64_t>{3, 2, 2}));
  auto [q1, s1] = quantize_fp8_block(e3.select(0, 1).contiguous(), 128, 128);
  EXPECT_EQ(std::memcmp(q1.raw(), static_cast<uint8_t*>(qe.w.raw()) + 130 * 256, 130 * 256), 0);
  EXPECT_EQ(std::memcmp(s1.raw(), qe.scale.data<float>() + 4, 16), 0);
  // MXFP4: packed codes and e8m0 scales, and the dequantized weight close to the input.
  QuantScheme mx;
  mx.format = WeightFormat::kMxfp4;
  mx.block_n = 1;
  mx.block_k = 32;
  Tensor w2 = w.narrow(1, 0, 192).contiguous();
  const Weight q4 = quantize_weight(w2, mx);
  EXPECT_EQ(q4.w.dtype(), DType::FP4X2);
  EXPECT_EQ(q4.scale.shape().vec(), (std::vector<int64_t>{N, 6}));
  const Tensor d4 = dequantize_to_f32(q4);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < w2.numel(); ++i) {
    err += std::pow(d4.data<float>()[i] - w2.data<float>()[i], 2);
    ref += std::pow(w2.data<float>()[i], 2);
  }
  EXPECT_LT(std::sqrt(err / ref), 0.25);
  EXPECT_GT(std::sqrt(err / ref), 0.0);
  // Dense passes through.
  EXPECT_EQ(quantize_weight(w, QuantScheme{}).format, WeightFormat::kDense);
}

class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              ("tandem_quant_rules_" + std::to_string(::getpid()) + "_" + std::to_string(n_++))) {
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
  static inline int n_ = 0;
};

json read_json(const std::string& p) {
  std::ifstream in(p);
  return json::parse(in);
}

TEST(QuantRules, MakeCheckpointFp8LayoutIsGlm5Fp8) {
  TempDir d;
  const ModelConfig c = preset_config("tiny-glm5.2");
  RandomCheckpointOptions o;
  o.quant = "fp8";
  write_random_checkpoint(c, d.str(), o);
  const json q = read_json(d.str() + "/config.json")["quantization_config"];
  EXPECT_EQ(q["quant_method"], "fp8");
  EXPECT_EQ(q["activation_scheme"], "dynamic");
  EXPECT_EQ(q["fmt"], "e4m3");
  EXPECT_EQ(q["scale_fmt"], "ue8m0");
  EXPECT_EQ(q["weight_block_size"], json({128, 128}));
  EXPECT_EQ(q["modules_to_not_convert"][1], "lm_head");
  const Checkpoint ck = Checkpoint::open(d.str());
  const std::string a = "model.layers.1.self_attn.";
  EXPECT_EQ(ck.entry(a + "q_a_proj.weight").dtype, DType::F8_E4M3);
  const Tensor s = ck.tensor(a + "q_a_proj.weight_scale_inv");
  EXPECT_EQ(s.dtype(), DType::F32);
  // amax / 448 per 128x128 tile: each tile's largest code is 448, and no scale is the floor.
  const Tensor wf = ck.tensor(a + "q_a_proj.weight").to_f32();
  float top = 0;
  for (int64_t i = 0; i < wf.numel(); ++i) top = std::max(top, std::fabs(wf.data<float>()[i]));
  EXPECT_EQ(top, 448.0f);
  for (int64_t i = 0; i < s.numel(); ++i) EXPECT_GT(s.data<float>()[i], 1e-4f / 448.0f);
  EXPECT_EQ(s.shape().vec(),
            (std::vector<int64_t>{(wf.size(0) + 127) / 128, (wf.size(1) + 127) / 128}));
  // Every FP8 weight holds real codes, not zeros.
  const Tensor w = ck.tensor(a + "q_a_proj.weight");
  int64_t nonzero = 0;
  for (int64_t i = 0; i < w.numel(); ++i) nonzero += static_cast<const uint8_t*>(w.raw())[i] != 0;
  EXPECT_GT(nonzero, w.numel() / 2);
  // High precision and unscaled in the real checkpoints.
  for (const std::string& n : {a + "indexer.weights_proj", std::string("model.layers.1.mlp.gate"),
                               std::string("lm_head"), std::string("model.embed_tokens"),
                               fmt::format("model.layers.{}.eh_proj", c.num_hidden_layers)}) {
    EXPECT_EQ(ck.entry(n + ".weight").dtype, DType::BF16) << n;
    EXPECT_FALSE(ck.has(n + ".weight_scale_inv")) << n;
  }
  EXPECT_EQ(ck.entry("model.layers.1.mlp.gate.e_score_correction_bias").dtype, DType::F32);
  // DeepSeek-V3 writes no scale_fmt.
  TempDir d3;
  write_random_checkpoint(preset_config("tiny-deepseek-v3"), d3.str(), o);
  EXPECT_FALSE(read_json(d3.str() + "/config.json")["quantization_config"].contains("scale_fmt"));
}

TEST(QuantRules, MakeCheckpointMxfp4LayoutIsQuark) {
  TempDir d;
  const ModelConfig c = preset_config("tiny-glm5.2");
  RandomCheckpointOptions o;
  o.quant = "mxfp4";
  write_random_checkpoint(c, d.str(), o);
  const json q = read_json(d.str() + "/config.json")["quantization_config"];
  EXPECT_EQ(q["quant_method"], "quark");
  EXPECT_EQ(q["global_quant_config"]["weight"]["dtype"], "fp4");
  EXPECT_EQ(q["global_quant_config"]["weight"]["group_size"], 32);
  EXPECT_EQ(q["global_quant_config"]["input_tensors"]["is_dynamic"], true);
  EXPECT_TRUE(q["layer_quant_config"].is_object());
  EXPECT_TRUE(q["layer_type_quant_config"].is_object());
  const std::string mtp_rule = fmt::format("re:model.layers.{}.*", c.num_hidden_layers);
  EXPECT_NE(std::find(q["exclude"].begin(), q["exclude"].end(), mtp_rule), q["exclude"].end());
  const Checkpoint ck = Checkpoint::open(d.str());
  // Routed experts: packed fp4 [N, K/2] u8 and e8m0 [N, K/32] u8 scales, varied and nonzero.
  const TensorSpec e = spec(c, "model.layers.1.mlp.experts.3.down_proj.weight");
  const auto& we = ck.entry(e.name());
  EXPECT_EQ(we.dtype, DType::U8);
  EXPECT_EQ(we.shape, (std::vector<int64_t>{e.shape[0], e.shape[1] / 2}));
  const Tensor sc = ck.tensor(e.module + ".weight_scale");
  EXPECT_EQ(sc.shape().vec(), (std::vector<int64_t>{e.shape[0], e.shape[1] / 32}));
  const auto* sp = static_cast<const uint8_t*>(sc.raw());
  EXPECT_GT(*std::max_element(sp, sp + sc.numel()), 100);  // near 2^0: a real e8m0 exponent
  EXPECT_LT(*std::max_element(sp, sp + sc.numel()), 140);
  // Attention, the MTP layer, shared experts, dense MLPs and routers stay bf16.
  for (const std::string& n :
       {std::string("model.layers.1.self_attn.q_a_proj"),
        fmt::format("model.layers.{}.mlp.experts.3.down_proj", c.num_hidden_layers),
        std::string("model.layers.1.mlp.shared_experts.up_proj"),
        std::string("model.layers.0.mlp.up_proj"), std::string("model.layers.1.mlp.gate")}) {
    EXPECT_EQ(ck.entry(n + ".weight").dtype, DType::BF16) << n;
    EXPECT_FALSE(ck.has(n + ".weight_scale")) << n;
  }
}

}  // namespace
}  // namespace tandem
