// Parsing of quantization configs. The Quark layout follows what AMD's exporter writes and how
// the serving engines read it:
//   - quantization_config = {quant_method: "quark", global_quant_config, layer_quant_config,
//     layer_type_quant_config, exclude, export, quant_mode, version, kv_cache_quant_config, ...};
//     every *_quant_config value is a QuantizationConfig {weight, input_tensors, output_tensors,
//     bias}, each a QuantizationSpec {dtype, qscheme, group_size, ch_axis, scale_format,
//     scale_calculation_mode, round_method, is_dynamic, ...} or null (AMD Quark 0.8 API docs,
//     quark.torch.quantization.config.config; the AMD DeepSeek-V3.2 MXFP4 export script cited as
//     [QUARK] in glm5-architecture.md §6.4).
//   - precedence per module, in vLLM's QuarkConfig._find_matched_config (quark.py): `exclude`
//     first (entries "re:<regex>" by re.match, else the exact name), then layer_quant_config (an
//     fnmatch pattern if it has '*', else the name), then layer_type_quant_config by module class
//     name ("Linear"), then global_quant_config.
// config.json is read into a key-sorted JSON object, so layer_quant_config's file order is not
// available; overlapping keys are ranked by specificity instead (quant_scheme.cpp).
#include "model/quant_config.h"

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/error.h"
#include "core/log.h"

