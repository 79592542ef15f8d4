// tandem serve: the OpenAI-compatible and SGLang-native HTTP server. Takes SGLang's launch flags
// so `python -m sglang.launch_server ...` command lines work with the program name changed;
// flags of other vendors' backends are accepted with a warning (docs/server.md).
#include <pthread.h>
#include <signal.h>

#include <set>
#include <string>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/device.h"
#include "core/log.h"
#include "server/serve.h"

namespace tandem::cli {

namespace {
int g_cuda_device = 0;
}

int process_cuda_device() {
  return g_cuda_device;
}

Runner add_serve(CLI::App& app) {
  auto a = std::make_shared<server::ServerArgs>();
  auto log_level = std::make_shared<std::string>();
  app.add_option("--model-path,--model", a->model_path,
                 "Checkpoint folder, or a Hugging Face Hub id (org/name) in the local Hub cache "
                 "(default: the built-in model)");
  app.add_option("--tokenizer-path", a->tokenizer_path,
                 "Tokenizer folder or Hub id (default: --model-path)");
  app.add_option("--revision", a->revision,
                 "Branch, tag or commit hash of a Hub id in --model-path / --tokenizer-path, "
                 "looked up in the local Hugging Face cache (default: main)");
  app.add_option("--served-model-name", a->served_model_name,
                 "Model id in the API (default: --model-path)");
  app.add_option("--host", a->host, "Address to listen on")->capture_default_str();
  app.add_option("--port", a->port, "Port to listen on (0: any free port)")->capture_default_str();
  app.add_option("--device", a->device, "cpu, cuda, or auto (cuda when available)")
      ->capture_default_str();
  app.add_option("--tp-size,--tensor-parallel-size", a->tp_size,
                 "Ranks (GPUs) holding the model: attention heads, MLPs and the vocabulary are "
                 "split over them; one process per rank")
      ->capture_default_str();
  app.add_option("--ep-size,--expert-parallel-size", a->ep_size,
                 "Expert groups: each of ep-size groups of tp-size / ep-size ranks holds "
                 "experts / ep-size routed experts (divides --tp-size)")
      ->capture_default_str();
  app.add_option("--nnodes", a->nnodes, "Nodes the ranks are spread over")->capture_default_str();
  app.add_option("--node-rank", a->node_rank, "This node's index (node 0 serves HTTP)")
      ->capture_default_str();
  app.add_option("--dist-init-addr", a->dist_init_addr,
                 "host:port where node 0 listens for the other ranks (default on one node: a "
                 "free loopback port)");
  app.add_option("--base-gpu-id", a->base_gpu_id, "This node's first GPU")->capture_default_str();
  app.add_option("--dist-timeout", a->dist_timeout,
                 "Seconds to wait for the nodes to join, and for one collective inside a step, "
                 "before the server stops with an error")
      ->capture_default_str();
  // Set by a node's launcher on the ranks it starts; not for users.
  app.add_option("--dist-local-rank", a->dist_local_rank)->group("");
  app.add_option("--mem-fraction-static", a->mem_fraction_static,
                 "Accepted for SGLang compatibility; the KV cache is sized by --max-total-tokens");
  app.add_flag("--trust-remote-code", a->trust_remote_code, "Accepted (no remote code is run)");
  app.add_flag("--disable-radix-cache", a->disable_radix_cache, "Turn the prefix cache off");
  app.add_flag("--disable-cuda-graph", a->disable_cuda_graph, "Do not capture CUDA graphs");
  app.add_option("--cuda-graph-max-prefill-tokens", a->cuda_graph_max_prefill_tokens,
                 "Prefill steps of at most this many padded tokens replay CUDA graphs (0: prefill "
                 "always eager; default 256 on GPUs)");
  app.add_option("--warm-up-tokens", a->warm_up_tokens,
                 "Before the first request, prefill forwards at every GEMM row bucket up to this "
                 "many tokens, so no request pays a kernel's first launch (0: none; default "
                 "--max-prefill-tokens on GPUs, none on the CPU)");
  app.add_flag("--enable-deterministic-inference", a->enable_deterministic_inference,
               "Batch-invariant kernels for every batch shape (GPU; slower at large batches)");
  app.add_option("--load-format", a->load_format,
                 "auto (read the checkpoint) or dummy (random weights of its config.json, created "
                 "on the device)");
  app.add_flag("--enable-return-hidden-states", a->enable_return_hidden_states,
               "Allow requests to ask for return_hidden_states");
  app.add_option("--max-running-requests", a->max_running_requests, "Largest running batch")
      ->capture_default_str();
  app.add_option("--max-queued-requests", a->max_queued_requests,
                 "Requests that may wait to start; beyond it new ones get 503 with Retry-After "
                 "(default 0: no bound)")
      ->capture_default_str();
  app.add_option("--page-size", a->page_size,
                 "Tokens per KV cache page (default: 64 on CUDA, 16 on the CPU)");
  app.add_option("--chunked-prefill-size", a->chunked_prefill_size,
                 "Largest prefill chunk of one request per step")
      ->capture_default_str();
  app.add_option("--max-prefill-tokens", a->max_prefill_tokens, "Prefill token budget per step")
      ->capture_default_str();
  app.add_option("--scheduler-delay-factor", a->scheduler_delay_factor,
                 "While requests decode, admit waiting ones once the oldest has waited this "
                 "many times the last prefill step (vLLM's flag), so close arrivals share a "
                 "prefill step")
      ->capture_default_str();
  app.add_flag("--enable-mixed-chunk", a->enable_mixed_chunk,
               "Decoding requests ride along in prefill steps (one token of the budget each), "
               "so they keep decoding while prompts are prefilled; plain decoding only");
  app.add_option("--max-total-tokens", a->max_total_tokens, "KV cache capacity in tokens")
      ->capture_default_str();
  app.add_option("--context-length", a->context_length,
                 "Longest prompt + output (default: the model's max_position_embeddings)");
  app.add_option("--kv-cache-dtype", a->kv_cache_dtype,
                 "auto | bf16 | bfloat16 (the compute dtype) | fp8_e4m3 | fp8 (656-byte latent "
                 "rows, 132-byte indexer keys)")
      ->capture_default_str();
  app.add_option("--quantization", a->quantization,
                 "fp8: quantize a bf16 checkpoint to 128x128 block FP8 while loading (on a "
                 "quantized checkpoint: must name its quant_method)");
  app.add_option("--model-loader-extra-config", a->model_loader_extra_config,
                 "JSON; online_quant_config {global_quant_config: ptpc_fp8, exclude_layer: "
                 "[globs]} quantizes a bf16 checkpoint per output channel while loading");
  app.add_flag("--weight-only-quant", a->weight_only_quant,
               "Quark / MXFP4 checkpoints: keep activations in bf16 (W4A16) where the checkpoint's "
               "input_tensors quantize them (W4A4)");
  app.add_option("--speculative-algorithm", a->speculative_algorithm,
                 "EAGLE or NEXTN: draft with the checkpoint's MTP layer");
  app.add_option("--speculative-num-steps", a->speculative_num_steps,
                 "Draft tokens per round (adaptive: the depth it starts at)")
      ->capture_default_str();
  app.add_option("--speculative-eagle-topk", a->speculative_eagle_topk,
                 "Draft branching; only 1 is supported")
      ->capture_default_str();
  app.add_option("--speculative-num-draft-tokens", a->speculative_num_draft_tokens,
                 "Tokens verified per round (num_steps + 1 with topk 1)");
  app.add_flag("--speculative-adaptive,!--disable-speculative-adaptive", a->speculative_adaptive,
               "Choose the drafts of every step from the batch size, the running acceptance and "
               "the measured cost of each depth, in [0, --speculative-max-steps] (default: on; "
               "--disable-speculative-adaptive always drafts --speculative-num-steps)");
  app.add_flag("--speculative-draft-reads-prompts", a->speculative_draft_reads_prompts,
               "Adaptive depth: the draft reads each prompt along with its prefill where the "
               "batch is expected to speculate and that pays for itself (default: off, a "
               "catch-up before the prompt's first speculative round)");
  app.add_option(
      "--speculative-token-map", a->speculative_token_map,
      "JSON array of token ids: the draft proposes only these, through an LM head of "
      "their rows (cheaper drafts; output unchanged; `tandem make-token-map` writes one)");
  app.add_option("--speculative-max-steps", a->speculative_max_steps,
                 "Deepest adaptive round (default: max(--speculative-num-steps, 5))");
  app.add_option("--reasoning-parser", a->reasoning_parser,
                 "Split <think> reasoning of chat completions into reasoning_content: glm45, "
                 "deepseek-r1, deepseek-v3 or none (default: none)");
  app.add_option("--tool-call-parser", a->tool_call_parser,
                 "Parse tool calls in chat completions into tool_calls: glm45, glm47, deepseekv3, "
                 "deepseekv31 or deepseekv32 (default: none; tools are still given to the "
                 "template)");
  app.add_flag("--constrained-json-disable-any-whitespace",
               a->constrained_json_disable_any_whitespace,
               "Structured outputs: JSON without whitespace between tokens (default: up to 20 "
               "bytes of whitespace per gap)");
  app.add_option("--api-key", a->api_key, "Require 'Authorization: Bearer <key>'");
  app.add_option("--allowed-origins", a->allowed_origins,
                 "Origins browsers may call from (CORS): a JSON list such as '[\"http://a.com\"]' "
                 "or a comma-separated list; * allows any (default: none)");
  app.add_flag("--disable-web-page", a->disable_web_page,
               "No web page at / (by default / serves a chat with the model and live "
               "speculative-decoding statistics)");
  app.add_option("--graceful-shutdown-timeout", a->graceful_shutdown_timeout,
                 "On SIGTERM, seconds requests in flight may take to finish before they are "
                 "aborted (new requests get 503 meanwhile; a second signal stops at once)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--http-threads", a->http_threads,
                 "HTTP worker threads (default: max(64, 2 x max-running-requests + 32))");
  app.add_option(
         "--stream-threads", a->stream_threads,
         "Threads that write streamed responses (default 0: one, which kept up with "
         "~95k tokens/s on 16 cores; raise it for bodies with heavy per-token work, such as "
         "hidden states)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-connections", a->max_connections,
                 "Open connections beyond which a new one gets 503 (default 0: 8192, or fewer "
                 "when the open-file limit is lower)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--http-idle-timeout", a->http_idle_timeout,
                 "Seconds a connection may wait without a request before it is closed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--http-header-timeout", a->http_header_timeout,
                 "Seconds a request's line and headers may take to arrive, from their first byte "
                 "(408 past it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--http-body-timeout", a->http_body_timeout,
                 "Seconds a request body may take to arrive after its headers (408 past it)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--log-level", *log_level, "debug, info, warning or error");
  // --help lists SGLang's flags (same names, same meaning) apart from the ones only Tandem has.
  const std::set<std::string> tandem_only = {
      "--max-queued-requests",   "--dist-timeout",      "--graceful-shutdown-timeout",
      "--http-threads",          "--allowed-origins",   "--disable-web-page",
      "--speculative-max-steps", "--max-connections",   "--http-idle-timeout",
      "--http-header-timeout",   "--http-body-timeout", "--weight-only-quant",
      "--stream-threads"};
  for (CLI::Option* o : app.get_options()) {
    const std::string name = o->get_name();
    if (o->get_group().empty() || name == "--help") continue;  // hidden, or help itself
    o->group(tandem_only.count(name) ? "Tandem's own" : "SGLang-compatible");
  }
  // Flags that only mean something to another vendor's backend (--attention-backend,
  // --enable-metrics, ...) are collected here and reported as ignored.
  app.allow_extras();
  // The backends are set up between parsing and running: tell them which GPU is this process's.
  app.parse_complete_callback([a] {
    g_cuda_device = static_cast<int>(a->base_gpu_id + a->dist_local_rank);
    // The server takes SIGINT/SIGTERM on one thread (sigwait) to drain gracefully. Block them now,
    // before the backends start: threads the CUDA runtime creates inherit this mask, and a signal
    // delivered to one of them would otherwise kill the process at once. Only the process that
    // serves HTTP (global rank 0); the other ranks keep the default actions.
    if (a->node_rank == 0 && a->dist_local_rank == 0) {
      sigset_t sigs;
      sigemptyset(&sigs);
      sigaddset(&sigs, SIGINT);
      sigaddset(&sigs, SIGTERM);
      pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
    }
  });
  return [a, log_level, &app]() {
    if (!log_level->empty()) {
      const std::string& l = *log_level;
      set_log_level(l == "debug"                    ? LogLevel::Debug
                    : l == "warning" || l == "warn" ? LogLevel::Warn
                    : l == "error"                  ? LogLevel::Error
                                                    : LogLevel::Info);
    }
    a->ignored_flags = app.remaining();
    if (a->model_path.empty()) a->model_path = default_model_path();
    server::resolve_hub_ids(*a);
    return server::run_server(*a, has_device_interface(DeviceType::CUDA));
  };
}

}  // namespace tandem::cli
