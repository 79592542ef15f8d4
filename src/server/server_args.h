// The launch configuration of `tandem serve`: SGLang's flag set (so SGLang launch commands work
// as written) mapped onto the engine's options, and reported back by /get_server_info.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/hub_cache.h"
#include "runtime/engine.h"
#include "server/json_fields.h"

namespace tandem::server {

struct ServerArgs {
  std::string model_path;
  std::string tokenizer_path;     // default: model_path
  std::string revision;           // of a Hub id in model_path / tokenizer_path; "": main
  std::string served_model_name;  // default: model_path
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string device = "auto";       // auto | cpu | cuda
  std::string load_format = "auto";  // auto (the checkpoint) | dummy (random weights on the device)
  // Tensor / expert parallelism (SGLang's flags; docs/parallelism.md). One process per rank:
  // each node's launched process spawns its node's other ranks.
  int64_t tp_size = 1;
  int64_t ep_size = 1;
  int64_t nnodes = 1;
  int64_t node_rank = 0;
  std::string dist_init_addr;   // host:port of rank 0 (default on one node: a free loopback port)
  int64_t base_gpu_id = 0;      // the node's first GPU; local rank i uses base_gpu_id + i
  double dist_timeout = 300;    // seconds: nodes joining, and one collective inside a step
  int64_t dist_local_rank = 0;  // set by the launcher on the ranks it spawns (not a user flag)
  double mem_fraction_static = 0;  // 0: unset
  bool trust_remote_code = false;
  bool disable_radix_cache = false;
  bool disable_cuda_graph = false;
  int64_t cuda_graph_max_prefill_tokens = -1;  // EngineOptions' (-1: its default)
  int64_t warm_up_tokens = -1;                 // EngineOptions' (-1: its default)
  // Batch-invariant kernels for every shape (SGLang's flag): identical output for a request
  // whatever else is batched with it, at some speed cost on GPUs.
  bool enable_deterministic_inference = false;
  bool enable_return_hidden_states = false;
  int64_t max_running_requests = EngineOptions{}.max_running_requests;
  int64_t max_queued_requests = EngineOptions{}.max_queued_requests;
  int64_t page_size = 0;  // 0: 64 on CUDA (the attention kernels' tile), 16 on the CPU
  int64_t chunked_prefill_size = EngineOptions{}.chunked_prefill_size;
  bool enable_mixed_chunk = false;  // decoding sequences ride along in prefill steps
  int64_t max_prefill_tokens = EngineOptions{}.max_prefill_tokens;
  double scheduler_delay_factor = EngineOptions{}.scheduler_delay_factor;
  int64_t max_total_tokens = EngineOptions{}.max_total_tokens;
  int64_t context_length = 0;  // 0: the model's max_position_embeddings
  std::string kv_cache_dtype = "auto";
  // Online quantization (SGLang's flags): --quantization fp8 on a bf16 checkpoint, or
  // {"online_quant_config": {"global_quant_config": "ptpc_fp8", "exclude_layer": [...]}}.
  std::string quantization;
  std::string model_loader_extra_config;
  bool weight_only_quant = false;  // --weight-only-quant: Quark / MXFP4 activations stay bf16
  std::string speculative_algorithm;
  int64_t speculative_num_steps = 3;
  std::string speculative_token_map;  // JSON array of the draft's token ids; empty: all
  int64_t speculative_eagle_topk = 1;
  int64_t speculative_num_draft_tokens = 0;  // 0: num_steps + 1
  // Adaptive depth (on by default when speculating): each decode step picks its drafts in
  // [0, speculative_max_steps] (0: max(num_steps, 5)); off: always num_steps.
  bool speculative_adaptive = true;
  int64_t speculative_max_steps = 0;
  // Adaptive depth: the draft reads prompts with their prefill where that pays (off: in the
  // catch-up before their first speculative round; SpeculativeOptions::draft_reads_prompts).
  bool speculative_draft_reads_prompts = false;
  // Output parsers of chat completions (SGLang's flags and names); "": none.
  std::string reasoning_parser;  // glm45 | deepseek-r1 | deepseek-v3 | none
  std::string tool_call_parser;  // glm45 | glm47 | deepseekv3 | deepseekv31 | deepseekv32
  // Structured outputs: constrained JSON has no whitespace between its tokens (else at most 20
  // bytes per gap).
  bool constrained_json_disable_any_whitespace = false;
  std::string api_key;
  // --allowed-origins as given: a JSON list ('["http://a.com"]', as vLLM takes it) or a
  // comma-separated list; "*" allows any origin. Empty: no cross-origin browser access.
  std::string allowed_origins;
  // No web page at / (the chat and live statistics page, src/server/web/index.html).
  bool disable_web_page = false;
  int64_t http_threads = 0;    // 0: enough for max_running_requests streams and waiting requests
  int64_t stream_threads = 0;  // stream pump threads; 0: one
  int64_t max_request_bytes = 32 << 20;
  // Open connections beyond which a new one gets 503 (0: derived from the open-file limit).
  int64_t max_connections = 0;
  // Seconds: a connection with no request for http_idle_timeout is closed; a request's headers
  // must arrive within http_header_timeout of its first byte, its body within http_body_timeout
  // of the headers (408 otherwise).
  double http_idle_timeout = 5;
  double http_header_timeout = 10;
  double http_body_timeout = 60;
  // On SIGTERM: seconds requests in flight may take to finish before they are aborted (their
  // streams still end with a final chunk and [DONE]).
  double graceful_shutdown_timeout = 30.0;
  std::vector<std::string> ignored_flags;  // other vendors' flags, accepted with a warning

  std::string model_name() const {
    return served_model_name.empty() ? model_path : served_model_name;
  }
  int64_t http_thread_count() const;
  Json to_json() const;
};

// Model and tokenizer given as Hugging Face Hub ids ("org/name") become their snapshot folders
// in the local Hub cache (model/hub_cache.h); local paths are kept. The API keeps calling the
// model by its id (served_model_name) rather than by the snapshot's hash path. Throws
// InvalidArgument naming the flag for an id that is not in the cache.
void resolve_hub_ids(ServerArgs& a, const HubEnv& env = HubEnv::from_environment());

// The origins of --allowed-origins (see ServerArgs::allowed_origins); throws InvalidArgument
// naming the flag for a malformed list.
std::vector<std::string> parse_allowed_origins(const std::string& flag);

// Checks the flags and maps them onto EngineOptions. Throws InvalidArgument naming the flag.
// Informational notes (flags that mean nothing on this build) go to `warnings`.
EngineOptions engine_options(const ServerArgs& a, bool cuda_available,
                             std::vector<std::string>* warnings = nullptr);

}  // namespace tandem::server
