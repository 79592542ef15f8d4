#include "server/serve.h"

#include "core/device.h"
#include "model/kv_cache.h"

#include <fmt/ranges.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_name.h"
#include "distributed/make_collectives.h"
#include "distributed/socket_group.h"
#include "model/model.h"
#include "ops/backend.h"
#include "runtime/draft_vocab.h"
#include "runtime/follower.h"
#include "server/http_server.h"
#include "server/memory_policy.h"
#include "server/ranks.h"
#include "server/routes.h"
#include "server/server_state.h"
#include "server/web_page.h"

namespace tandem::server {

namespace {

// Rank 0's end of the process group under tensor parallelism: the socket the other ranks join,
// bound before they are spawned so that they know its port.
struct RankZero {
  RankLayout layout;
  tcp::Address addr;
  tcp::Socket listener;
  std::unique_ptr<LocalRanks> children;
};

LoadOptions load_options(const ServerArgs& args, const EngineOptions& eo, bool cuda,
                         const RankLayout& rl) {
  LoadOptions lo;
  lo.device = cuda ? Device::cuda(rl.gpu) : Device::cpu();
  lo.dtype = cuda ? DType::BF16 : DType::F32;
  lo.load_mtp = eo.spec.enabled();
  lo.online_quant = parse_online_quant(args.quantization, args.model_loader_extra_config);
  lo.online_quant.weight_only = args.weight_only_quant;
  lo.shard = ShardSpec{rl.rank, args.tp_size, args.ep_size};
  lo.show_progress = rl.rank == 0;
  // Every thread that launches work on the device must have it current (cuda_device.cpp).
  device_interface(lo.device.type).make_current(lo.device);
  return lo;
}

std::shared_ptr<Model> load_weights_of(const ServerArgs& args, const LoadOptions& lo) {
  if (args.load_format == "dummy")
    return Model::dummy(
        ModelConfig::from_file((std::filesystem::path(args.model_path) / "config.json").string()),
        lo);
  return Model::load(args.model_path, lo);
}

// The engine options with the KV cache sized for this device (--mem-fraction-static), logged.
EngineOptions sized_for_device(const ServerArgs& args, const EngineOptions& eo, const Model& model,
                               const LoadOptions& lo, bool cuda) {
  EngineOptions opts = eo;
  // The pools' element type: the FP8 rows, else the compute dtype (as ModelRunner builds them).
  const DType kv_dtype = eo.kv_cache_fp8 ? DType::F8_E4M3 : lo.dtype;
  const int64_t kv_bytes_per_token =
      KvCache::bytes_per_token(model.config(), kv_dtype, eo.spec.enabled());
  if (cuda && args.mem_fraction_static > 0) {
    // SGLang's meaning: weights plus KV pools take this fraction of the device's memory;
    // activations and graphs live in the rest.
    size_t free = 0, total = 0;
    device_interface(DeviceType::CUDA).memory_info(lo.device, &free, &total);
    const double budget =
        args.mem_fraction_static * static_cast<double>(total) - static_cast<double>(total - free);
    const int64_t per_page = kv_bytes_per_token * eo.page_size;
    if (budget < static_cast<double>(per_page) * 4)
      throw InvalidArgument(fmt::format(
          "--mem-fraction-static {}: the weights already use {:.1f} of {:.1f} GiB, nothing is left "
          "for the KV cache",
          args.mem_fraction_static, (total - free) / 1073741824.0, total / 1073741824.0));
    opts.num_pages = static_cast<int64_t>(budget / static_cast<double>(per_page));
    log_info("KV cache: {} pages of {} tokens ({:.1f} GiB) from --mem-fraction-static {}",
             opts.num_pages, eo.page_size, opts.num_pages * per_page / 1073741824.0,
             args.mem_fraction_static);
  }
  const int64_t pages = opts.num_pages > 0
                            ? opts.num_pages
                            : (opts.max_total_tokens + opts.page_size - 1) / opts.page_size;
  log_info("KV cache: {} tokens ({} pages of {}), {} bytes per token in {} ({:.1f} MiB)",
           pages * opts.page_size, pages, opts.page_size, kv_bytes_per_token,
           eo.kv_cache_fp8 ? "fp8_e4m3" : dtype_name(kv_dtype),
           static_cast<double>(pages * opts.page_size * kv_bytes_per_token) / 1048576.0);
  return opts;
}

// Deterministic mode: the largest all-reduce a forward makes ([tokens, hidden] bf16), for the
// batch-invariant path (make_collectives.h); 0 otherwise.
size_t batch_invariant_bytes(const EngineOptions& eo, const ModelConfig& c) {
  if (!eo.deterministic) return 0;
  const int64_t steps = eo.spec.enabled() ? eo.spec.num_steps + 1 : 1;
  const int64_t tokens = std::max(eo.max_prefill_tokens, eo.max_running_requests * steps);
  return static_cast<size_t>(tokens * c.hidden_size * 2);
}

// A collective that failed inside a step (a rank gone, a timeout): the ranks can no longer agree,
// so this process stops with the reason; the others see its connection close and stop too.
void stop_on_collective_failure(const std::string& why) {
  log_error("tensor parallelism: {}; stopping", why);
  std::_Exit(1);
}

// What loading this rank's share cost: the process's peak resident host memory (the checkpoint is
// memory-mapped, so reading a slice touches only its pages) and the device memory in use.
void log_rank_memory(const RankLayout& rl, Device d) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::string dev;
  if (!d.is_cpu()) {
    size_t free = 0, total = 0;
    device_interface(d.type).memory_info(d, &free, &total);
    dev = fmt::format(", {} in use {:.2f} of {:.2f} GiB", d.str(), (total - free) / 1073741824.0,
                      total / 1073741824.0);
  }
  log_info("rank {} of {}: weights loaded; peak host memory {:.2f} GiB{}", rl.rank, rl.world,
           static_cast<double>(ru.ru_maxrss) / 1048576.0, dev);
}

std::chrono::milliseconds dist_timeout(const ServerArgs& args) {
  return std::chrono::milliseconds(static_cast<int64_t>(args.dist_timeout * 1000.0));
}

std::filesystem::path tokenizer_file(const ServerArgs& args) {
  const std::string dir = args.tokenizer_path.empty() ? args.model_path : args.tokenizer_path;
  return std::filesystem::path(dir) / "tokenizer.json";
}

LoadedModel load_model(const ServerArgs& args, const EngineOptions& eo, bool cuda,
                       RankZero* rank0) {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(args.model_path) / "config.json"))
    throw InvalidArgument(fmt::format("--model-path {}: no config.json there", args.model_path));
  const std::string tok_dir = args.tokenizer_path.empty() ? args.model_path : args.tokenizer_path;
  const fs::path tok_file = tokenizer_file(args);
  if (!fs::exists(tok_file))
    throw InvalidArgument(
        fmt::format("{} not found: the server needs the model's tokenizer", tok_file.string()));
  LoadedModel lm;
  lm.tokenizer = Tokenizer::from_file(tok_file.string());
  try {
    if (auto t = load_chat_template(tok_dir)) {
      lm.chat_template.emplace(t->source);
      lm.bos_token = t->bos_token;
      lm.eos_token = t->eos_token;
    } else {
      log_warn("{} has no chat template: /v1/chat/completions will answer 400", tok_dir);
    }
  } catch (const std::exception& e) {
    // A template we cannot parse should not take completions down with it.
    log_error("chat template of {} not usable, chat completions disabled: {}", tok_dir, e.what());
    lm.chat_template.reset();
  }
  const RankLayout rl = rank0 ? rank0->layout : RankLayout{};
  if (rank0) {
    // Every rank joins before anything loads: a node that cannot join fails start-up at once.
    lm.group =
        SocketGroup::join(0, rl.world, rank0->addr, dist_timeout(args), std::move(rank0->listener),
                          [&] { rank0->children->check_alive(); });
    log_info("tensor parallelism: {} ranks joined (tp {}, ep {}, {} nodes)", rl.world, args.tp_size,
             args.ep_size, args.nnodes);
  }
  const LoadOptions lo = load_options(args, eo, cuda, rl);
  std::shared_ptr<Model> model = load_weights_of(args, lo);
  if (rank0) log_rank_memory(rl, lo.device);
  if (lm.group) {
    lm.comm = make_collectives(*lm.group, lo.device, batch_invariant_bytes(eo, model->config()));
    lm.comm->set_on_failure(stop_on_collective_failure);
    model->set_collectives(lm.comm.get());
  }
  EngineOptions opts = sized_for_device(args, eo, *model, lo, cuda);
  if (!args.speculative_token_map.empty() && opts.spec.enabled())
    opts.spec.token_map = read_token_map(args.speculative_token_map, model->config().vocab_size);
  lm.engine = std::make_unique<Engine>(model, opts, lm.group.get());
  return lm;
}

