#include "model/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <type_traits>

#include "core/error.h"

namespace tandem {

using json = nlohmann::json;

namespace {

// An integer field: a JSON integer, or a float holding an integral value (4096.0), within int64.
// nlohmann's get<int64_t>() casts any number, which truncates 5.5 silently and is undefined
// behaviour for a float out of range (found by fuzz/config.cpp).
int64_t int_field(const json& v, const std::string& name, const std::string& src) {
  if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX))
    return static_cast<int64_t>(v.get<uint64_t>());
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // [-2^63, 2^63) holds every double that converts to int64 exactly; NaN fails both tests.
    if (d >= -0x1p63 && d < 0x1p63 && d == std::floor(d)) return static_cast<int64_t>(d);
  }
  fail("{}: field '{}' must be an integer that fits 64 bits, got {}", src, name, v.dump());
}

std::string string_field(const json& v, const std::string& name, const std::string& src) {
  if (!v.is_string()) fail("{}: field '{}' must be a string, got {}", src, name, v.dump());
  return v.get<std::string>();
}

// Reads an optional field with a type check that names the field on error.
template <typename T>
T opt(const json& j, const char* key, T def, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if constexpr (std::is_same_v<T, int64_t>) {
    return int_field(j[key], key, src);
  } else {
    try {
      return j[key].get<T>();
    } catch (const std::exception&) {
      fail("{}: field '{}' has the wrong type ({})", src, key, j[key].dump());
    }
  }
}

template <typename T>
T req(const json& j, const char* key, const std::string& src) {
  if (!j.contains(key) || j[key].is_null()) fail("{}: required field '{}' is missing", src, key);
  return opt<T>(j, key, T{}, src);
}

Arch parse_arch(const json& j, const std::string& src, std::string* name) {
  if (!j.contains("architectures") || !j["architectures"].is_array() || j["architectures"].empty())
    fail("{}: field 'architectures' is missing or empty", src);
  *name = string_field(j["architectures"][0], "architectures[0]", src);
  if (*name == "GlmMoeDsaForCausalLM") return Arch::kGlmMoeDsa;
  if (*name == "DeepseekV32ForCausalLM") return Arch::kDeepseekV32;
  if (*name == "DeepseekV3ForCausalLM") return Arch::kDeepseekV3;
  fail(
      "{}: field 'architectures' names '{}', which Tandem cannot run (supported: "
      "GlmMoeDsaForCausalLM, DeepseekV32ForCausalLM, DeepseekV3ForCausalLM)",
      src, *name);
}

void parse_rope(const json& j, ModelConfig& c, const std::string& src) {
  // transformers v5 writes rope_parameters; older configs use rope_theta + rope_scaling.
  json p = json::object();
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    p = j["rope_parameters"];
  } else {
    if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) p = j["rope_scaling"];
    if (j.contains("rope_theta")) p["rope_theta"] = j["rope_theta"];
  }
  const double def_theta = c.arch == Arch::kGlmMoeDsa ? 1e6 : 1e4;
  c.rope.theta = opt<double>(p, "rope_theta", opt<double>(j, "rope_theta", def_theta, src), src);
  std::string type =
      opt<std::string>(p, "rope_type", opt<std::string>(p, "type", "default", src), src);
  if (type != "default" && type != "yarn")
    fail("{}: field 'rope_parameters.rope_type' is '{}' (supported: default, yarn)", src, type);
  c.rope.type = type;
  if (type == "yarn") {
    c.rope.factor = req<double>(p, "factor", src + " rope_parameters");
    c.rope.original_max_position_embeddings =
        opt<int64_t>(p, "original_max_position_embeddings", 4096, src);
    c.rope.beta_fast = opt<double>(p, "beta_fast", 32.0, src);
    c.rope.beta_slow = opt<double>(p, "beta_slow", 1.0, src);
    c.rope.mscale = opt<double>(p, "mscale", 0.0, src);
    c.rope.mscale_all_dim = opt<double>(p, "mscale_all_dim", 0.0, src);
    c.rope.truncate = opt<bool>(p, "truncate", true, src);
  }
}

