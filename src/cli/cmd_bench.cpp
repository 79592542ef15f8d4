// tandem bench: a serving benchmark with sglang.bench_serving's flags, definitions and printout,
// so numbers from Tandem and from SGLang (or vLLM) servers compare directly. --max-concurrency
// may list several values (one run each), and --svg charts the runs.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "bench_client/dataset.h"
#include "bench_client/driver.h"
#include "bench_client/report.h"
#include "bench_client/server_api.h"
#include "bench_client/svg_chart.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

namespace fs = std::filesystem;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InvalidArgument("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A folder holding tokenizer.json, or the file itself.
std::optional<std::string> tokenizer_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path f = fs::path(path) / "tokenizer.json";
    if (fs::exists(f, ec)) return f.string();
    return std::nullopt;
  }
  if (fs::is_regular_file(path, ec)) return path;
  return std::nullopt;
}

double parse_rate(const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || !(v > 0))
    throw InvalidArgument("--request-rate must be a positive number or inf, got '" + s + "'");
  return v;
}

// --max-concurrency: one value, as bench_serving takes it, or a comma-separated list (a run per
// value). 0 means no limit.
std::vector<int64_t> parse_concurrency_list(const std::string& s) {
  if (s.empty()) return {0};
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    const std::string item = s.substr(start, comma - start);
    std::size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 0)
      throw InvalidArgument(
          "--max-concurrency must be a non-negative integer or a comma-separated "
          "list of them (0: no limit), got '" +
          s + "'");
    out.push_back(v);
    start = comma + 1;
  }
  return out;
}

}  // namespace

