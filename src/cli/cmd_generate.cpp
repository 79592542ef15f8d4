// tandem generate: one completion, printed as it is produced. It runs the serving Engine with a
// single request, so every engine feature `serve` has (devices, MTP speculation, deterministic
// kernels) works here with the same flags and the same checks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "model/hub_cache.h"
#include "runtime/engine.h"
#include "server/detokenizer.h"
#include "server/server_args.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      ids.push_back(std::stoi(item));
    } catch (const std::exception&) {
      throw InvalidArgument(fmt::format("--prompt-ids: '{}' is not a token id", item));
    }
  }
  return ids;
}

}  // namespace

Runner add_generate(CLI::App& app) {
  struct Args {
    // The engine flags, spelled and checked as `serve` spells and checks them.
    server::ServerArgs engine;
    std::string prompt, prompt_ids;
    int64_t max_new_tokens = 64, chunk = 0;
    float temperature = 0, top_p = 1;
    int32_t top_k = -1;
    uint64_t seed = 0;
    bool ignore_eos = false;
  };
  auto a = std::make_shared<Args>();
  server::ServerArgs& e = a->engine;
  app.add_option("--model-path", e.model_path,
                 "Checkpoint folder, or a Hugging Face Hub id (org/name) in the local Hub cache "
                 "(default: the built-in model)");
  app.add_option("--revision", e.revision,
                 "Branch, tag or commit hash of a Hub id in --model-path (default: main)");
  app.add_option("--prompt", a->prompt, "Prompt text");
  app.add_option("--prompt-ids", a->prompt_ids, "Prompt as comma-separated token ids");
  app.add_option("--max-new-tokens", a->max_new_tokens, "Tokens to generate");
  app.add_option("--temperature", a->temperature, "0 = greedy");
  app.add_option("--top-k", a->top_k, "Keep the k most likely tokens (-1 = off)");
  app.add_option("--top-p", a->top_p, "Nucleus sampling mass");
  app.add_option("--seed", a->seed, "Sampling seed");
  app.add_option("--prefill-chunk", a->chunk, "Prefill in chunks of this many tokens (0 = whole)");
  app.add_option("--device", e.device, "cpu, cuda, or auto (cuda when available)")
      ->capture_default_str();
  app.add_option("--quantization", e.quantization,
                 "fp8: quantize a bf16 checkpoint to 128x128 block FP8 while loading");
  app.add_option("--model-loader-extra-config", e.model_loader_extra_config,
                 "JSON, as SGLang: {\"online_quant_config\": {\"global_quant_config\": "
                 "\"ptpc_fp8\", \"exclude_layer\": [globs]}}");
  app.add_flag("--weight-only-quant", e.weight_only_quant,
               "Quark / MXFP4 checkpoints: keep activations in bf16 (W4A16) where the checkpoint's "
               "input_tensors quantize them (W4A4)");
  app.add_flag("--ignore-eos", a->ignore_eos, "Do not stop at end-of-sequence tokens");
  app.add_option("--kv-cache-dtype", e.kv_cache_dtype,
                 "auto | bf16 | bfloat16 | fp8_e4m3 | fp8 (FP8 KV rows, docs/kv-cache.md)");
  app.add_option(
      "--speculative-algorithm", e.speculative_algorithm,
      "EAGLE or NEXTN: draft with the checkpoint's MTP layer (prints the accept length)");
  app.add_option("--speculative-num-steps", e.speculative_num_steps,
                 "Draft tokens per round (adaptive: the depth it starts at)")
      ->capture_default_str();
  app.add_option("--speculative-eagle-topk", e.speculative_eagle_topk,
                 "Draft branching; only 1 is supported")
      ->capture_default_str();
  app.add_option("--speculative-num-draft-tokens", e.speculative_num_draft_tokens,
                 "Tokens verified per round (num_steps + 1 with topk 1)");
  app.add_flag("--speculative-adaptive,!--disable-speculative-adaptive", e.speculative_adaptive,
               "Choose the drafts of every step from the batch size, the running acceptance and "
               "the measured cost of each depth, in [0, --speculative-max-steps] (default: on; "
               "--disable-speculative-adaptive always drafts --speculative-num-steps)");
  app.add_flag("--speculative-draft-reads-prompts", e.speculative_draft_reads_prompts,
               "Adaptive depth: the draft reads each prompt along with its prefill where the "
               "batch is expected to speculate and that pays for itself (default: off, a "
               "catch-up before the prompt's first speculative round)");
  app.add_option("--speculative-max-steps", e.speculative_max_steps,
                 "Deepest adaptive round (default: max(--speculative-num-steps, 5))");
  app.add_flag("--enable-deterministic-inference", e.enable_deterministic_inference,
               "Batch-invariant kernels (GPU): greedy speculation reproduces plain decoding");
  app.add_flag("--disable-cuda-graph", e.disable_cuda_graph, "Do not capture CUDA graphs");
  app.add_option("--cuda-graph-max-prefill-tokens", e.cuda_graph_max_prefill_tokens,
                 "Prefill steps of at most this many padded tokens replay CUDA graphs (0: eager)");
  return [a]() {
    server::ServerArgs args = a->engine;
    if (args.model_path.empty()) args.model_path = default_model_path();
    args.model_path = resolve_model_path(args.model_path, args.revision, "--model-path");
    log_info("model: {}", args.model_path);
    const bool cuda_available = has_device_interface(DeviceType::CUDA);
    std::vector<std::string> warnings;
    EngineOptions eo = server::engine_options(args, cuda_available, &warnings);
    for (const std::string& w : warnings) log_warn("{}", w);
    const bool cuda = args.device == "cuda" || (args.device == "auto" && cuda_available);

    const std::string& dir = args.model_path;
    std::optional<Tokenizer> tok;
    const auto tok_path = std::filesystem::path(dir) / "tokenizer.json";
    if (std::filesystem::exists(tok_path)) tok = Tokenizer::from_file(tok_path.string());
    Request req;
    if (!a->prompt_ids.empty()) {
      req.prompt = parse_ids(a->prompt_ids);
    } else {
      if (!tok) fail("{} has no tokenizer.json; pass --prompt-ids", dir);
      req.prompt =
          tok->encode(a->prompt.empty() ? "It is a truth universally acknowledged" : a->prompt);
    }
    req.max_new_tokens = a->max_new_tokens;
    req.sampling = {a->temperature, a->top_k, a->top_p, a->seed};

    LoadOptions lo;
    lo.device = cuda ? Device::cuda(process_cuda_device()) : Device::cpu();
    lo.dtype = cuda ? DType::BF16 : DType::F32;
    lo.load_mtp = eo.spec.enabled();
    lo.online_quant = parse_online_quant(args.quantization, args.model_loader_extra_config);
    lo.online_quant.weight_only = args.weight_only_quant;
    device_interface(lo.device.type).make_current(lo.device);
    std::shared_ptr<const Model> model = Model::load(dir, lo);
    if (!a->ignore_eos)
      for (int64_t id : model->config().eos_token_ids)
        req.stop_token_ids.push_back(static_cast<int32_t>(id));

    // One request: a cache just large enough for it (plus a verify round's lookahead), the
    // prefill in one chunk unless --prefill-chunk says otherwise, no prefix cache to fill.
    const int64_t prompt_len = static_cast<int64_t>(req.prompt.size());
    eo.max_running_requests = 1;
    eo.enable_prefix_cache = false;
    eo.max_total_tokens =
        prompt_len + a->max_new_tokens + 2 * (kMaxSpeculativeSteps + 1) + 2 * eo.page_size;
    eo.chunked_prefill_size = a->chunk > 0 ? a->chunk : std::max<int64_t>(prompt_len, 1);
    eo.max_prefill_tokens = eo.chunked_prefill_size;
    Engine engine(model, eo);

    if (tok && a->prompt_ids.empty()) std::printf("%s", a->prompt.c_str());
    std::fflush(stdout);
    // The server's incremental detokenizer: never prints half a UTF-8 character.
    std::optional<server::IncrementalDetokenizer> detok;
    if (tok) detok.emplace(*tok, /*skip_special_tokens=*/true);
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<RequestStream> stream = engine.submit(std::move(req));
    RequestOutput o;
    for (;;) {
      if (!stream->next(o, std::chrono::milliseconds(100))) continue;
      for (int32_t id : o.new_tokens) {
        if (detok) {
          const std::string text = detok->push(id);
          std::fwrite(text.data(), 1, text.size(), stdout);
        } else {
          std::printf(" %d", id);
        }
      }
      std::fflush(stdout);
      if (o.finished) break;
    }
    if (o.finish_reason == FinishReason::kError) fail("generation failed: {}", o.error);
    if (detok) {
      const std::string rest = detok->flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("\n");
    if (eo.spec.enabled() && o.spec_verify_steps > 0)
      // Tokens committed per verify round, the bonus token included (SGLang's accept length).
      std::printf("accept length: %.2f (%lld verify rounds, %lld of %lld drafts accepted)\n",
                  static_cast<double>(o.spec_accepted_drafts + o.spec_verify_steps) /
                      static_cast<double>(o.spec_verify_steps),
                  static_cast<long long>(o.spec_verify_steps),
                  static_cast<long long>(o.spec_accepted_drafts),
                  static_cast<long long>(o.spec_draft_tokens));
    log_info("{} prompt tokens, {} generated in {:.2f} s ({:.1f} tokens/s){}", o.prompt_tokens,
             o.completion_tokens, s, o.completion_tokens / s,
             o.finish_reason == FinishReason::kStop ? ", stopped at EOS" : "");
    return 0;
  };
}

}  // namespace tandem::cli