std::vector<bool> parse_layer_list(const json& j, const char* key, const char* yes, const char* no,
                                   int64_t n, const std::string& src) {
  const json& a = j[key];
  if (!a.is_array() || static_cast<int64_t>(a.size()) < n)
    fail("{}: field '{}' must list at least num_hidden_layers={} entries", src, key, n);
  std::vector<bool> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const std::string v =
        a[static_cast<size_t>(i)].is_string() ? a[static_cast<size_t>(i)].get<std::string>() : "";
    if (v == yes)
      out[static_cast<size_t>(i)] = true;
    else if (v == no)
      out[static_cast<size_t>(i)] = false;
    else
      fail("{}: field '{}[{}]' is '{}' (expected '{}' or '{}')", src, key, i,
           a[static_cast<size_t>(i)].dump(), yes, no);
  }
  return out;
}

void parse_quant(const json& j, ModelConfig& c, const std::string& src) {
  if (j.contains("quantization_config"))
    c.quant = parse_quant_config(j["quantization_config"], src);
}

}  // namespace

bool indexshare_layer_is_full(int64_t layer, int64_t freq, int64_t offset) {
  const int64_t v = std::max<int64_t>(layer - offset + 1, 0);
  return v % freq == 0;
}

std::string ModelConfig::arch_name() const {
  return architecture;
}

double ModelConfig::softmax_scale() const {
  double s = 1.0 / std::sqrt(static_cast<double>(qk_head_dim()));
  if (rope.type == "yarn" && rope.mscale_all_dim != 0.0 && rope.factor > 1.0) {
    const double m = 0.1 * rope.mscale_all_dim * std::log(rope.factor) + 1.0;
    s *= m * m;
  }
  return s;
}

