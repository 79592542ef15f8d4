// tandem make-checkpoint: a seeded random-weight checkpoint of any supported architecture.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "model/presets.h"
#include "model/quantize_checkpoint.h"
#include "model/random_checkpoint.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

// The special tokens of the byte-level tokenizer written with --with-tokenizer (ids 256+),
// spelled as GLM spells them so the GLM-style chat template applies.
const std::vector<std::string> kSpecialTokens = {
    "<|endoftext|>", "[gMASK]",       "<sop>",           "<|system|>",
    "<|user|>",      "<|assistant|>", "<|observation|>", "<think>",
    "</think>",      "<tool_call>",   "</tool_call>",    "<arg_key>",
    "</arg_key>",    "<arg_value>",   "</arg_value>",    "<tool_response>"};

// A compact GLM-style chat template: [gMASK]<sop>, role tokens, optional thinking.
const char* kChatTemplate =
    "[gMASK]<sop>{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}<|system|>\n{{ m.content }}"
    "{%- elif m.role == 'user' -%}<|user|>\n{{ m.content }}"
    "{%- elif m.role == 'assistant' -%}<|assistant|>\n{{ m.content }}"
    "{%- elif m.role == 'tool' -%}<|observation|>\n<tool_response>{{ m.content }}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and not enable_thinking -%}\n</think>{%- endif -%}"
    "{%- endif -%}";

void write_tokenizer_files(const std::string& dir) {
  {
    std::ofstream out(std::filesystem::path(dir) / "tokenizer.json");
    out << make_byte_level_tokenizer_json(kSpecialTokens);
  }
  nlohmann::ordered_json cfg = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                {"eos_token", "<|endoftext|>"},
                                {"pad_token", "<|endoftext|>"},
                                {"chat_template", kChatTemplate}};
  std::ofstream out(std::filesystem::path(dir) / "tokenizer_config.json");
  out << cfg.dump(2) << "\n";
}

}  // namespace

Runner add_make_checkpoint(CLI::App& app) {
  struct Args {
    std::string preset, config, from, out, dtype = "bf16", quant;
    uint64_t seed = 0;
    int64_t num_layers = 0;
    double shard_mb = 2048;
    bool with_tokenizer = false;
    bool config_only = false;
    std::vector<std::string> overrides;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--preset", a->preset,
                 "Named configuration (glm5.2, tiny-glm5.2, deepseek-v3.2, ...)");
  app.add_option("--config", a->config, "A config.json to take the configuration from");
  app.add_option("--from", a->from,
                 "Quantize this bf16/f32 checkpoint (with --quant) instead of writing random "
                 "weights");
  app.add_option("--out", a->out, "Output folder")->required();
  app.add_option("--seed", a->seed, "Random seed");
  app.add_option("--dtype", a->dtype, "Storage dtype of unquantized tensors: bf16 | f32");
  app.add_option("--quant", a->quant,
                 "Quantize linear weights: fp8 (128x128 blocks) | mxfp4 (MoE experts)");
  app.add_option("--num-layers", a->num_layers,
                 "Override num_hidden_layers (a slice of a real model)");
  app.add_option("--set", a->overrides,
                 "Override a config.json field: KEY=JSON (repeatable), e.g. index_topk=16");
  app.add_option("--shard-size-mb", a->shard_mb, "Largest shard, in MB");
  app.add_flag("--with-tokenizer", a->with_tokenizer,
               "Also write a byte-level tokenizer and chat template");
  app.add_flag("--config-only", a->config_only,
               "Write config.json (and the tokenizer with --with-tokenizer) but no weights: a "
               "folder for `serve --load-format dummy` at full size");
  return [a]() {
    if (!a->from.empty()) {
      if (!a->preset.empty() || !a->config.empty() || a->quant.empty())
        fail("make-checkpoint --from DIR takes --quant fp8|mxfp4 and no --preset / --config");
      quantize_checkpoint(a->from, a->out, a->quant, static_cast<uint64_t>(a->shard_mb * 1e6));
      log_info("wrote the {} copy of {} to {}", a->quant, a->from, a->out);
      return 0;
    }
    if (a->preset.empty() == a->config.empty())
      fail("make-checkpoint: give exactly one of --preset or --config");
    ModelConfig c =
        a->preset.empty() ? ModelConfig::from_file(a->config) : preset_config(a->preset);
    if (!a->overrides.empty()) {
      nlohmann::json j = c.to_json();
      for (const std::string& kv : a->overrides) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) fail("make-checkpoint: --set expects KEY=JSON, got '{}'", kv);
        try {
          j[kv.substr(0, eq)] = nlohmann::json::parse(kv.substr(eq + 1));
        } catch (const nlohmann::json::exception&) {
          j[kv.substr(0, eq)] = kv.substr(eq + 1);  // a bare string
        }
      }
      c = ModelConfig::from_json(j, "make-checkpoint --set");
    }
    if (a->num_layers > 0) {
      if (a->num_layers > ConfigLimits::kMaxLayers)  // before the per-layer lists are sized
        fail("make-checkpoint: --num-layers {} is over the limit of {}", a->num_layers,
             ConfigLimits::kMaxLayers);
      c.num_hidden_layers = a->num_layers;
      c.layer_is_moe.resize(static_cast<size_t>(a->num_layers), true);
      if (c.has_indexer) c.indexer_full.resize(static_cast<size_t>(a->num_layers), true);
      c.validate("make-checkpoint --num-layers");
    }
    RandomCheckpointOptions o;
    o.seed = a->seed;
    o.dtype = a->dtype;
    o.quant = a->quant;
    o.max_shard_bytes = static_cast<uint64_t>(a->shard_mb * 1e6);
    if (a->config_only)
      write_checkpoint_config(c, a->out, o);
    else
      write_random_checkpoint(c, a->out, o);
    if (a->with_tokenizer) write_tokenizer_files(a->out);
    log_info("wrote {} checkpoint to {}", c.architecture, a->out);
    return 0;
  };
}

}  // namespace tandem::cli