// A rank other than 0: no HTTP; joins rank 0, loads its share and runs rank 0's steps until told
// to stop. Returns the exit code.
int run_follower_rank(const ServerArgs& args, const RankLayout& rl, bool cuda) {
  try {
    const EngineOptions eo = engine_options(args, cuda);
    std::unique_ptr<LocalRanks> children;
    if (rl.local_rank == 0)
      children = std::make_unique<LocalRanks>(rl, own_command_line(), std::vector<std::string>{});
    const tcp::Address addr = tcp::parse_address(args.dist_init_addr);
    std::unique_ptr<ProcessGroup> group =
        SocketGroup::join(rl.rank, rl.world, addr, dist_timeout(args));
    const LoadOptions lo = load_options(args, eo, cuda, rl);
    std::shared_ptr<Model> model = load_weights_of(args, lo);
    log_rank_memory(rl, lo.device);
    std::unique_ptr<Collectives> comm =
        make_collectives(*group, lo.device, batch_invariant_bytes(eo, model->config()));
    comm->set_on_failure(stop_on_collective_failure);
    model->set_collectives(comm.get());
    const EngineOptions opts = sized_for_device(args, eo, *model, lo, cuda);
    // Constrained requests: this rank masks its logits with its own copy of each grammar.
    const Tokenizer tok = Tokenizer::from_file(tokenizer_file(args).string());
    run_follower(std::move(model), opts, *group, follower_constraint_factory(tok));
    log_info("rank {}: stopped by rank 0", rl.rank);
    return 0;
  } catch (const std::exception& e) {
    log_error("rank {} of {}: {}", rl.rank, rl.world, e.what());
    return 1;
  }
}