Runner add_bench(CLI::App& app) {
  struct Args {
    std::string backend = "sglang", host = "127.0.0.1", base_url, model, tokenizer;
    int port = 30000;
    std::string dataset_name = "random", dataset_path;
    int64_t input_len = 1024, output_len = 1024, num_prompts = 1000;
    double range_ratio = 0.0, temperature = 0.0;
    std::string request_rate = "inf";
    std::string max_concurrency;  // one value or a list; "": no limit
    int64_t warmup_requests = 1;
    uint64_t seed = 1;
    std::string output_file, extra_request_body, svg;
    bool disable_ignore_eos = false, disable_stream = false, disable_tqdm = false,
         flush_cache = false, tokenize_prompt = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--backend", a->backend,
                 "sglang (/generate) | openai (/v1/completions) | openai-chat")
      ->capture_default_str();
  app.add_option("--host", a->host, "Server host")->capture_default_str();
  app.add_option("--port", a->port, "Server port")->capture_default_str();
  app.add_option("--base-url", a->base_url, "Server URL, instead of --host/--port");
  app.add_option("--model", a->model,
                 "Model name for OpenAI requests (default: first of /v1/models)");
  app.add_option(
      "--tokenizer", a->tokenizer,
      "tokenizer.json or its folder (default: the server's /get_model_info tokenizer_path)");
  app.add_option("--dataset-name", a->dataset_name, "random (real text) | random-ids")
      ->check(CLI::IsMember({"random", "random-ids"}))
      ->capture_default_str();
  app.add_option("--dataset-path", a->dataset_path,
                 "Text the random prompts are cut from (default: bench/data/prompts.txt)");
  app.add_option("--random-input-len,--random-input", a->input_len, "Prompt tokens (upper bound)")
      ->capture_default_str();
  app.add_option("--random-output-len,--random-output", a->output_len,
                 "Output tokens (upper bound)")
      ->capture_default_str();
  app.add_flag("--tokenize-prompt", a->tokenize_prompt,
               "Send prompts as token ids (sglang: input_ids; openai: a list of ids), so the "
               "server prefills exactly the sampled lengths");
  app.add_option("--random-range-ratio", a->range_ratio,
                 "Lengths are uniform on [max(int(L*r),1), L]; 1 = fixed lengths")
      ->capture_default_str();
  app.add_option("--num-prompts,--num-prompt", a->num_prompts, "Requests to send")
      ->capture_default_str();
  app.add_option("--request-rate", a->request_rate,
                 "Requests/s as a Poisson process; inf = all at once")
      ->capture_default_str();
  app.add_option("--max-concurrency", a->max_concurrency,
                 "Most requests in flight (default: no limit); a comma-separated list (1,4,16) "
                 "runs the benchmark once per value");
  app.add_option("--warmup-requests", a->warmup_requests, "Untimed copies of the first request")
      ->capture_default_str();
  app.add_option("--seed", a->seed, "Seed for lengths, prompts and arrival times")
      ->capture_default_str();
  app.add_option("--output-file", a->output_file, "Append the results as one JSON line");
  app.add_flag("--disable-ignore-eos", a->disable_ignore_eos,
               "Let requests stop at end-of-sequence");
  app.add_option("--temperature", a->temperature, "Sampling temperature")->capture_default_str();
  app.add_flag("--disable-stream", a->disable_stream, "Non-streaming requests (TTFT = latency)");
  app.add_flag("--disable-tqdm", a->disable_tqdm, "No progress bar");
  app.add_option("--extra-request-body", a->extra_request_body,
                 "JSON object merged into every request body, e.g. '{\"top_k\": 1}'");
  app.add_flag("--flush-cache", a->flush_cache, "POST /flush_cache before the timed run");
  app.add_option("--svg", a->svg,
                 "Also write the runs as an SVG chart: output tok/s and TPOT against "
                 "--max-concurrency, and acceptance per draft position when the server "
                 "publishes it");

  return [a]() -> int {
    bench::BenchConfig cfg;
    cfg.backend = bench::parse_backend(a->backend);
    if (a->tokenize_prompt && cfg.backend == bench::Backend::kOpenAIChat)
      fail("--tokenize-prompt needs --backend sglang or openai (chat messages are text)");
    const std::string base_url =
        a->base_url.empty() ? fmt::format("http://{}:{}", a->host, a->port) : a->base_url;
    cfg.endpoint = bench::parse_base_url(base_url);
    cfg.request_rate = parse_rate(a->request_rate);
    const std::vector<int64_t> concurrency = parse_concurrency_list(a->max_concurrency);
    cfg.warmup_requests = a->warmup_requests;
    cfg.flush_cache = a->flush_cache;
    cfg.seed = a->seed;
    cfg.progress = !a->disable_tqdm;
    cfg.request.temperature = a->temperature;
    cfg.request.ignore_eos = !a->disable_ignore_eos;
    cfg.request.stream = !a->disable_stream;
    if (!a->extra_request_body.empty()) {
      auto extra = nlohmann::json::parse(a->extra_request_body, nullptr, false);
      if (extra.is_discarded() || !extra.is_object())
        throw InvalidArgument("--extra-request-body must be a JSON object");
      cfg.request.extra_body = std::move(extra);
    }

    std::string model = a->model;
    if (model.empty()) {
      if (auto id = bench::fetch_model_id(cfg.endpoint)) {
        model = *id;
      } else if (cfg.backend == bench::Backend::kSglang) {
        model = "default";  // /generate does not name a model
      } else {
        fail("no --model given and {}/v1/models lists none", base_url);
      }
    }
    cfg.request.model = model;

    std::string tok_path = a->tokenizer;
    if (tok_path.empty()) {
      const auto served = bench::fetch_tokenizer_path(cfg.endpoint);
      if (!served) fail("pass --tokenizer: {}/get_model_info gives no tokenizer_path", base_url);
      tok_path = *served;
    }
    const auto tok_file = tokenizer_file(tok_path);
    if (!tok_file)
      fail("pass --tokenizer: '{}' is not a tokenizer.json here nor a folder holding one",
           tok_path);
    const Tokenizer tok = Tokenizer::from_file(*tok_file);

    bench::DatasetSpec spec;
    spec.num_prompts = a->num_prompts;
    spec.input_len = a->input_len;
    spec.output_len = a->output_len;
    spec.range_ratio = a->range_ratio;
    spec.seed = a->seed;
    spec.tokenize_prompt = a->tokenize_prompt;
    std::vector<bench::DatasetRow> rows;
    if (a->dataset_name == "random") {
      const std::string path =
          a->dataset_path.empty() ? default_bench_prompts_path() : a->dataset_path;
      rows = bench::random_text_dataset(tok, read_file(path), spec);
    } else {
      rows = bench::random_ids_dataset(tok, spec);
    }
    int64_t in_total = 0, out_total = 0;
    for (const auto& r : rows) {
      in_total += r.prompt_len;
      out_total += r.output_len;
    }
    std::printf("#Input tokens: %lld\n#Output tokens: %lld\n", static_cast<long long>(in_total),
                static_cast<long long>(out_total));
    std::fflush(stdout);

    std::vector<bench::BenchResult> results;
    bool all_completed = true;
    for (const int64_t c : concurrency) {
      cfg.max_concurrency = c;
      const bench::BenchResult& res = results.emplace_back(bench::run_benchmark(cfg, rows));
      all_completed = all_completed && res.metrics.completed > 0;

      bench::RunDescription run;
      run.backend = cfg.backend;
      run.dataset_name = a->dataset_name;
      run.model = model;
      run.request_rate = cfg.request_rate;
      run.max_concurrency = cfg.max_concurrency;
      run.num_prompts = a->num_prompts;
      run.random_input_len = a->input_len;
      run.random_output_len = a->output_len;
      run.random_range_ratio = a->range_ratio;
      std::fputs(bench::format_report(run, res).c_str(), stdout);
      std::fflush(stdout);

      if (res.accept_length && res.accept_length->source == "server_info")
        std::fprintf(stderr,
                     "note: the server exposes no speculative counters; Accept length is its "
                     "average since start (includes warm-up and earlier traffic)\n");
      if (res.metrics.failed > 0) {
        std::map<std::string, int64_t> errors;
        for (const auto& o : res.outputs)
          if (!o.success) ++errors[o.error];
        std::fprintf(stderr, "%lld requests failed:\n", static_cast<long long>(res.metrics.failed));
        int shown = 0;
        for (const auto& [msg, n] : errors) {
          if (shown++ == 5) break;
          std::fprintf(stderr, "  %lldx %s\n", static_cast<long long>(n), msg.c_str());
        }
      }
      if (!a->output_file.empty()) {
        std::ofstream f(a->output_file, std::ios::app);
        if (!f) fail("cannot write {}", a->output_file);
        f << bench::result_json(run, res).dump(-1, ' ', false,
                                               nlohmann::json::error_handler_t::replace)
          << "\n";
      }
    }
    if (!a->svg.empty()) {
      const std::string title = fmt::format(
          "tandem bench: {} ({}, {} prompts, input {} / output {} tokens)", model,
          bench::backend_name(cfg.backend), a->num_prompts, a->input_len, a->output_len);
      std::ofstream f(a->svg);
      f << bench::render_bench_svg(bench::bench_chart(title, concurrency, results));
      if (!f) fail("--svg {}: cannot write the file", a->svg);
      std::fprintf(stderr, "wrote %s\n", a->svg.c_str());
    }
    return all_completed ? 0 : 1;
  };
}

}  // namespace tandem::cli
