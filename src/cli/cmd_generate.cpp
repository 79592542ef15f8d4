// tandem generate: one completion, printed as it is produced.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "core/log.h"
#include "runtime/engine_options.h"
#include "runtime/generator.h"
#include "server/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

Runner add_generate(CLI::App& app) {
  struct Args {
    std::string model_path, prompt, prompt_ids, quantization, loader_extra;
    int64_t max_new_tokens = 64, chunk = 0;
    float temperature = 0, top_p = 1;
    int32_t top_k = -1;
    uint64_t seed = 0;
    bool ignore_eos = false;
    std::string kv_cache_dtype = "auto";
  };
  auto a = std::make_shared<Args>();
  app.add_option("--model-path", a->model_path, "Checkpoint folder (default: the built-in model)");
  app.add_option("--prompt", a->prompt, "Prompt text");
  app.add_option("--prompt-ids", a->prompt_ids, "Prompt as comma-separated token ids");
  app.add_option("--max-new-tokens", a->max_new_tokens, "Tokens to generate");
  app.add_option("--temperature", a->temperature, "0 = greedy");
  app.add_option("--top-k", a->top_k, "Keep the k most likely tokens (-1 = off)");
  app.add_option("--top-p", a->top_p, "Nucleus sampling mass");
  app.add_option("--seed", a->seed, "Sampling seed");
  app.add_option("--prefill-chunk", a->chunk, "Prefill in chunks of this many tokens (0 = whole)");
  app.add_option("--quantization", a->quantization,
                 "fp8: quantize a bf16 checkpoint to 128x128 block FP8 while loading");
  app.add_option("--model-loader-extra-config", a->loader_extra,
                 "JSON, as SGLang: {\"online_quant_config\": {\"global_quant_config\": "
                 "\"ptpc_fp8\", \"exclude_layer\": [globs]}}");
  app.add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-sequence tokens");
  app.add_option("--kv-cache-dtype", a->kv_cache_dtype,
                 "auto | bf16 | bfloat16 | fp8_e4m3 | fp8 (FP8 KV rows, docs/kv-cache.md)");
  return [a]() {
    const bool kv_fp8 = parse_kv_cache_dtype(a->kv_cache_dtype);
    const std::string dir = a->model_path.empty() ? default_model_path() : a->model_path;
    LoadOptions lo;
    lo.load_mtp = false;
    lo.online_quant = parse_online_quant(a->quantization, a->loader_extra);
    auto model = Model::load(dir, lo);
    std::optional<Tokenizer> tok;
    const auto tok_path = std::filesystem::path(dir) / "tokenizer.json";
    if (std::filesystem::exists(tok_path)) tok = Tokenizer::from_file(tok_path.string());
    GenerateRequest req;
    if (!a->prompt_ids.empty()) {
      std::stringstream ss(a->prompt_ids);
      std::string item;
      while (std::getline(ss, item, ',')) req.prompt.push_back(std::stoi(item));
    } else {
      if (!tok) fail("{} has no tokenizer.json; pass --prompt-ids", dir);
      req.prompt =
          tok->encode(a->prompt.empty() ? "It is a truth universally acknowledged" : a->prompt);
    }
    req.max_new_tokens = a->max_new_tokens;
    req.prefill_chunk = a->chunk;
    req.sampling = {a->temperature, a->top_k, a->top_p, a->seed};
    if (!a->ignore_eos)
      for (int64_t e : model->config().eos_token_ids)
        req.stop_ids.push_back(static_cast<int32_t>(e));
    Generator gen(*model, static_cast<int64_t>(req.prompt.size()) + req.max_new_tokens, 16, kv_fp8);
    if (tok) std::printf("%s", a->prompt.c_str());
    std::fflush(stdout);
    // The server's incremental detokenizer: never prints half a UTF-8 character.
    std::optional<server::IncrementalDetokenizer> detok;
    if (tok) detok.emplace(*tok, /*skip_special_tokens=*/true);
    const auto t0 = std::chrono::steady_clock::now();
    GenerateResult r = gen.generate(req, [&](int32_t id) {
      if (detok) {
        const std::string text = detok->push(id);
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else {
        std::printf(" %d", id);
      }
      std::fflush(stdout);
      return true;
    });
    if (detok) {
      const std::string rest = detok->flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\n");
    log_info("{} prompt tokens, {} generated in {:.2f} s ({:.1f} tokens/s){}", req.prompt.size(),
             r.tokens.size(), s, r.tokens.size() / s, r.stopped ? ", stopped at EOS" : "");
    return 0;
  };
}

}  // namespace tandem::cli
