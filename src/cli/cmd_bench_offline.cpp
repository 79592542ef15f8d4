// tandem bench-offline: the engine in-process (no HTTP) on a set of prompts, with and without
// MTP speculative decoding, at several concurrencies (optionally with every output constrained by
// a JSON schema or regex). Reports output tokens/s, TPOT and accept length, and checks that
// greedy outputs are identical with and without speculation.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bench_client/dataset.h"
#include "bench_client/svg_chart.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "model/hub_cache.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "ops/backend.h"
#include "runtime/draft_vocab.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/spec_accept.h"
#include "server/grammar_constraint.h"
#include "tokenizer/tokenizer.h"

namespace tandem::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct RunStats {
  double seconds = 0, tokens_per_s = 0, tpot_ms = 0, ttft_ms = 0, accept_length = 0;
  std::vector<double> accept_per_position;
  std::vector<std::vector<int32_t>> outputs;
  std::array<double, 4> phase_ms{};  // mean ms per speculative round (--profile-spec-phases)
  uint64_t profiled_rounds = 0;
  // The timed pass's engine loop (loop_clock.h): seconds by phase and target forward steps.
  std::array<double, static_cast<size_t>(LoopPhase::kCount)> loop_seconds{}, decode_loop_seconds{};
  uint64_t steps = 0, decode_steps = 0;
  std::vector<uint64_t> depth_steps;  // decode steps by depth (speculative runs)
  uint64_t graph_builds = 0;          // forward steps of the timed pass that built a graph
};

// A fresh constraint per request (--json-schema / --regex), or null.
using MakeConstraint = std::function<std::shared_ptr<TokenConstraint>()>;