namespace tandem {

using json = nlohmann::json;

namespace {

// Compiled "re:" rules, shared by every lookup: the name table of a real model is ~60k tensors.
const std::regex& cached_regex(const std::string& pattern) {
  static std::mutex mu;
  static std::map<std::string, std::regex> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(pattern);
  if (it == cache.end()) {
    try {
      it = cache.emplace(pattern, std::regex(pattern)).first;
    } catch (const std::regex_error& e) {
      fail("quantization rule 're:{}' is not a valid regular expression: {}", pattern, e.what());
    }
  }
  return it->second;
}

// fnmatch: '*' any run (dots included), '?' one character, [...] / [!...] a set.
bool glob_match(const char* p, const char* s) {
  for (; *p; ++p, ++s) {
    if (*p == '*') {
      while (p[1] == '*') ++p;
      for (const char* t = s;; ++t) {
        if (glob_match(p + 1, t)) return true;
        if (!*t) return false;
      }
    }
    if (!*s) return false;
    if (*p == '?') continue;
    if (*p == '[') {
      const char* q = p + 1;
      const bool negate = *q == '!';
      if (negate) ++q;
      bool hit = false;
      const char* start = q;
      for (; *q && (*q != ']' || q == start); ++q) {
        if (q[1] == '-' && q[2] && q[2] != ']') {
          hit |= *s >= *q && *s <= q[2];
          q += 2;
        } else {
          hit |= *s == *q;
        }
      }
      if (!*q) return *p == *s && glob_match(p + 1, s + 1);  // no closing ']': a literal '['
      if (hit == negate) return false;
      p = q;
      continue;
    }
    if (*p != *s) return false;
  }
  return !*s;
}

bool is_glob(const std::string& rule) {
  return rule.find_first_of("*?[") != std::string::npos;
}

// `rule` occurs in `name` as a run of whole dot-separated segments.
bool segment_run(const std::string& rule, const std::string& name) {
  if (rule.empty()) return false;
  for (size_t at = name.find(rule); at != std::string::npos; at = name.find(rule, at + 1)) {
    const size_t end = at + rule.size();
    if ((at == 0 || name[at - 1] == '.') && (end == name.size() || name[end] == '.')) return true;
  }
  return false;
}

std::vector<std::string> string_list(const json& q, const char* key, const std::string& src) {
  std::vector<std::string> out;
  if (!q.contains(key) || q[key].is_null()) return out;
  if (!q[key].is_array()) fail("{}: field 'quantization_config.{}' must be a list", src, key);
  for (const auto& e : q[key]) {
    if (!e.is_string())
      fail("{}: field 'quantization_config.{}' has a non-string entry {}", src, key, e.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

void warn_unknown_keys(const json& q, std::initializer_list<const char*> known,
                       const std::string& where) {
  for (const auto& [k, v] : q.items()) {
    bool ok = false;
    for (const char* n : known) ok |= k == n;
    if (!ok) log_warn("{}: '{}' is not read by Tandem; ignored", where, k);
  }
}

QuantConfig parse_fp8(const json& q, const std::string& src) {
  QuantConfig c;
  c.method = "fp8";
  const std::string f = src + ": field 'quantization_config.";
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    const json& b = q["weight_block_size"];
    if (!b.is_array() || b.size() != 2 || !b[0].is_number_integer() || !b[1].is_number_integer())
      fail("{}weight_block_size' must be [n, k], got {}", f, b.dump());
    c.block_n = b[0].get<int64_t>();
    c.block_k = b[1].get<int64_t>();
    if (c.block_n <= 0 || c.block_k <= 0)
      fail("{}weight_block_size' must be positive, got {}", f, b.dump());
  } else {
    // Per-tensor FP8 (one scale per weight) has its own kernels in other engines; Tandem runs
    // the block layout only.
    fail("{}weight_block_size' is missing (only block FP8 checkpoints are supported)", f);
  }
  auto str = [&](const char* key, const char* def) {
    if (!q.contains(key) || q[key].is_null()) return std::string(def);
    if (!q[key].is_string()) fail("{}{}' must be a string, got {}", f, key, q[key].dump());
    return q[key].get<std::string>();
  };
  const std::string act = str("activation_scheme", "dynamic");
  if (act == "static")
    fail(
        "{}activation_scheme' is 'static': static activation scales are not supported "
        "(supported: dynamic)",
        f);
  if (act != "dynamic") fail("{}activation_scheme' is '{}' (supported: dynamic)", f, act);
  const std::string fmt_ = str("fmt", "e4m3");
  if (fmt_ != "e4m3") fail("{}fmt' is '{}' (supported: e4m3)", f, fmt_);
  if (q.contains("scale_fmt") && !q["scale_fmt"].is_null()) {
    if (!q["scale_fmt"].is_string()) fail("{}scale_fmt' must be a string", f);
    const std::string s = q["scale_fmt"].get<std::string>();
    if (s != "ue8m0") fail("{}scale_fmt' is '{}' (supported: ue8m0, or absent)", f, s);
    c.ue8m0 = true;
  }
  for (const char* key : {"modules_to_not_convert", "ignored_layers"})
    for (auto& e : string_list(q, key, src)) c.exclude.push_back(std::move(e));
  warn_unknown_keys(q,
                    {"quant_method", "weight_block_size", "activation_scheme", "fmt", "scale_fmt",
                     "modules_to_not_convert", "ignored_layers"},
                    src + " quantization_config");
  return c;
}

// One QuantizationSpec; `where` is its path for error messages.
std::optional<QuarkTensorQuant> parse_quark_tensor(const json& j, const std::string& where,
                                                   bool input) {
  if (j.is_null()) return std::nullopt;
  const json* s = &j;
  // Multi-entry lists are NVFP4-style two-level scales; a one-entry list is the spec itself.
  if (j.is_array()) {
    if (j.size() != 1)
      fail("{}: a list of {} specs is not supported (only MXFP4)", where, j.size());
    s = &j[0];
  }
  if (!s->is_object()) fail("{}: must be a quantization spec object or null", where);
  QuarkTensorQuant t;
  auto str = [&](const char* key, std::string def) {
    if (!s->contains(key) || (*s)[key].is_null()) return def;
    if (!(*s)[key].is_string())
      fail("{}.{}: must be a string, got {}", where, key, (*s)[key].dump());
    return (*s)[key].get<std::string>();
  };
  t.dtype = str("dtype", "");
  if (t.dtype != "fp4") fail("{}.dtype is '{}' (supported: fp4, i.e. OCP MXFP4)", where, t.dtype);
  t.qscheme = str("qscheme", "per_group");
  if (t.qscheme != "per_group") fail("{}.qscheme is '{}' (supported: per_group)", where, t.qscheme);
  if (!s->contains("group_size") || !(*s)["group_size"].is_number_integer())
    fail("{}.group_size must be an integer", where);
  t.group_size = (*s)["group_size"].get<int64_t>();
  if (t.group_size != 32) fail("{}.group_size is {} (MXFP4 uses 32)", where, t.group_size);
  t.scale_format = str("scale_format", "e8m0");
  if (t.scale_format != "e8m0")
    fail("{}.scale_format is '{}' (supported: e8m0)", where, t.scale_format);
  if (s->contains("ch_axis") && !(*s)["ch_axis"].is_null() &&
      (!(*s)["ch_axis"].is_number_integer() || (*s)["ch_axis"].get<int64_t>() != -1))
    fail("{}.ch_axis is {} (groups run along the last axis, -1)", where, (*s)["ch_axis"].dump());
  if (s->contains("is_dynamic") && !(*s)["is_dynamic"].is_null()) {
    if (!(*s)["is_dynamic"].is_boolean()) fail("{}.is_dynamic must be true or false", where);
    t.is_dynamic = (*s)["is_dynamic"].get<bool>();
  } else {
    t.is_dynamic = input;
  }
  if (input && !t.is_dynamic)
    fail("{}.is_dynamic is false: static activation scales are not supported", where);
  if (!input && t.is_dynamic)
    fail("{}.is_dynamic is true: weights must be stored quantized", where);
  // The activation rule of docs/quantization.md is OCP's: shared exponent floor(log2(amax)) - 2
  // ("even"), elements rounded half to even. Other modes would compute different numbers.
  if (input) {
    const std::string mode = str("scale_calculation_mode", "even");
    if (mode != "even") fail("{}.scale_calculation_mode is '{}' (supported: even)", where, mode);
    const std::string round = str("round_method", "half_even");
    if (round != "half_even") fail("{}.round_method is '{}' (supported: half_even)", where, round);
  }
  return t;
}

QuarkLayerQuant parse_quark_layer(const json& j, const std::string& where) {
  QuarkLayerQuant l;
  if (j.is_null()) return l;  // the whole layer config null: not quantized
  if (!j.is_object()) fail("{}: must be a quantization config object or null", where);
  l.weight = parse_quark_tensor(j.value("weight", json()), where + ".weight", false);
  l.input = parse_quark_tensor(j.value("input_tensors", json()), where + ".input_tensors", true);
  for (const char* key : {"output_tensors", "bias"})
    if (j.contains(key) && !j[key].is_null())
      fail("{}.{} is {}: quantized {} are not supported (expected null)", where, key, j[key].dump(),
           key);
  if (!l.weight && l.input)
    fail("{}: input_tensors are quantized but weight is null (not supported)", where);
  return l;
}

std::vector<std::pair<std::string, QuarkLayerQuant>> parse_quark_map(const json& q, const char* key,
                                                                     const std::string& src) {
  std::vector<std::pair<std::string, QuarkLayerQuant>> out;
  if (!q.contains(key) || q[key].is_null()) return out;
  if (!q[key].is_object()) fail("{}: field 'quantization_config.{}' must be an object", src, key);
  for (const auto& [k, v] : q[key].items())
    out.emplace_back(
        k, parse_quark_layer(v, fmt::format("{}: field 'quantization_config.{}.{}'", src, key, k)));
  return out;
}

QuantConfig parse_quark(const json& q, const std::string& method, const std::string& src) {
  QuantConfig c;
  c.method = method;
  const std::string g = src + ": field 'quantization_config.global_quant_config'";
  if (q.contains("global_quant_config")) {
    c.global = parse_quark_layer(q["global_quant_config"], g);
  } else if (method == "quark") {
    fail("{} is missing", g);
  } else {
    // quant_method "mxfp4" without a Quark body: MXFP4 weights, weight-only.
    c.global.weight = QuarkTensorQuant{};
  }
  if (c.global.weight) c.group_size = c.global.weight->group_size;
  c.layer_rules = parse_quark_map(q, "layer_quant_config", src);
  c.layer_type_rules = parse_quark_map(q, "layer_type_quant_config", src);
  c.exclude = string_list(q, "exclude", src);
  for (auto& e : string_list(q, "modules_to_not_convert", src)) c.exclude.push_back(std::move(e));
  for (const auto& e : c.exclude)
    if (e.rfind("re:", 0) == 0) (void)cached_regex(e.substr(3));  // a bad regex fails here
  for (const char* key : {"kv_cache_quant_config", "softmax_quant_spec"})
    if (q.contains(key) && !q[key].is_null() && !q[key].empty())
      fail(
          "{}: field 'quantization_config.{}' is {}: quantized KV caches and softmax are not "
          "supported",
          src, key, q[key].dump());
  warn_unknown_keys(
      q,
      {"quant_method", "global_quant_config", "layer_quant_config", "layer_type_quant_config",
       "exclude", "modules_to_not_convert", "export", "quant_mode", "version", "algo_config",
       "kv_cache_quant_config", "softmax_quant_spec", "kv_cache_group", "min_kv_scale",
       "pack_method", "weight_format"},
      src + " quantization_config");
  return c;
}

json quark_tensor_json(const std::optional<QuarkTensorQuant>& t) {
  if (!t) return nullptr;
  // The full spec as Quark's exporter writes it, so other engines read our checkpoints too.
  return {{"dtype", t->dtype},
          {"qscheme", t->qscheme},
          {"group_size", t->group_size},
          {"ch_axis", -1},
          {"scale_format", t->scale_format},
          {"scale_calculation_mode", "even"},
          {"round_method", "half_even"},
          {"is_dynamic", t->is_dynamic},
          {"symmetric", nullptr},
          {"observer_cls", "PerBlockMXObserver"},
          {"is_scale_quant", false},
          {"mx_element_dtype", nullptr}};
}

json quark_layer_json(const QuarkLayerQuant& l) {
  return {{"weight", quark_tensor_json(l.weight)},
          {"input_tensors", quark_tensor_json(l.input)},
          {"output_tensors", nullptr},
          {"bias", nullptr}};
}

}  // namespace

bool quant_rule_matches(const std::string& rule, const std::string& module) {
  if (rule.rfind("re:", 0) == 0)
    return std::regex_search(module, cached_regex(rule.substr(3)),
                             std::regex_constants::match_continuous);
  if (is_glob(rule)) return glob_match(rule.c_str(), module.c_str());
  return segment_run(rule, module);
}

std::optional<std::string> QuantConfig::excluded_by(const std::vector<std::string>& names) const {
  for (const auto& rule : exclude)
    for (const auto& n : names)
      if (quant_rule_matches(rule, n)) return rule;
  return std::nullopt;
}

QuantConfig parse_quant_config(const json& q, const std::string& src) {
  if (q.is_null() || (q.is_object() && q.empty())) return {};
  if (!q.is_object()) fail("{}: field 'quantization_config' must be an object", src);
  if (!q.contains("quant_method") || !q["quant_method"].is_string())
    fail("{}: field 'quantization_config.quant_method' is missing or not a string", src);
  const std::string m = q["quant_method"].get<std::string>();
  if (m == "fp8") return parse_fp8(q, src);
  if (m == "quark" || m == "mxfp4") return parse_quark(q, m, src);
  fail("{}: field 'quantization_config.quant_method' is '{}' (supported: fp8, quark, mxfp4)", src,
       m);
}

json quant_config_to_json(const QuantConfig& c) {
  if (c.method.empty() || c.online) return nullptr;  // online: the checkpoint itself is bf16
  json q = {{"quant_method", c.method}};
  if (c.method == "fp8") {
    q["activation_scheme"] = "dynamic";
    q["fmt"] = "e4m3";
    q["weight_block_size"] = {c.block_n, c.block_k};
    if (c.ue8m0) q["scale_fmt"] = "ue8m0";
    if (!c.exclude.empty()) q["modules_to_not_convert"] = c.exclude;
    return q;
  }
  q["quant_mode"] = "eager_mode";
  q["export"] = {{"pack_method", "reorder"},
                 {"weight_format", "real_quantized"},
                 {"kv_cache_group", json::array()},
                 {"min_kv_scale", 0.0},
                 {"weight_merge_groups", nullptr}};
  q["global_quant_config"] = quark_layer_json(c.global);
  json layers = json::object(), types = json::object();
  for (const auto& [k, v] : c.layer_rules) layers[k] = quark_layer_json(v);
  for (const auto& [k, v] : c.layer_type_rules) types[k] = quark_layer_json(v);
  q["layer_quant_config"] = layers;
  q["layer_type_quant_config"] = types;
  q["kv_cache_quant_config"] = json::object();
  q["exclude"] = c.exclude;
  return q;
}

OnlineQuantRequest parse_online_quant(const std::string& quantization_flag,
                                      const std::string& extra) {
  OnlineQuantRequest r;
  r.quantization = quantization_flag;
  if (!r.quantization.empty() && r.quantization != "fp8" && r.quantization != "quark" &&
      r.quantization != "mxfp4")
    throw InvalidArgument(fmt::format(
        "--quantization '{}' is not supported (fp8: block FP8, quantizing a bf16 checkpoint at "
        "load; quark, mxfp4: the checkpoint's own MXFP4)",
        r.quantization));
  if (extra.empty()) return r;
  json j;
  try {
    j = json::parse(extra);
  } catch (const std::exception&) {
    throw InvalidArgument(
        fmt::format("--model-loader-extra-config must be a JSON object, got '{}'", extra));
  }
  if (!j.is_object())
    throw InvalidArgument(
        fmt::format("--model-loader-extra-config must be a JSON object, got '{}'", extra));
  for (const auto& [k, v] : j.items()) {
    // SGLang's default loader knobs: meaningful there, nothing to do here.
    if (k == "enable_multithread_load" || k == "num_threads") continue;
    if (k != "online_quant_config")
      throw InvalidArgument(fmt::format(
          "--model-loader-extra-config: unknown key '{}' (supported: online_quant_config)", k));
    if (!v.is_object())
      throw InvalidArgument("--model-loader-extra-config: 'online_quant_config' must be an object");
    for (const auto& [ok, ov] : v.items()) {
      const std::string field = "--model-loader-extra-config: 'online_quant_config." + ok + "'";
      if (ok == "global_quant_config") {
        if (!ov.is_string() || ov.get<std::string>() != "ptpc_fp8")
          throw InvalidArgument(
              fmt::format("{} is {} (supported: \"ptpc_fp8\")", field, ov.dump()));
        r.scheme = "ptpc_fp8";
      } else if (ok == "exclude_layer") {
        if (!ov.is_array())
          throw InvalidArgument(fmt::format("{} must be a list of module globs", field));
        for (const auto& e : ov) {
          if (!e.is_string() || e.get<std::string>().empty())
            throw InvalidArgument(fmt::format("{} has {}, not a module glob", field, e.dump()));
          r.exclude.push_back(e.get<std::string>());
        }
      } else {
        throw InvalidArgument(
            fmt::format("{}: unknown key (supported: global_quant_config, exclude_layer)", field));
      }
    }
    if (r.scheme.empty())
      throw InvalidArgument(
          "--model-loader-extra-config: 'online_quant_config.global_quant_config' is missing");
  }
  return r;
}

QuantConfig without_activation_quant(const QuantConfig& q, const std::string& src) {
  if (q.method != "quark" && q.method != "mxfp4")
    throw InvalidArgument(fmt::format(
        "{}: --weight-only-quant applies to Quark / MXFP4 checkpoints (their input_tensors); this "
        "one's quant_method is {}",
        src, q.method.empty() ? "none" : q.method));
  QuantConfig c = q;
  c.global.input.reset();
  for (auto& [pattern, l] : c.layer_rules) l.input.reset();
  for (auto& [type, l] : c.layer_type_rules) l.input.reset();
  return c;
}

namespace {

QuantConfig apply_scheme(const QuantConfig& ck, const OnlineQuantRequest& r,
                         const std::string& src) {
  if (r.quantization.empty() && r.scheme.empty()) return ck;
  if (!r.scheme.empty() && !r.quantization.empty())
    throw InvalidArgument(
        fmt::format("--quantization {} and online_quant_config {} both ask for a scheme; give one",
                    r.quantization, r.scheme));
  if (!ck.method.empty()) {
    if (!r.scheme.empty())
      throw InvalidArgument(fmt::format(
          "{}: online_quant_config {} quantizes high-precision weights, but the checkpoint is "
          "already quantized (quant_method {})",
          src, r.scheme, ck.method));
    if (r.quantization != ck.method)
      throw InvalidArgument(
          fmt::format("{}: --quantization {} contradicts the checkpoint's quant_method {}", src,
                      r.quantization, ck.method));
    return ck;  // the flag names what the checkpoint already is
  }
  if (r.quantization == "quark" || r.quantization == "mxfp4")
    throw InvalidArgument(fmt::format(
        "{}: --quantization {} needs an MXFP4 checkpoint; this one has no quantization_config "
        "(online quantization supports fp8 only)",
        src, r.quantization));
  QuantConfig c;
  c.method = "fp8";
  c.online = true;
  if (r.scheme == "ptpc_fp8") {
    c.online_scheme = "ptpc_fp8";
    c.per_channel = true;
    c.block_n = 1;
    c.block_k = 0;  // each tensor's K
    c.exclude = r.exclude;
  } else {
    c.online_scheme = "fp8";
  }
  return c;
}

}  // namespace

QuantConfig apply_online_quant(const QuantConfig& ck, const OnlineQuantRequest& r,
                               const std::string& src) {
  const QuantConfig c = apply_scheme(ck, r, src);
  return r.weight_only ? without_activation_quant(c, src) : c;
}

}  // namespace tandem