HttpOptions http_options(const ServerArgs& args) {
  auto ms = [](double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); };
  HttpOptions o;
  o.threads = args.http_thread_count();
  o.stream_threads = args.stream_threads;
  o.max_request_bytes = args.max_request_bytes;
  const int64_t derived = default_max_connections();  // raises the open-file limit too
  o.max_connections = args.max_connections > 0 ? args.max_connections : derived;
  o.idle_timeout = ms(args.http_idle_timeout);
  o.header_timeout = ms(args.http_header_timeout);
  o.body_timeout = ms(args.http_body_timeout);
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur != RLIM_INFINITY &&
      static_cast<int64_t>(files.rlim_cur) < o.max_connections + 64)
    log_warn(
        "--max-connections {} with an open-file limit of {} (ulimit -n): connections beyond "
        "the limit are refused",
        o.max_connections, files.rlim_cur);
  log_info(
      "HTTP: {} worker threads, up to {} connections; timeouts: idle {} s, headers {} s, "
      "body {} s",
      o.threads, o.max_connections, args.http_idle_timeout, args.http_header_timeout,
      args.http_body_timeout);
  return o;
}

}  // namespace

int run_server(const ServerArgs& args, bool cuda_available) {
  // Before any thread starts, so that every thread's arena follows it.
  const std::string allocator = configure_allocator();
  std::vector<std::string> warnings;
  const EngineOptions eo = engine_options(args, cuda_available, &warnings);
  const bool use_cuda = args.device == "cuda" || (args.device == "auto" && cuda_available);
  set_collective_timeout(dist_timeout(args));
  const RankLayout layout = rank_layout(args);
  if (layout.distributed() && layout.rank != 0) return run_follower_rank(args, layout, use_cuda);
  std::optional<RankZero> rank0;
  if (layout.distributed()) {
    // Bind first, then start this node's other ranks: they learn the port from their flags.
    rank0.emplace();
    rank0->layout = layout;
    rank0->addr = args.dist_init_addr.empty() ? tcp::Address{"127.0.0.1", 0}
                                              : tcp::parse_address(args.dist_init_addr);
    rank0->listener = tcp::listen_on(rank0->addr);
    rank0->addr.port = tcp::bound_port(rank0->listener);
    std::vector<std::string> extra;
    if (args.dist_init_addr.empty()) extra = {"--dist-init-addr", rank0->addr.str()};
    rank0->children = std::make_unique<LocalRanks>(layout, own_command_line(), extra);
  }
  for (const std::string& w : warnings) log_warn("{}", w);
  log_info("memory: {}", allocator);
  if (!args.ignored_flags.empty())
    log_warn("ignoring options that mean nothing to Tandem: {}",
             fmt::join(args.ignored_flags, " "));
  const bool cuda = args.device == "cuda" || (args.device == "auto" && cuda_available);

  // Signals go to one thread that waits for them; every thread started from here inherits
  // the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  ServerState state(args);
  auto router = std::make_shared<Router>();
  add_openai_routes(*router, state);
  add_native_routes(*router, state);
  add_web_page_routes(*router, args);
  router->set_api_key(args.api_key);
  router->set_allowed_origins(parse_allowed_origins(args.allowed_origins));
  HttpServer http(router, http_options(args));
  const int port = http.bind(args.host, args.port);

  std::atomic<bool> run_returned{false};
  std::thread server_thread([&] {
    name_this_thread("http-events");
    if (!http.run()) log_error("the HTTP server stopped with an error");
    run_returned = true;
  });
  while (!http.running() && !run_returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  log_info("tandem serve: listening on http://{}:{} (loading {})", args.host, port,
           args.model_path);

  std::atomic<bool> loaded{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (!loaded) {
      // Nothing to drain while loading; do not wait for a large checkpoint to finish.
      log_info("signal {} while loading: exiting", sig);
      std::_Exit(128 + sig);
    }
    // Graceful: new requests get 503 while those in flight finish; past the grace period they
    // are aborted, which still ends every stream with its final chunk and [DONE]. A second
    // signal stops at once.
    state.set_stopping();
    const auto grace =
        std::chrono::milliseconds(static_cast<int64_t>(args.graceful_shutdown_timeout * 1000.0));
    log_info("signal {}: shutting down; {} requests in flight get up to {} s to finish", sig,
             http.in_flight(), args.graceful_shutdown_timeout);
    std::atomic<bool> forced{false};
    std::thread second([&] {
      int s2 = 0;
      sigwait(&sigs, &s2);
      if (!forced) log_info("signal {} again: stopping now", s2);
      forced = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (!forced && !http.wait_idle(std::chrono::milliseconds(100)) &&
           std::chrono::steady_clock::now() < deadline) {
    }
    if (!forced && http.in_flight() > 0) {
      log_warn("grace period over: aborting {} requests", state.abort_all());
      // The aborted streams end within a poll interval or two; bodies still being written get
      // a moment to flush.
      http.wait_idle(std::chrono::seconds(5));
    }
    http.stop();
    if (!forced) {
      forced = true;
      pthread_kill(second.native_handle(), SIGTERM);  // wake the second-signal waiter
    }
    second.join();
  });

  int code = 0;
  std::optional<MemoryTrimmer> trimmer;  // gives memory back after large requests
  try {
    LoadedModel lm = load_model(args, eo, cuda, rank0 ? &*rank0 : nullptr);
    const int64_t ctx = lm.engine->context_length();
    const EngineMetrics m = lm.engine->metrics();
    state.set_model(std::move(lm));
    loaded = true;
    trimmer.emplace([&http] { return http.in_flight() == 0; });
    log_info(
        "tandem serve: ready, serving '{}' on http://{}:{} (context {} tokens, KV cache {} "
        "pages of {} tokens, {} max running requests{}{}{})",
        state.model_name(), args.host, port, ctx, m.kv_pages_total, eo.page_size,
        eo.max_running_requests,
        eo.spec.enabled()
            ? fmt::format(", speculative {} x{}", eo.spec.algorithm, eo.spec.num_steps)
            : std::string(),
        args.reasoning_parser.empty() || args.reasoning_parser == "none"
            ? std::string()
            : ", reasoning parser " + args.reasoning_parser,
        args.tool_call_parser.empty() ? std::string()
                                      : ", tool-call parser " + args.tool_call_parser);
    if (!args.disable_web_page)
      log_info("tandem serve: web page at http://{}:{}/", args.host, port);
  } catch (const std::exception& e) {
    log_error("{}", e.what());
    code = 1;
    loaded = true;
    http.stop();
    pthread_kill(signal_thread.native_handle(), SIGTERM);  // wake the signal thread
  }
  server_thread.join();
  signal_thread.join();
  state.set_stopping();
  return code;
}

}  // namespace tandem::server