// Closed loop on one engine: keeps `concurrency` requests in flight until every prompt has run.
// max_new: each request's max_new_tokens.
RunStats pass(Engine& e, const std::vector<std::vector<int32_t>>& prompts,
              const std::vector<int64_t>& max_new, int64_t concurrency,
              const MakeConstraint& constraint) {
  RunStats st;
  st.outputs.resize(prompts.size());
  struct InFlight {
    size_t index;
    std::shared_ptr<RequestStream> stream;
    Clock::time_point start, first;
    bool got_first = false;
  };
  std::vector<InFlight> live;
  size_t next = 0, done = 0;
  double tpot_sum = 0, ttft_sum = 0;
  int64_t tpot_n = 0, tokens = 0;
  const auto t0 = Clock::now();
  while (done < prompts.size()) {
    while (next < prompts.size() && static_cast<int64_t>(live.size()) < concurrency) {
      Request r;
      r.prompt = prompts[next];
      r.max_new_tokens = max_new[next];
      if (constraint) r.constraint = constraint();
      live.push_back({next, e.submit(r), Clock::now(), {}, false});
      ++next;
    }
    for (size_t i = 0; i < live.size();) {
      RequestOutput o;
      bool finished = false;
      while (live[i].stream->next(o, std::chrono::milliseconds(0))) {
        const auto now = Clock::now();
        if (!live[i].got_first && !o.new_tokens.empty())
          live[i].first = now, live[i].got_first = true;
        auto& out = st.outputs[live[i].index];
        out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
        if (o.finished) {
          if (o.finish_reason == FinishReason::kError) fail("request failed: {}", o.error);
          finished = true;
          const double total = std::chrono::duration<double>(now - live[i].start).count();
          const double ttft = std::chrono::duration<double>(live[i].first - live[i].start).count();
          ttft_sum += ttft;
          if (out.size() > 1)
            tpot_sum += (total - ttft) / static_cast<double>(out.size() - 1), ++tpot_n;
          tokens += static_cast<int64_t>(out.size());
          break;
        }
      }
      if (finished) {
        live.erase(live.begin() + static_cast<long>(i));
        ++done;
      } else {
        ++i;
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  st.tokens_per_s = tokens / st.seconds;
  st.tpot_ms = tpot_n ? 1e3 * tpot_sum / tpot_n : 0;
  st.ttft_ms = 1e3 * ttft_sum / static_cast<double>(prompts.size());
  return st;
}

// The timed pass, after an untimed one of the same workload on the same engine (unless
// warmup is false): the first pass captures the CUDA graphs of every batch bucket the run goes
// through and lets cuBLASLt choose its algorithms, which would otherwise land in whichever mode
// runs first. The prefix cache is emptied in between, and the speculative counters are the timed
// pass's own.
// An adaptive engine may take a depth in its timed pass at a batch bucket where its untimed pass
// did not, and pay that shape's capture there (H100, session 33: requests of 24-96 tokens at
// concurrency 64, 12 steps of 1.3-4.3 ms in a 58 ms pass, the row at 0.55x of plain decoding),
// where a fixed depth's untimed pass went through all of its shapes. So it first runs one pass
// per depth with the depth pinned (Engine::pin_depth), over the prompts that reach every batch
// bucket of the real pass: twice the concurrency. The policy is shown those steps as calibration
// (SpecDepthPolicy::calibrate) and settles on them when the pin is lifted, so that its classes
// start where the measurements point instead of probing depths in a pass too short for it (the
// same concurrency, 64: probes of depths 2-4 at batch 64 left the row at 0.89x of plain decoding
// with graphed prefill, session 34).
RunStats run(std::shared_ptr<const Model> model, const EngineOptions& eo,
             const std::vector<std::vector<int32_t>>& prompts, const std::vector<int64_t>& max_new,
             int64_t concurrency, bool warmup, const MakeConstraint& constraint) {
  const bool warm_depths = warmup && eo.spec.enabled() && eo.spec.adaptive;
  Engine e(model, eo);
  EngineMetrics before;
  if (warm_depths) {
    const size_t n = std::min(prompts.size(), static_cast<size_t>(2 * concurrency));
    const std::vector<std::vector<int32_t>> some(prompts.begin(),
                                                 prompts.begin() + static_cast<long>(n));
    const std::vector<int64_t> some_new(max_new.begin(), max_new.begin() + static_cast<long>(n));
    for (int64_t d = 0; d <= eo.spec.max_depth(); ++d) {
      e.pin_depth(d);
      pass(e, some, some_new, concurrency, constraint);
    }
    e.pin_depth(-1);
    TD_CHECK(e.flush_cache(), "bench-offline: the prefix cache could not be emptied");
  }
  if (warmup) {
    pass(e, prompts, max_new, concurrency, constraint);
    TD_CHECK(e.flush_cache(), "bench-offline: the prefix cache could not be emptied");
    before = e.metrics();
  }
  const uint64_t builds_before = e.graph_builds();
  RunStats st = pass(e, prompts, max_new, concurrency, constraint);
  st.graph_builds = e.graph_builds() - builds_before;
  const EngineMetrics m = e.metrics();
  const uint64_t rounds = m.spec_verify_steps - before.spec_verify_steps;
  st.accept_length =
      rounds ? static_cast<double>(m.spec_accepted_tokens - before.spec_accepted_tokens + rounds) /
                   static_cast<double>(rounds)
             : 0.0;
  for (size_t i = 0; i < m.spec_accepted_per_position.size(); ++i) {
    const uint64_t was =
        i < before.spec_accepted_per_position.size() ? before.spec_accepted_per_position[i] : 0;
    st.accept_per_position.push_back(
        rounds ? static_cast<double>(m.spec_accepted_per_position[i] - was) / rounds : 0.0);
  }
  for (size_t i = 0; i < m.spec_depth_steps.size(); ++i)
    st.depth_steps.push_back(m.spec_depth_steps[i] -
                             (i < before.spec_depth_steps.size() ? before.spec_depth_steps[i] : 0));
  st.profiled_rounds = m.spec_profiled_rounds - before.spec_profiled_rounds;
  for (size_t i = 0; i < st.loop_seconds.size(); ++i) {
    st.loop_seconds[i] = m.loop_phase_seconds[i] - before.loop_phase_seconds[i];
    st.decode_loop_seconds[i] =
        m.decode_loop_phase_seconds[i] - before.decode_loop_phase_seconds[i];
  }
  st.steps = m.forward_steps_total - before.forward_steps_total;
  st.decode_steps = m.decode_loop_steps - before.decode_loop_steps;
  for (size_t i = 0; i < st.phase_ms.size() && st.profiled_rounds; ++i)
    st.phase_ms[i] = 1e3 * (m.spec_phase_seconds[i] - before.spec_phase_seconds[i]) /
                     static_cast<double>(st.profiled_rounds);
  return st;
}

// A line under a row whose timed pass built graphs: their eager runs and captures are in its
// time. A shape is captured at its second use, so a bucket the warm-up met once is captured in
// the timed pass; and prefill batches depend on when the client's next requests arrive, so two
// passes of one workload need not meet the same shapes.
void print_graph_builds(const RunStats& s) {
  if (s.graph_builds == 0) return;
  std::printf("%-11s timed pass: %llu forward steps built a CUDA graph (new shapes)\n", "",
              static_cast<unsigned long long>(s.graph_builds));
}

// One line under a speculative run: where a round's time goes.
void print_phases(const RunStats& s) {
  std::string line;
  double total = 0;
  for (size_t i = 0; i < s.phase_ms.size(); ++i) {
    line += fmt::format("{} {:.3f}  ", EngineMetrics::kSpecPhaseNames[i], s.phase_ms[i]);
    total += s.phase_ms[i];
  }
  std::printf("%-11s phases, ms per round: %stotal %.3f (%llu rounds, device synchronized)\n", "",
              line.c_str(), total, static_cast<unsigned long long>(s.profiled_rounds));
}

// Two lines under a row: the engine thread's microseconds per step by loop phase, over every
// step and over the decode steps alone.
void print_loop(const RunStats& s) {
  auto line = [](const char* what, const auto& seconds, uint64_t steps) {
    std::string text;
    double busy = 0;
    for (size_t i = 0; i < seconds.size(); ++i) {
      const double us = steps ? 1e6 * seconds[i] / static_cast<double>(steps) : 0.0;
      text += fmt::format("{} {:.1f}  ", kLoopPhaseNames[i], us);
      if (i != static_cast<size_t>(LoopPhase::kWait)) busy += us;
    }
    std::printf("%-11s %s, us per step: %sbusy %.1f (%llu steps)\n", "", what, text.c_str(), busy,
                static_cast<unsigned long long>(steps));
  };
  line("loop", s.loop_seconds, s.steps);
  line("decode loop", s.decode_loop_seconds, s.decode_steps);
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoll(item));
  return v;
}

}  // namespace

Runner add_bench_offline(CLI::App& app) {
  struct Args {
    std::string model_path, revision, prompts, write_ids, svg, concurrency = "1,8,32";
    std::string json_schema, regex;  // structured outputs
    std::string token_map;           // --speculative-token-map
    std::string steps = "3";         // fixed depths, comma-separated
    int64_t prompt_tokens = 64, max_new = 96, num_prompts = 16, max_steps = 0, repeat = 1;
    double simulate = 0;
    double range_ratio = 1.0;  // --random-range-ratio: 1 = fixed lengths
    bool profile_phases = false, loop_phases = false, adaptive = false, batch_fill = false;
    std::string adaptive_variants;  // --adaptive-variants: comma-separated
    bool no_plain = false, disable_cuda_graph = false, deterministic = false, no_warmup = false;
    bool weight_only_quant = false, mixed_chunk = false;
    int64_t prefill_graph_tokens = -1;  // EngineOptions::cuda_graph_max_prefill_tokens
    int64_t warm_up_tokens = -1;        // EngineOptions::warm_up_tokens
    std::string device = "cpu", load_format = "auto", preset, quantization, loader_extra,
                kv_cache_dtype = "auto";
    int64_t num_layers = 0, max_total_tokens = 1 << 16, workspace_mb = EngineOptions{}.workspace_mb;
    int64_t chunked_prefill_size = EngineOptions{}.chunked_prefill_size,
            max_prefill_tokens = EngineOptions{}.max_prefill_tokens;
    double scheduler_delay_factor = EngineOptions{}.scheduler_delay_factor;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--model-path", a->model_path,
                 "Checkpoint folder, or a Hugging Face Hub id (org/name) in the local Hub cache "
                 "(default: the built-in model)");
  app.add_option("--revision", a->revision,
                 "Branch, tag or commit hash of a Hub id in --model-path (default: main)");
  app.add_option("--prompts", a->prompts, "JSON list of prompt strings, or of token-id lists");
  app.add_option("--prompt-tokens", a->prompt_tokens, "Cut each text prompt to this many tokens");
  app.add_option("--num-prompts", a->num_prompts,
                 "Prompts to run (random token ids without --prompts)");
  app.add_option("--max-new-tokens", a->max_new, "Tokens generated per request");
  app.add_option("--random-range-ratio", a->range_ratio,
                 "Each request's prompt length (text and random prompts) and max new tokens "
                 "uniform on [max(int(L*r),1), L], L = --prompt-tokens and --max-new-tokens, "
                 "drawn once for every row (as tandem bench); 1 = fixed lengths")
      ->capture_default_str();
  app.add_option("--concurrency", a->concurrency, "Comma-separated concurrencies");
  app.add_option("--speculative-num-steps", a->steps,
                 "Draft tokens per round, fixed; a comma-separated list runs each (0: plain "
                 "decoding only)");
  app.add_flag("--adaptive", a->adaptive,
               "Also run adaptive depth (starting at the first --speculative-num-steps) and "
               "compare it with the best of plain and the fixed depths");
  app.add_flag("--adaptive-batch-fill", a->batch_fill,
               "The adaptive row weighs each depth by the batch slots requests leave empty "
               "between them (SpecDepthOptions::batch_fill; off by default, being measured)");
  app.add_option("--adaptive-variants", a->adaptive_variants,
                 "Adaptive rows to run side by side (implies --adaptive), comma-separated: base "
                 "(the defaults), or options joined by +: fill (batch fill), relax / norelax "
                 "(acceptance relaxation during plain steps on / off; on by default), pinN "
                 "(every step at depth N: the adaptive engine's cost of depth N, to set beside "
                 "the fixed S = N row), cuX (weight X of a speculative step in the catch-up "
                 "average), e.g. "
                 "base,fill,fill+relax,pin1; each compared with the best of plain and the fixed "
                 "depths");
  app.add_option("--speculative-max-steps", a->max_steps,
                 "Deepest adaptive round (default: max(5, the deepest fixed depth))");
  app.add_option("--speculative-token-map", a->token_map,
                 "JSON array of token ids: every MTP row drafts from these only (see tandem "
                 "make-token-map); compare the accept length with a run without it");
  app.add_option("--simulate-accept-length", a->simulate,
                 "Simulate drafts of one constant per-position acceptance that gives this mean "
                 "accept length at the first --speculative-num-steps (cost study)");
  app.add_option("--write-prompt-ids", a->write_ids,
                 "Write the token ids of the prompts used to this JSON file");
  app.add_flag("--no-plain", a->no_plain, "Skip the runs without speculation");
  app.add_option("--repeat", a->repeat,
                 "Run every row this many times, interleaved (plain, each depth, adaptive, then "
                 "again), and report each row's median run by tokens/s")
      ->check(CLI::Range(1, 99));
  app.add_option("--svg", a->svg,
                 "Also write the results as an SVG chart: tok/s and TPOT against concurrency, "
                 "plain and MTP, and per-position acceptance");
  app.add_flag("--no-warmup", a->no_warmup,
               "Time the first pass (default: an untimed pass of the same workload first)");
  app.add_option("--device", a->device, "cpu | cuda");
  app.add_flag("--disable-cuda-graph", a->disable_cuda_graph, "Run decode-shaped forwards eagerly");
  app.add_option("--cuda-graph-max-prefill-tokens", a->prefill_graph_tokens,
                 "Prefill steps of at most this many padded tokens replay CUDA graphs (0: eager; "
                 "default 256 on GPUs)");
  app.add_option("--warm-up-tokens", a->warm_up_tokens,
                 "Each engine's start-up warm-up: prefill forwards at every GEMM row bucket up to "
                 "this many tokens (0: none; default --max-prefill-tokens on GPUs, none on the "
                 "CPU), as tandem serve");
  app.add_flag("--profile-spec-phases", a->profile_phases,
               "Print the mean ms per speculative round of each phase (draft, verify, accept, "
               "extend); synchronizes the device between phases, which costs some speed");
  app.add_flag("--loop-phases", a->loop_phases,
               "Print under each row the engine thread's microseconds per step in each phase of "
               "its loop (wait, schedule, prepare, device, commit, send, publish)");
  app.add_option("--chunked-prefill-size", a->chunked_prefill_size,
                 "Largest prefill chunk of one request per step, as tandem serve")
      ->capture_default_str();
  app.add_option(
         "--max-prefill-tokens", a->max_prefill_tokens,
         "Prefill token budget per step (raised to --chunked-prefill-size), as tandem serve")
      ->capture_default_str();
  app.add_option("--scheduler-delay-factor", a->scheduler_delay_factor,
                 "As tandem serve: while requests decode, admit waiting ones once the oldest has "
                 "waited this many times the last prefill step")
      ->capture_default_str();
  app.add_flag("--enable-mixed-chunk", a->mixed_chunk,
               "Plain rows: decoding requests ride along in prefill steps (docs/runtime.md)");
  app.add_flag("--enable-deterministic-inference", a->deterministic,
               "Batch-invariant kernels for every batch shape (GPU)");
  app.add_option("--load-format", a->load_format,
                 "auto (the checkpoint) | dummy (random weights on the device)");
  app.add_option("--preset", a->preset,
                 "With --load-format dummy: the configuration (e.g. glm5.2)");
  app.add_option("--num-layers", a->num_layers,
                 "With --load-format dummy: keep this many decoder layers (a slice)");
  app.add_option("--max-total-tokens", a->max_total_tokens, "KV cache capacity in tokens");
  app.add_option("--quantization", a->quantization,
                 "fp8: quantize a bf16 checkpoint to 128x128 block FP8 while loading; with "
                 "--load-format dummy, fp8 or mxfp4 weights in the real checkpoints' layout");
  app.add_option("--model-loader-extra-config", a->loader_extra,
                 "JSON, as SGLang: {\"online_quant_config\": {\"global_quant_config\": "
                 "\"ptpc_fp8\", \"exclude_layer\": [globs]}}");
  app.add_flag("--weight-only-quant", a->weight_only_quant,
               "Quark / MXFP4 checkpoints: keep activations in bf16 (W4A16) where the checkpoint's "
               "input_tensors quantize them (W4A4)");
  app.add_option("--kv-cache-dtype", a->kv_cache_dtype,
                 "auto | bf16 | bfloat16 | fp8_e4m3 | fp8 (FP8 KV rows, docs/kv-cache.md)");
  app.add_option("--json-schema", a->json_schema,
                 "Constrain every request's output by this JSON Schema file (structured outputs)");
  app.add_option("--regex", a->regex, "Constrain every request's output by this regex");
  app.add_option("--workspace-mb", a->workspace_mb,
                 "Activation arena of one step on GPUs (long multi-sequence prefills need more)");
  return [a]() {
    const bool kv_fp8 = parse_kv_cache_dtype(a->kv_cache_dtype);
    const std::string dir = resolve_model_path(
        a->model_path.empty() ? default_model_path() : a->model_path, a->revision, "--model-path");
    std::vector<int64_t> fixed;  // the fixed depths to run
    for (int64_t s : parse_list(a->steps))
      if (s > 0) fixed.push_back(s);
    // --adaptive-variants: each variant's (batch fill, acceptance relaxation) and row label.
    struct Variant {
      bool fill = false;
      std::optional<bool> relax;  // relax / norelax; unnamed: the default
      int64_t pin = -1;           // pinN: SpeculativeOptions::depth_override to N
      double catch_up = -1.0;     // cuX: SpeculativeOptions::adaptive_catch_up_alpha X
      std::string label;
    };
    std::vector<Variant> variants;
    if (!a->adaptive_variants.empty()) {
      a->adaptive = true;
      std::stringstream list(a->adaptive_variants);
      for (std::string item; std::getline(list, item, ',');) {
        Variant v;
        if (item != "base") {
          std::stringstream parts(item);
          for (std::string part; std::getline(parts, part, '+');) {
            if (part == "fill") {
              v.fill = true;
            } else if (part == "relax" || part == "norelax") {
              v.relax = part == "relax";
            } else if (part.size() > 3 && part.compare(0, 3, "pin") == 0 &&
                       part.find_first_not_of("0123456789", 3) == std::string::npos) {
              v.pin = std::stoll(part.substr(3));
            } else if (part.size() > 2 && part.compare(0, 2, "cu") == 0) {
              try {
                size_t used = 0;
                v.catch_up = std::stod(part.substr(2), &used);
                if (used != part.size() - 2 || !(v.catch_up > 0 && v.catch_up <= 1)) throw 0;
              } catch (...) {
                fail("--adaptive-variants: '{}' in '{}': cuX needs a weight in (0, 1]", part, item);
              }
            } else {
              fail(
                  "--adaptive-variants: '{}' in '{}' is not base, fill, relax, norelax, pinN or "
                  "cuX",
                  part, item);
            }
          }
        }
        const bool r = v.relax == true, n = v.relax == false;
        v.label = std::string("MTP adapt") + (v.fill || r || n ? "+" : "") + (v.fill ? "f" : "") +
                  (r ? "r" : "") + (n ? "n" : "");
        if (v.catch_up > 0) v.label += fmt::format(" cu{:g}", v.catch_up);
        if (v.pin >= 0) v.label = fmt::format("MTP pin{}", v.pin);
        variants.push_back(v);
      }
      if (variants.empty()) fail("--adaptive-variants: no variant in '{}'", a->adaptive_variants);
    }
    if (a->adaptive && fixed.empty()) fail("--adaptive needs a --speculative-num-steps above 0");
    const bool speculate = !fixed.empty();
    LoadOptions lo;
    lo.load_mtp = speculate;
    lo.online_quant = parse_online_quant(a->quantization, a->loader_extra);
    lo.online_quant.weight_only = a->weight_only_quant;
    if (a->device == "cuda") {
      lo.device = Device::cuda();
      lo.dtype = DType::BF16;
    } else if (a->device != "cpu") {
      fail("--device must be cpu or cuda, got {}", a->device);
    }
    std::shared_ptr<const Model> model;
    if (a->load_format == "dummy") {
      ModelConfig c = a->preset.empty() ? ModelConfig::from_file(dir + "/config.json")
                                        : preset_config(a->preset);
      if (a->num_layers > 0 && a->num_layers < c.num_hidden_layers) {
        c.num_hidden_layers = a->num_layers;
        c.layer_is_moe.resize(static_cast<size_t>(a->num_layers));
        if (c.has_indexer) c.indexer_full.resize(static_cast<size_t>(a->num_layers));
      }
      // Dummy weights take the layout of the real checkpoints of that format: --quantization fp8
      // as GLM-5.x-FP8 (128x128 blocks, ue8m0), mxfp4 / quark as AMD's Quark MXFP4 (experts).
      if (a->quantization == "fp8")
        c.quant = fp8_checkpoint_quant(c);
      else if (a->quantization == "mxfp4" || a->quantization == "quark")
        c.quant = mxfp4_checkpoint_quant(c);
      if (a->weight_only_quant)
        c.quant = without_activation_quant(c.quant, "--load-format dummy");
      else if (!a->loader_extra.empty())
        fail("--model-loader-extra-config does not apply to --load-format dummy");
      model = Model::dummy(c, lo);
    } else {
      model = Model::load(dir, lo);
    }
    // Every request's lengths, drawn once (the same for every row): with fixed lengths, requests
    // decoded plainly all finish together, which favours plain decoding (docs/runtime.md, "What
    // the step times do not see").
    if (a->num_prompts < 1) fail("--num-prompts must be at least 1, got {}", a->num_prompts);
    if (a->prompt_tokens < 1 || a->max_new < 1)
      fail("--prompt-tokens and --max-new-tokens must be at least 1");
    bench::Rng length_rng(1);
    const std::vector<int64_t> prompt_lens =
        bench::sample_lengths(a->prompt_tokens, a->range_ratio, a->num_prompts, length_rng);
    const std::vector<int64_t> max_new =
        bench::sample_lengths(a->max_new, a->range_ratio, a->num_prompts, length_rng);
    std::vector<std::vector<int32_t>> prompts;
    if (!a->prompts.empty()) {
      std::ifstream in(a->prompts);
      if (!in) fail("cannot open {}", a->prompts);
      const nlohmann::json j = nlohmann::json::parse(in);
      std::optional<Tokenizer> tok;
      for (const auto& p : j) {
        if (p.is_string()) {
          if (!tok)
            tok = Tokenizer::from_file((std::filesystem::path(dir) / "tokenizer.json").string());
          std::vector<int32_t> ids = tok->encode(p.get<std::string>());
          const int64_t len = prompt_lens[prompts.size()];
          if (static_cast<int64_t>(ids.size()) > len) ids.resize(static_cast<size_t>(len));
          prompts.push_back(ids);
        } else {
          prompts.push_back(p.get<std::vector<int32_t>>());
        }
        if (static_cast<int64_t>(prompts.size()) == a->num_prompts) break;
      }
    } else {
      Rng rng(1);
      for (int64_t i = 0; i < a->num_prompts; ++i) {
        std::vector<int32_t> p;
        for (int64_t t = 0; t < prompt_lens[static_cast<size_t>(i)]; ++t)
          p.push_back(static_cast<int32_t>(rng.next_u64() %
                                           static_cast<uint64_t>(model->config().vocab_size)));
        prompts.push_back(p);
      }
    }
    if (!a->write_ids.empty()) {
      std::ofstream out(a->write_ids);
      out << nlohmann::json(prompts).dump() << "\n";
    }
    // Structured outputs: every request constrained by the same grammar, compiled once.
    MakeConstraint constraint;
    std::string constrained_by;
    if (!a->json_schema.empty() || !a->regex.empty()) {
      if (!a->json_schema.empty() && !a->regex.empty()) fail("give --json-schema or --regex");
      server::ConstraintSpec spec;
      if (!a->json_schema.empty()) {
        std::ifstream in(a->json_schema);
        if (!in) fail("--json-schema {}: cannot open the file", a->json_schema);
        spec.kind = server::ConstraintSpec::Kind::kJsonSchema;
        spec.source.assign(std::istreambuf_iterator<char>(in), {});
        spec.param = "--json-schema";
        constrained_by = "JSON schema " + std::filesystem::path(a->json_schema).filename().string();
      } else {
        spec.kind = server::ConstraintSpec::Kind::kRegex;
        spec.source = a->regex;
        spec.param = "--regex";
        constrained_by = "regex";
      }
      const Tokenizer tok =
          Tokenizer::from_file((std::filesystem::path(dir) / "tokenizer.json").string());
      server::GrammarCache cache(tok);
      const auto t0 = Clock::now();
      server::CompiledConstraint compiled;
      try {
        compiled = cache.get(spec);
      } catch (const std::exception& e) {
        fail("{}", e.what());
      }
      std::printf("%s compiled in %.1f ms for %d tokens\n", constrained_by.c_str(),
                  1e3 * std::chrono::duration<double>(Clock::now() - t0).count(), tok.vocab_size());
      constraint = [compiled] { return std::make_shared<server::GrammarConstraint>(compiled); };
    }
    EngineOptions plain;
    plain.max_running_requests = 64;
    plain.max_total_tokens = a->max_total_tokens;
    plain.page_size = a->device == "cuda" ? 64 : 16;
    plain.disable_cuda_graph = a->disable_cuda_graph;
    plain.cuda_graph_max_prefill_tokens = a->prefill_graph_tokens;
    plain.warm_up_tokens = a->warm_up_tokens;
    plain.workspace_mb = a->workspace_mb;
    plain.deterministic = a->deterministic;
    plain.kv_cache_fp8 = kv_fp8;
    plain.enable_mixed_chunk = a->mixed_chunk;  // speculative rows turn it off (validate)
    plain.chunked_prefill_size = a->chunked_prefill_size;
    plain.max_prefill_tokens = std::max(a->max_prefill_tokens, a->chunked_prefill_size);
    plain.scheduler_delay_factor = a->scheduler_delay_factor;
    // One engine configuration per speculative row: each fixed depth, then adaptive.
    struct SpecRun {
      std::string label;
      EngineOptions opt;
    };
    std::vector<SpecRun> spec_runs;
    // The draft vocabulary, read once for every speculative row.
    const std::vector<int32_t> draft_ids =
        a->token_map.empty() ? std::vector<int32_t>{}
                             : read_token_map(a->token_map, model->config().vocab_size);
    for (int64_t s : fixed) {
      EngineOptions sp = plain;
      sp.spec.algorithm = "EAGLE";
      sp.spec.num_steps = s;
      sp.spec.adaptive = false;
      sp.spec.num_draft_tokens = 0;  // num_steps + 1
      // The simulated drafts accept like one draft model at every depth: the rate that gives the
      // requested accept length at the first depth listed.
      sp.spec.simulate_accept_length =
          a->simulate > 0 ? simulated_accept_length(simulated_accept_rate(a->simulate, fixed[0]), s)
                          : 0.0;
      sp.profile_spec_phases = a->profile_phases;
      sp.spec.token_map = draft_ids;
      spec_runs.push_back({fmt::format("MTP S={}", s), sp});
    }
    if (a->adaptive) {
      EngineOptions sp = spec_runs.front().opt;
      sp.spec.adaptive = true;
      sp.spec.adaptive_batch_fill = a->batch_fill;
      sp.spec.max_steps = a->max_steps > 0
                              ? a->max_steps
                              : std::max<int64_t>(5, *std::max_element(fixed.begin(), fixed.end()));
      sp.spec.simulate_accept_length = spec_runs.front().opt.spec.simulate_accept_length;
      if (variants.empty()) {
        spec_runs.push_back({"MTP adapt", sp});
      } else {
        // Every variant on the same drift: the repetitions interleave every row.
        for (const Variant& v : variants) {
          EngineOptions vo = sp;
          vo.spec.adaptive_batch_fill = v.fill;
          vo.spec.adaptive_accept_relax = v.relax.value_or(sp.spec.adaptive_accept_relax);
          vo.spec.adaptive_catch_up_alpha = v.catch_up;
          if (v.pin >= 0) {
            if (v.pin > vo.spec.max_steps)
              fail("--adaptive-variants: pin{} is deeper than the adaptive maximum {}", v.pin,
                   vo.spec.max_steps);
            const int64_t pin = v.pin;
            vo.spec.depth_override = [pin](int64_t, int64_t) { return pin; };
          }
          spec_runs.push_back({v.label, vo});
        }
      }
    }
    if (!a->token_map.empty() && !spec_runs.empty())
      std::printf("draft vocabulary: %zu of %lld tokens (%s)\n", draft_ids.size(),
                  static_cast<long long>(model->config().vocab_size), a->token_map.c_str());
    std::string lengths = fmt::format("{} new tokens each", a->max_new);
    if (a->range_ratio < 1) {
      int64_t lo = a->max_new, total = 0;
      for (size_t i = 0; i < prompts.size(); ++i)
        lo = std::min(lo, max_new[i]), total += max_new[i];
      lengths = fmt::format("{}-{} new tokens ({} in all; --random-range-ratio {})", lo, a->max_new,
                            total, a->range_ratio);
    }
    std::printf("model %s on %s: %zu prompts, %s, greedy%s\n",
                a->load_format == "dummy"
                    ? ("dummy " + (a->preset.empty() ? dir : a->preset)).c_str()
                    : dir.c_str(),
                model->device().str().c_str(), prompts.size(), lengths.c_str(),
                constrained_by.empty() ? "" : (", constrained by a " + constrained_by).c_str());
    if (a->repeat > 1)
      std::printf("each row: the median of %lld interleaved runs by tok/s\n",
                  static_cast<long long>(a->repeat));
    std::printf("%-11s %-10s %10s %10s %10s %8s %s\n", "concurrency", "mode", "tok/s", "TPOT ms",
                "TTFT ms", "accept", "per-position");
    bench::BenchChart chart;
    chart.title =
        fmt::format("{} on {}: {} prompts x {} tokens, {}",
                    a->load_format == "dummy" ? "dummy " + (a->preset.empty() ? dir : a->preset)
                                              : std::filesystem::path(dir).filename().string(),
                    model->device().str(), prompts.size(), a->max_new,
                    speculate ? spec_runs.back().label : "plain");
    // A row's median run by tokens/s (the lower one of an even count). Rows measured minutes
    // apart drift by a few percent on the same machine; --repeat interleaves the rows so that a
    // drift reaches them all, and the median drops a run that met a stall.
    auto median_run = [](std::vector<RunStats> runs) {
      std::sort(runs.begin(), runs.end(), [](const RunStats& x, const RunStats& y) {
        return x.tokens_per_s < y.tokens_per_s;
      });
      return runs[(runs.size() - 1) / 2];
    };
    for (int64_t c : parse_list(a->concurrency)) {
      chart.concurrency.push_back(c);
      // [row][repetition]: row 0 plain (when run), then spec_runs in order.
      const size_t first_spec = a->no_plain ? 0 : 1;
      std::vector<std::vector<RunStats>> runs(first_spec + spec_runs.size());
      for (int64_t rep = 0; rep < a->repeat; ++rep) {
        if (!a->no_plain)
          runs[0].push_back(run(model, plain, prompts, max_new, c, !a->no_warmup, constraint));
        for (size_t r = 0; r < spec_runs.size(); ++r)
          runs[first_spec + r].push_back(
              run(model, spec_runs[r].opt, prompts, max_new, c, !a->no_warmup, constraint));
      }
      RunStats p;
      if (!a->no_plain) {
        p = median_run(runs[0]);
        std::printf("%-11lld %-10s %10.1f %10.2f %10.1f %8s\n", static_cast<long long>(c), "plain",
                    p.tokens_per_s, p.tpot_ms, p.ttft_ms, "-");
        if (a->loop_phases) print_loop(p);
        print_graph_builds(p);
        chart.plain_tok_s.push_back(p.tokens_per_s);
        chart.plain_tpot_ms.push_back(p.tpot_ms);
      }
      double best_other = a->no_plain ? 0.0 : p.tokens_per_s;  // the best of plain and fixed S
      std::string best_label = "plain";
      for (size_t r = 0; r < spec_runs.size(); ++r) {
        const SpecRun& sr = spec_runs[r];
        const RunStats s = median_run(runs[first_spec + r]);
        if (r + 1 == spec_runs.size()) {  // the chart shows the last (adaptive when run)
          chart.mtp_tok_s.push_back(s.tokens_per_s);
          chart.mtp_tpot_ms.push_back(s.tpot_ms);
          chart.accept_per_position.push_back(s.accept_per_position);
        }
        std::string per;
        for (double x : s.accept_per_position) per += fmt::format("{:.2f} ", x);
        std::printf("%-11lld %-10s %10.1f %10.2f %10.1f %8.3f %s", static_cast<long long>(c),
                    sr.label.c_str(), s.tokens_per_s, s.tpot_ms, s.ttft_ms, s.accept_length,
                    per.c_str());
        if (!a->no_plain) {
          std::string verdict = "identical";
          if (a->simulate > 0) {
            verdict = "(simulated)";
          } else if (const auto odd =
                         std::find_if(runs[first_spec + r].begin(), runs[first_spec + r].end(),
                                      [&](const RunStats& x) { return x.outputs != p.outputs; });
                     odd != runs[first_spec + r].end()) {
            // Every repetition is compared; the first that differs is described.
            const RunStats& d = *odd;
            // Which requests diverge, and at which generated token.
            int differ = 0;
            std::string where, gaps;
            for (size_t i = 0; i < d.outputs.size(); ++i) {
              if (d.outputs[i] == p.outputs[i]) continue;
              ++differ;
              size_t k = 0;
              while (k < d.outputs[i].size() && k < p.outputs[i].size() &&
                     d.outputs[i][k] == p.outputs[i][k])
                ++k;
              where += fmt::format("{}{}", where.empty() ? "" : ",", k);
              // How close the two choices were: the plain run's logit gap between its token and
              // the speculative run's, recomputed on the common prefix in one forward.
              if (k < d.outputs[i].size() && k < p.outputs[i].size()) {
                GenerateRequest g;
                g.prompt = prompts[i];
                g.prompt.insert(g.prompt.end(), p.outputs[i].begin(),
                                p.outputs[i].begin() + static_cast<long>(k));
                g.max_new_tokens = 1;
                Generator gen(*model, static_cast<int64_t>(g.prompt.size()) + 1, 16, kv_fp8);
                const std::vector<float> l = gen.generate(g).logits[0];
                gaps += fmt::format("{}{:.4f}", gaps.empty() ? "" : ",",
                                    l[p.outputs[i][k]] - l[d.outputs[i][k]]);
              }
            }
            verdict = fmt::format(
                "DIFFER in {}/{} requests (first divergence at token {}; plain-minus-spec logit "
                "gap there {})",
                differ, d.outputs.size(), where, gaps);
          }
          std::printf(" speedup %.2fx, outputs %s", s.tokens_per_s / p.tokens_per_s,
                      verdict.c_str());
        }
        std::printf("\n");
        if (sr.opt.spec.adaptive) {
          // Where the adaptive run spent its steps, and how it compares with the best other row.
          uint64_t total = 0;
          for (uint64_t n : s.depth_steps) total += n;
          std::string hist;
          for (size_t d = 0; d < s.depth_steps.size(); ++d)
            if (s.depth_steps[d])
              hist += fmt::format("{}:{:.0f}% ", d, 100.0 * s.depth_steps[d] / total);
          std::printf("%-11s depths %s", "", hist.c_str());
          if (best_other > 0)
            std::printf("-> %.3fx of the best other row (%s)", s.tokens_per_s / best_other,
                        best_label.c_str());
          std::printf("\n");
        } else if (s.tokens_per_s > best_other) {
          best_other = s.tokens_per_s;
          best_label = sr.label;
        }
        if (a->profile_phases) print_phases(s);
        if (a->loop_phases) print_loop(s);
        print_graph_builds(s);
        std::fflush(stdout);
      }
    }
    if (!a->svg.empty()) {
      std::ofstream f(a->svg);
      f << bench::render_bench_svg(chart);
      if (!f) fail("--svg {}: cannot write the file", a->svg);
      log_info("wrote {}", a->svg);
    }
    return 0;
  };
}

}  // namespace tandem::cli