ModelConfig ModelConfig::from_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("{}: cannot open config", path);
  // Nesting is bounded while parsing: copying or dumping a value (as the error messages below
  // do) is recursive in nlohmann::json, and a deep enough file would overflow the stack.
  constexpr int kMaxDepth = 128;
  struct TooDeep {};
  json j;
  try {
    j = json::parse(in, [](int depth, json::parse_event_t e, json&) {
      if ((e == json::parse_event_t::object_start || e == json::parse_event_t::array_start) &&
          depth >= kMaxDepth)
        throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    fail("{}: JSON nested deeper than {} levels", path, kMaxDepth);
  } catch (const std::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  return from_json(j, path);
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& src) {
  if (!j.is_object()) fail("{}: config is not a JSON object", src);
  ModelConfig c;
  c.arch = parse_arch(j, src, &c.architecture);
  const bool glm = c.arch == Arch::kGlmMoeDsa;
  c.hidden_size = req<int64_t>(j, "hidden_size", src);
  c.num_hidden_layers = req<int64_t>(j, "num_hidden_layers", src);
  c.vocab_size = req<int64_t>(j, "vocab_size", src);
  c.num_attention_heads = req<int64_t>(j, "num_attention_heads", src);
  c.q_lora_rank = opt<int64_t>(j, "q_lora_rank", 0, src);
  c.kv_lora_rank = req<int64_t>(j, "kv_lora_rank", src);
  c.qk_nope_head_dim = req<int64_t>(j, "qk_nope_head_dim", src);
  c.qk_rope_head_dim = req<int64_t>(j, "qk_rope_head_dim", src);
  c.v_head_dim = req<int64_t>(j, "v_head_dim", src);
  c.intermediate_size = req<int64_t>(j, "intermediate_size", src);
  c.moe_intermediate_size = opt<int64_t>(j, "moe_intermediate_size", 0, src);
  c.n_routed_experts = opt<int64_t>(j, "n_routed_experts", 0, src);
  c.n_shared_experts = opt<int64_t>(j, "n_shared_experts", 0, src);
  c.num_experts_per_tok = opt<int64_t>(j, "num_experts_per_tok", 0, src);
  c.n_group = opt<int64_t>(j, "n_group", 1, src);
  c.topk_group = opt<int64_t>(j, "topk_group", 1, src);
  c.routed_scaling_factor = opt<double>(j, "routed_scaling_factor", 1.0, src);
  c.norm_topk_prob = opt<bool>(j, "norm_topk_prob", true, src);
  const std::string scoring = opt<std::string>(j, "scoring_func", "sigmoid", src);
  if (scoring != "sigmoid")
    fail("{}: field 'scoring_func' is '{}' (only sigmoid routing is supported)", src, scoring);
  const std::string topk_method = opt<std::string>(j, "topk_method", "noaux_tc", src);
  if (topk_method != "noaux_tc")
    fail("{}: field 'topk_method' is '{}' (only noaux_tc is supported)", src, topk_method);
  c.rms_norm_eps = opt<double>(j, "rms_norm_eps", 1e-6, src);
  parse_rope(j, c, src);
  c.rope_interleave = opt<bool>(j, "rope_interleave", true, src);
  c.indexer_rope_interleave = opt<bool>(j, "indexer_rope_interleave", glm, src);
  c.max_position_embeddings = opt<int64_t>(j, "max_position_embeddings", 163840, src);
  c.num_nextn_predict_layers = opt<int64_t>(j, "num_nextn_predict_layers", 0, src);
  c.tie_word_embeddings = opt<bool>(j, "tie_word_embeddings", false, src);
  c.torch_dtype =
      opt<std::string>(j, "dtype", opt<std::string>(j, "torch_dtype", "bfloat16", src), src);
  c.bos_token_id = opt<int64_t>(j, "bos_token_id", -1, src);
  if (j.contains("eos_token_id")) {
    if (j["eos_token_id"].is_array())
      for (const auto& e : j["eos_token_id"]) {
        if (!e.is_number_integer())
          fail("{}: field 'eos_token_id' has the wrong type ({})", src, j["eos_token_id"].dump());
        c.eos_token_ids.push_back(e.get<int64_t>());
      }
    else if (j["eos_token_id"].is_number_integer())
      c.eos_token_ids.push_back(j["eos_token_id"].get<int64_t>());
  }

  const int64_t L = c.num_hidden_layers;
  if (L <= 0) fail("{}: field 'num_hidden_layers' must be positive, got {}", src, L);
  // Per-layer lists are sized from L below, so its bound is checked before validate().
  if (L > ConfigLimits::kMaxLayers)
    fail("{}: field 'num_hidden_layers'={} exceeds the limit {}", src, L, ConfigLimits::kMaxLayers);
  // mlp_layer_types wins; otherwise first_k_dense_replace and moe_layer_freq decide.
  if (j.contains("mlp_layer_types") && !j["mlp_layer_types"].is_null()) {
    c.layer_is_moe = parse_layer_list(j, "mlp_layer_types", "sparse", "dense", L, src);
  } else {
    const int64_t first_dense = opt<int64_t>(j, "first_k_dense_replace", 0, src);
    const int64_t freq = opt<int64_t>(j, "moe_layer_freq", 1, src);
    if (freq <= 0) fail("{}: field 'moe_layer_freq' must be positive", src);
    c.layer_is_moe.resize(static_cast<size_t>(L));
    for (int64_t i = 0; i < L; ++i)
      c.layer_is_moe[static_cast<size_t>(i)] =
          c.n_routed_experts > 0 && i >= first_dense && i % freq == 0;
  }

  c.has_indexer = c.arch != Arch::kDeepseekV3 && j.contains("index_topk");
  if (c.arch != Arch::kDeepseekV3 && !c.has_indexer)
    fail("{}: field 'index_topk' is missing ({} uses DSA sparse attention)", src, c.architecture);
  if (c.has_indexer) {
    c.index_n_heads = req<int64_t>(j, "index_n_heads", src);
    c.index_head_dim = req<int64_t>(j, "index_head_dim", src);
    c.index_topk = req<int64_t>(j, "index_topk", src);
    c.index_share_for_mtp_iteration = opt<bool>(j, "index_share_for_mtp_iteration", false, src);
    // An explicit list wins, then the F/S pattern string, then the freq/offset rule.
    if (j.contains("indexer_types") && !j["indexer_types"].is_null()) {
      c.indexer_full = parse_layer_list(j, "indexer_types", "full", "shared", L, src);
    } else if (j.contains("index_topk_pattern") && j["index_topk_pattern"].is_string()) {
      const std::string pat = j["index_topk_pattern"].get<std::string>();
      if (static_cast<int64_t>(pat.size()) < L)
        fail("{}: field 'index_topk_pattern' has {} letters for {} layers", src, pat.size(), L);
      for (int64_t i = 0; i < L; ++i) {
        const char ch = pat[static_cast<size_t>(i)];
        if (ch != 'F' && ch != 'S')
          fail("{}: field 'index_topk_pattern[{}]' is '{}' (expected F or S)", src, i, ch);
        c.indexer_full.push_back(ch == 'F');
      }
    } else {
      const int64_t freq = opt<int64_t>(j, "index_topk_freq", 1, src);
      const int64_t off = opt<int64_t>(j, "index_skip_topk_offset", 2, src);
      if (freq <= 0) fail("{}: field 'index_topk_freq' must be positive", src);
      for (int64_t i = 0; i < L; ++i)
        c.indexer_full.push_back(indexshare_layer_is_full(i, freq, off));
    }
  }
  parse_quant(j, c, src);
  c.validate(src);
  return c;
}

void ModelConfig::validate(const std::string& src) const {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) fail("{}: field '{}' must be positive, got {}", src, field, v);
  };
  // Upper bounds apply whether or not the field is used; positivity only where it is.
  auto at_most = [&](const char* field, int64_t v, int64_t max) {
    if (v > max) fail("{}: field '{}'={} exceeds the limit {}", src, field, v, max);
  };
  auto finite_positive = [&](const char* field, double v) {
    if (!std::isfinite(v) || v <= 0)
      fail("{}: field '{}' must be a finite positive number, got {}", src, field, v);
  };
  using Lim = ConfigLimits;
  positive("num_hidden_layers", num_hidden_layers);
  at_most("num_hidden_layers", num_hidden_layers, Lim::kMaxLayers);
  positive("hidden_size", hidden_size);
  at_most("hidden_size", hidden_size, Lim::kMaxHiddenSize);
  positive("vocab_size", vocab_size);
  at_most("vocab_size", vocab_size, Lim::kMaxVocabSize);
  positive("num_attention_heads", num_attention_heads);
  at_most("num_attention_heads", num_attention_heads, Lim::kMaxHeads);
  at_most("q_lora_rank", q_lora_rank, Lim::kMaxHeadDim);
  positive("kv_lora_rank", kv_lora_rank);
  at_most("kv_lora_rank", kv_lora_rank, Lim::kMaxHeadDim);
  positive("qk_nope_head_dim", qk_nope_head_dim);
  at_most("qk_nope_head_dim", qk_nope_head_dim, Lim::kMaxHeadDim);
  positive("qk_rope_head_dim", qk_rope_head_dim);
  at_most("qk_rope_head_dim", qk_rope_head_dim, Lim::kMaxHeadDim);
  positive("v_head_dim", v_head_dim);
  at_most("v_head_dim", v_head_dim, Lim::kMaxHeadDim);
  positive("intermediate_size", intermediate_size);
  at_most("intermediate_size", intermediate_size, Lim::kMaxIntermediate);
  at_most("moe_intermediate_size", moe_intermediate_size, Lim::kMaxIntermediate);
  at_most("n_routed_experts", n_routed_experts, Lim::kMaxExperts);
  at_most("n_shared_experts", n_shared_experts, Lim::kMaxExperts);
  at_most("num_experts_per_tok", num_experts_per_tok, Lim::kMaxExperts);
  at_most("n_group", n_group, Lim::kMaxExperts);
  at_most("index_n_heads", index_n_heads, Lim::kMaxHeads);
  at_most("index_head_dim", index_head_dim, Lim::kMaxHeadDim);
  at_most("index_topk", index_topk, Lim::kMaxIndexTopk);
  positive("max_position_embeddings", max_position_embeddings);
  at_most("max_position_embeddings", max_position_embeddings, Lim::kMaxPositions);
  finite_positive("rms_norm_eps", rms_norm_eps);
  finite_positive("rope_theta", rope.theta);
  finite_positive("routed_scaling_factor", routed_scaling_factor);
  if (static_cast<int64_t>(layer_is_moe.size()) != num_hidden_layers)
    fail("{}: field 'mlp_layer_types' must have num_hidden_layers entries", src);
  for (int64_t id : eos_token_ids)
    if (id < 0 || id >= vocab_size)
      fail("{}: field 'eos_token_id' has {}, outside the vocabulary [0, vocab_size={})", src, id,
           vocab_size);
  // -1 means absent (HF configs write null).
  if (bos_token_id < -1 || bos_token_id >= vocab_size)
    fail("{}: field 'bos_token_id' is {}, outside the vocabulary [0, vocab_size={})", src,
         bos_token_id, vocab_size);
  if (qk_rope_head_dim % 2)
    fail("{}: field 'qk_rope_head_dim' must be even, got {}", src, qk_rope_head_dim);
  if (q_lora_rank < 0) fail("{}: field 'q_lora_rank' must not be negative", src);
  bool any_moe = false;
  for (bool m : layer_is_moe) any_moe |= m;
  if (any_moe || num_nextn_predict_layers > 0) {
    positive("n_routed_experts", n_routed_experts);
    positive("moe_intermediate_size", moe_intermediate_size);
    positive("num_experts_per_tok", num_experts_per_tok);
    if (num_experts_per_tok > n_routed_experts)
      fail("{}: field 'num_experts_per_tok'={} exceeds n_routed_experts={}", src,
           num_experts_per_tok, n_routed_experts);
    positive("n_group", n_group);
    if (n_routed_experts % n_group)
      fail("{}: field 'n_group'={} does not divide n_routed_experts={}", src, n_group,
           n_routed_experts);
    if (topk_group <= 0 || topk_group > n_group)
      fail("{}: field 'topk_group'={} must be in [1, n_group={}]", src, topk_group, n_group);
    if (n_group > 1 && (n_routed_experts / n_group) < 2)
      fail(
          "{}: field 'n_group'={} leaves fewer than 2 experts per group (group scores sum the top "
          "2)",
          src, n_group);
    if (num_experts_per_tok > topk_group * (n_routed_experts / n_group))
      fail("{}: field 'num_experts_per_tok'={} exceeds the experts in topk_group={} groups", src,
           num_experts_per_tok, topk_group);
  }
  if (n_shared_experts < 0) fail("{}: field 'n_shared_experts' must not be negative", src);
  if (num_nextn_predict_layers > 1)
    fail("{}: field 'num_nextn_predict_layers'={} (only one MTP layer is supported)", src,
         num_nextn_predict_layers);
  if (has_indexer) {
    positive("index_n_heads", index_n_heads);
    positive("index_head_dim", index_head_dim);
    positive("index_topk", index_topk);
    if (index_head_dim < qk_rope_head_dim)
      fail("{}: field 'index_head_dim'={} is smaller than qk_rope_head_dim={}", src, index_head_dim,
           qk_rope_head_dim);
    if (static_cast<int64_t>(indexer_full.size()) != num_hidden_layers)
      fail("{}: field 'indexer_types' must have num_hidden_layers entries", src);
    if (!indexer_full.empty() && !indexer_full[0])
      fail("{}: field 'indexer_types[0]' is 'shared' but no earlier layer computes top-k indices",
           src);
  }
  if (rope.type == "yarn" && !(std::isfinite(rope.factor) && rope.factor > 0))
    fail("{}: field 'rope_parameters.factor' must be positive", src);
  if (quant.method == "fp8" && !quant.per_channel && (quant.block_n <= 0 || quant.block_k <= 0))
    fail("{}: field 'quantization_config.weight_block_size' must be positive", src);
}

