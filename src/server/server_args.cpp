#include "server/server_args.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "model/quant_config.h"
#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

namespace tandem::server {

int64_t ServerArgs::http_thread_count() const {
  // Each open stream holds one thread for its whole life (idle and slow connections hold none:
  // http_server.h), and requests waiting in the engine's queue stream too, so size well above
  // the running batch.
  return http_threads > 0 ? http_threads : std::max<int64_t>(64, 2 * max_running_requests + 32);
}

Json ServerArgs::to_json() const {
  Json j;
  j["model_path"] = model_path;
  j["tokenizer_path"] = tokenizer_path.empty() ? model_path : tokenizer_path;
  j["served_model_name"] = model_name();
  j["revision"] = revision.empty() ? Json() : Json(revision);
  j["host"] = host;
  j["port"] = port;
  j["device"] = device;
  j["tp_size"] = tp_size;
  j["ep_size"] = ep_size;
  j["nnodes"] = nnodes;
  j["node_rank"] = node_rank;
  j["dist_init_addr"] = dist_init_addr.empty() ? Json() : Json(dist_init_addr);
  j["base_gpu_id"] = base_gpu_id;
  j["mem_fraction_static"] = mem_fraction_static > 0 ? Json(mem_fraction_static) : Json();
  j["trust_remote_code"] = trust_remote_code;
  j["disable_radix_cache"] = disable_radix_cache;
  j["disable_cuda_graph"] = disable_cuda_graph;
  j["cuda_graph_max_prefill_tokens"] = cuda_graph_max_prefill_tokens;
  j["warm_up_tokens"] = warm_up_tokens;
  j["enable_deterministic_inference"] = enable_deterministic_inference;
  j["load_format"] = load_format;
  j["enable_return_hidden_states"] = enable_return_hidden_states;
  j["max_running_requests"] = max_running_requests;
  j["max_queued_requests"] = max_queued_requests;
  j["page_size"] = page_size;
  j["chunked_prefill_size"] = chunked_prefill_size;
  j["enable_mixed_chunk"] = enable_mixed_chunk;
  j["max_prefill_tokens"] = max_prefill_tokens;
  j["scheduler_delay_factor"] = scheduler_delay_factor;
  j["max_total_tokens"] = max_total_tokens;
  j["context_length"] = context_length > 0 ? Json(context_length) : Json();
  j["kv_cache_dtype"] = kv_cache_dtype;
  j["quantization"] = quantization.empty() ? Json() : Json(quantization);
  j["speculative_algorithm"] = speculative_algorithm.empty() ? Json() : Json(speculative_algorithm);
  j["speculative_num_steps"] = speculative_num_steps;
  j["speculative_token_map"] = speculative_token_map.empty() ? Json() : Json(speculative_token_map);
  j["speculative_eagle_topk"] = speculative_eagle_topk;
  j["speculative_num_draft_tokens"] =
      speculative_num_draft_tokens > 0 ? speculative_num_draft_tokens : speculative_num_steps + 1;
  j["speculative_adaptive"] = speculative_adaptive;
  j["speculative_draft_reads_prompts"] = speculative_draft_reads_prompts;
  j["speculative_max_steps"] = speculative_max_steps > 0 ? Json(speculative_max_steps) : Json();
  j["reasoning_parser"] = reasoning_parser.empty() ? Json() : Json(reasoning_parser);
  j["tool_call_parser"] = tool_call_parser.empty() ? Json() : Json(tool_call_parser);
  j["constrained_json_disable_any_whitespace"] = constrained_json_disable_any_whitespace;
  j["api_key_set"] = !api_key.empty();
  j["max_connections"] = max_connections;
  j["http_idle_timeout"] = http_idle_timeout;
  j["http_header_timeout"] = http_header_timeout;
  j["http_body_timeout"] = http_body_timeout;
  j["disable_web_page"] = disable_web_page;
  try {
    j["allowed_origins"] = parse_allowed_origins(allowed_origins);
  } catch (const InvalidArgument&) {
    j["allowed_origins"] = allowed_origins;  // engine_options refuses it at start-up
  }
  return j;
}

void resolve_hub_ids(ServerArgs& a, const HubEnv& env) {
  const std::string model = resolve_model_path(a.model_path, a.revision, "--model-path", env);
  if (model != a.model_path && a.served_model_name.empty()) a.served_model_name = a.model_path;
  a.model_path = model;
  if (!a.tokenizer_path.empty())
    a.tokenizer_path = resolve_model_path(a.tokenizer_path, a.revision, "--tokenizer-path", env);
}

std::vector<std::string> parse_allowed_origins(const std::string& flag) {
  std::vector<std::string> out;
  auto add = [&](std::string o) {
    while (!o.empty() && (o.front() == ' ' || o.front() == '\t')) o.erase(o.begin());
    while (!o.empty() && (o.back() == ' ' || o.back() == '\t')) o.pop_back();
    if (!o.empty()) out.push_back(std::move(o));
  };
  const size_t first = flag.find_first_not_of(" \t");
  if (first != std::string::npos && flag[first] == '[') {
    const Json list = Json::parse(flag, nullptr, /*allow_exceptions=*/false);
    if (!list.is_array())
      throw InvalidArgument(fmt::format(
          "--allowed-origins must be a JSON list of strings or a comma-separated list, got '{}'",
          flag));
    for (const Json& o : list) {
      if (!o.is_string())
        throw InvalidArgument(fmt::format(
            "--allowed-origins: every entry of the list must be a string, got {}", o.dump()));
      add(o.get<std::string>());
    }
    return out;
  }
  size_t start = 0;
  while (start <= flag.size()) {
    const size_t comma = std::min(flag.find(',', start), flag.size());
    add(flag.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

EngineOptions engine_options(const ServerArgs& a, bool cuda_available,
                             std::vector<std::string>* warnings) {
  auto warn = [&](std::string w) {
    if (warnings) warnings->push_back(std::move(w));
  };
  if (a.device != "auto" && a.device != "cpu" && a.device != "cuda")
    throw InvalidArgument(fmt::format("--device must be cpu, cuda or auto, got '{}'", a.device));
  const bool cuda = a.device == "cuda" || (a.device == "auto" && cuda_available);
  if (a.device == "cuda" && !cuda_available)
    throw InvalidArgument(
        "--device cuda: this build has no usable CUDA backend (no GPU or built "
        "without nvcc)");
  if (a.tp_size < 1 || a.tp_size > 1024)
    throw InvalidArgument(fmt::format("--tp-size must be in [1, 1024], got {}", a.tp_size));
  if (a.ep_size < 1 || a.tp_size % a.ep_size != 0)
    throw InvalidArgument(
        fmt::format("--ep-size {} must divide --tp-size {} (experts are split into ep-size groups)",
                    a.ep_size, a.tp_size));
  if (a.nnodes < 1 || a.tp_size % a.nnodes != 0)
    throw InvalidArgument(
        fmt::format("--nnodes {} must divide --tp-size {} (each node runs tp-size / nnodes ranks)",
                    a.nnodes, a.tp_size));
  if (a.node_rank < 0 || a.node_rank >= a.nnodes)
    throw InvalidArgument(
        fmt::format("--node-rank must be in [0, --nnodes {}), got {}", a.nnodes, a.node_rank));
  if (a.nnodes > 1 && a.dist_init_addr.empty())
    throw InvalidArgument(fmt::format(
        "--nnodes {}: every node needs --dist-init-addr host:port (where node 0 listens)",
        a.nnodes));
  if (a.base_gpu_id < 0)
    throw InvalidArgument(fmt::format("--base-gpu-id must be >= 0, got {}", a.base_gpu_id));
  if (!(a.dist_timeout > 0))
    throw InvalidArgument(fmt::format("--dist-timeout must be positive, got {}", a.dist_timeout));
  if (a.port < 0 || a.port > 65535)
    throw InvalidArgument(fmt::format("--port must be in [0, 65535], got {}", a.port));
  if (a.mem_fraction_static < 0 || a.mem_fraction_static > 1)
    throw InvalidArgument(
        fmt::format("--mem-fraction-static must be in (0, 1], got {}", a.mem_fraction_static));
  if (a.mem_fraction_static > 0 && !cuda)
    warn(fmt::format(
        "--mem-fraction-static {}: on the CPU the KV cache is sized by --max-total-tokens ({})",
        a.mem_fraction_static, a.max_total_tokens));
  // Throws InvalidArgument naming the flag and key; the checkpoint-dependent checks (a quantized
  // checkpoint with an online scheme) happen at load, in apply_online_quant.
  parse_online_quant(a.quantization, a.model_loader_extra_config);
  parse_allowed_origins(a.allowed_origins);    // throws for a malformed list
  parse_reasoning_format(a.reasoning_parser);  // throws for an unknown parser
  if (!a.tool_call_parser.empty() && !is_tool_call_parser(a.tool_call_parser))
    throw InvalidArgument(fmt::format("--tool-call-parser: unknown parser '{}'; choose {}",
                                      a.tool_call_parser, tool_call_parser_names()));
  if (a.disable_cuda_graph && !cuda)
    warn("--disable-cuda-graph: no CUDA graphs on the CPU backend");

  EngineOptions o;
  o.max_running_requests = a.max_running_requests;
  o.max_queued_requests = a.max_queued_requests;
  // 64-token pages on the GPU: the decode attention and indexer kernels load a page per tile,
  // and 16-token pages made every decode step of the default model 10-20% slower on the H200
  // (docs/benchmarks.md, "HTTP against in-process"); 16 on the CPU, where finer prefix reuse
  // costs nothing.
  o.page_size = a.page_size != 0 ? a.page_size : cuda ? 64 : 16;
  o.max_total_tokens = a.max_total_tokens;
  o.chunked_prefill_size = a.chunked_prefill_size;
  o.max_prefill_tokens = std::max(a.max_prefill_tokens, a.chunked_prefill_size);
  o.enable_mixed_chunk = a.enable_mixed_chunk;
  o.scheduler_delay_factor = a.scheduler_delay_factor;
  o.enable_prefix_cache = !a.disable_radix_cache;
  o.context_length = a.context_length;
  o.disable_cuda_graph = a.disable_cuda_graph;
  o.cuda_graph_max_prefill_tokens = a.cuda_graph_max_prefill_tokens;
  o.warm_up_tokens = a.warm_up_tokens;
  o.kv_cache_fp8 = parse_kv_cache_dtype(a.kv_cache_dtype);  // throws for an unknown dtype
  if (a.load_format != "auto" && a.load_format != "dummy")
    throw InvalidArgument(
        fmt::format("--load-format must be auto or dummy, got '{}'", a.load_format));

  o.deterministic = a.enable_deterministic_inference;
  o.spec.algorithm = a.speculative_algorithm;
  o.spec.num_steps = a.speculative_num_steps;
  o.spec.eagle_topk = a.speculative_eagle_topk;
  o.spec.num_draft_tokens = a.speculative_num_draft_tokens;  // 0: num_steps + 1
  o.spec.adaptive = a.speculative_adaptive;
  o.spec.draft_reads_prompts = a.speculative_draft_reads_prompts;
  o.spec.max_steps = a.speculative_max_steps;
  // Every engine rule is checked once, by the options themselves (the engine checks again).
  std::vector<std::string> notes;
  o.validate(&notes);
  for (const std::string& n : notes) warn(n);
  return o;
}

}  // namespace tandem::server