json ModelConfig::to_json() const {
  json j;
  j["architectures"] = {architecture};
  j["model_type"] = arch == Arch::kGlmMoeDsa     ? "glm_moe_dsa"
                    : arch == Arch::kDeepseekV32 ? "deepseek_v32"
                                                 : "deepseek_v3";
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["vocab_size"] = vocab_size;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_attention_heads;
  if (q_lora_rank > 0)
    j["q_lora_rank"] = q_lora_rank;
  else
    j["q_lora_rank"] = nullptr;
  j["kv_lora_rank"] = kv_lora_rank;
  j["qk_nope_head_dim"] = qk_nope_head_dim;
  j["qk_rope_head_dim"] = qk_rope_head_dim;
  j["qk_head_dim"] = qk_head_dim();
  j["v_head_dim"] = v_head_dim;
  j["intermediate_size"] = intermediate_size;
  j["moe_intermediate_size"] = moe_intermediate_size;
  j["n_routed_experts"] = n_routed_experts;
  j["n_shared_experts"] = n_shared_experts;
  j["num_experts_per_tok"] = num_experts_per_tok;
  j["n_group"] = n_group;
  j["topk_group"] = topk_group;
  j["routed_scaling_factor"] = routed_scaling_factor;
  j["norm_topk_prob"] = norm_topk_prob;
  j["scoring_func"] = "sigmoid";
  j["topk_method"] = "noaux_tc";
  int64_t first_dense = 0;
  while (first_dense < num_hidden_layers && !layer_is_moe[static_cast<size_t>(first_dense)])
    ++first_dense;
  j["first_k_dense_replace"] = first_dense;
  j["moe_layer_freq"] = 1;
  json mlp = json::array();
  for (bool m : layer_is_moe) mlp.push_back(m ? "sparse" : "dense");
  j["mlp_layer_types"] = mlp;
  j["rms_norm_eps"] = rms_norm_eps;
  json rp = {{"rope_theta", rope.theta}, {"rope_type", rope.type}};
  if (rope.type == "yarn") {
    rp["factor"] = rope.factor;
    rp["original_max_position_embeddings"] = rope.original_max_position_embeddings;
    rp["beta_fast"] = rope.beta_fast;
    rp["beta_slow"] = rope.beta_slow;
    if (rope.mscale != 0) rp["mscale"] = rope.mscale;
    if (rope.mscale_all_dim != 0) rp["mscale_all_dim"] = rope.mscale_all_dim;
  }
  j["rope_parameters"] = rp;
  j["rope_interleave"] = rope_interleave;
  j["max_position_embeddings"] = max_position_embeddings;
  j["num_nextn_predict_layers"] = num_nextn_predict_layers;
  if (has_indexer) {
    j["index_n_heads"] = index_n_heads;
    j["index_head_dim"] = index_head_dim;
    j["index_topk"] = index_topk;
    j["indexer_rope_interleave"] = indexer_rope_interleave;
    json types = json::array();
    for (bool f : indexer_full) types.push_back(f ? "full" : "shared");
    j["indexer_types"] = types;
    j["index_share_for_mtp_iteration"] = index_share_for_mtp_iteration;
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  if (eos_token_ids.size() == 1)
    j["eos_token_id"] = eos_token_ids[0];
  else if (!eos_token_ids.empty())
    j["eos_token_id"] = eos_token_ids;
  if (bos_token_id >= 0) j["bos_token_id"] = bos_token_id;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["dtype"] = torch_dtype;
  const json q = quant_config_to_json(quant);
  if (!q.is_null()) j["quantization_config"] = q;
  return j;
}

}  // namespace tandem
