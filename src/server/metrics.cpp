#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tandem::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)),
      counts_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size() + 1)) {
  std::sort(bounds_.begin(), bounds_.end());
}

void Histogram::observe(double value, uint64_t times) {
  // Prometheus buckets are "less than or equal": le="0.1" counts 0.1 itself.
  const size_t b = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[b].fetch_add(times, std::memory_order_relaxed);
  sum_.fetch_add(value * static_cast<double>(times), std::memory_order_relaxed);
}

// The count is the buckets' total, so the +Inf bucket always equals it, as Prometheus requires,
// even while other threads observe; the sum may lead or lag the buckets by those observations.
Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t run = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i)
    s.cumulative.push_back(run += counts_[i].load(std::memory_order_relaxed));
  s.sum = sum_.load(std::memory_order_relaxed);
  s.count = run;
  return s;
}

// Buckets reach down to a millisecond: the CPU build serves small models fast, and GPU decode
// steps are a few milliseconds.
ServerMetrics::ServerMetrics()
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
            0.75,  1,     2.5,  5,    7.5,  10,   20,   40,  80,   160}),
      itl({0.001, 0.002, 0.004, 0.006, 0.008, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05,
           0.075, 0.1,   0.15,  0.2,   0.3,   0.4,  0.5,   0.75, 1,     2.5,  5}),
      e2e({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120, 240, 480, 960}) {}

uint64_t ServerMetrics::finished_total() const {
  uint64_t n = 0;
  for (const auto& c : finished) n += c.load();
  return n;
}

namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

class Writer {
 public:
  explicit Writer(const std::string& model)
      : base_(fmt::format("model_name=\"{}\"", escape_label(model))) {}

  void gauge(const std::string& name, const std::string& help, double v) {
    family(name, help, "gauge");
    sample(name, "", v);
  }
  // name ends in _total; the TYPE line uses the same name, as prometheus_client writes it.
  void counter(const std::string& name, const std::string& help, double v) {
    family(name, help, "counter");
    sample(name, "", v);
  }
  void family(const std::string& name, const std::string& help, const char* type) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void sample(const std::string& name, const std::string& labels, double v) {
    out_ += fmt::format("{}{{{}{}{}}} {}\n", name, base_, labels.empty() ? "" : ",", labels,
                        format_value(v));
  }
  void histogram(const std::string& name, const std::string& help, const Histogram::Snapshot& s) {
    family(name, help, "histogram");
    for (size_t i = 0; i < s.bounds.size(); ++i)
      sample(name + "_bucket", fmt::format("le=\"{}\"", format_value(s.bounds[i])),
             static_cast<double>(s.cumulative[i]));
    sample(name + "_bucket", "le=\"+Inf\"", static_cast<double>(s.count));
    sample(name + "_sum", "", s.sum);
    sample(name + "_count", "", static_cast<double>(s.count));
  }
  std::string take() { return std::move(out_); }

 private:
  std::string base_;
  std::string out_;
};

}  // namespace

std::string render_prometheus(const EngineMetrics& e, const ServerMetrics& s,
                              const MetricsContext& ctx) {
  Writer w(ctx.model_name);
  const double used_tokens = static_cast<double>(e.kv_pages_used * ctx.page_size);
  const double usage =
      e.kv_pages_total ? static_cast<double>(e.kv_pages_used) / e.kv_pages_total : 0.0;
  const double hit_rate = e.prompt_tokens_total
                              ? static_cast<double>(e.cached_tokens_total) / e.prompt_tokens_total
                              : 0.0;
  const double accept_rate =
      e.spec_draft_tokens ? static_cast<double>(e.spec_accepted_tokens) / e.spec_draft_tokens : 0.0;
  const Histogram::Snapshot ttft = s.ttft.snapshot(), itl = s.itl.snapshot(),
                            e2e = s.e2e.snapshot();

  // Series that exist under both names, with SGLang's meaning.
  for (const char* p : {"tandem:", "sglang:"}) {
    const std::string P = p;
    w.gauge(P + "num_running_reqs", "Requests in the running batch.", e.num_running);
    w.gauge(P + "num_queue_reqs", "Requests waiting to be scheduled.", e.num_waiting);
    w.gauge(P + "num_used_tokens", "KV cache slots in use (requests and prefix cache).",
            used_tokens);
    w.gauge(P + "token_usage", "Fraction of the KV cache in use.", usage);
    w.gauge(P + "gen_throughput", "Generated tokens per second over the last seconds.",
            e.last_gen_throughput);
    w.gauge(P + "cache_hit_rate", "Fraction of prompt tokens served from the prefix cache.",
            hit_rate);
    w.gauge(P + "spec_accept_length",
            "Mean tokens committed per verify round, bonus token included (0 without speculation).",
            e.avg_spec_accept_length());
    w.gauge(P + "spec_accept_rate", "Fraction of draft tokens accepted.", accept_rate);
    w.counter(P + "prompt_tokens_total", "Prompt tokens of finished requests.",
              static_cast<double>(e.prompt_tokens_total));
    w.counter(P + "generation_tokens_total", "Generated tokens.",
              static_cast<double>(e.generation_tokens_total));
    w.counter(P + "num_requests_total", "Finished requests.",
              static_cast<double>(s.finished_total()));
    w.counter(P + "cached_tokens_total", "Prompt tokens served from the prefix cache.",
              static_cast<double>(e.cached_tokens_total));
    w.histogram(P + "time_to_first_token_seconds", "Time to first token.", ttft);
    w.histogram(P + "inter_token_latency_seconds", "Time between generated tokens.", itl);
    w.histogram(P + "e2e_request_latency_seconds", "Time from submission to the last token.", e2e);
  }

  // Tandem's own series.
  w.gauge("tandem:kv_pages_total", "KV cache pages.", e.kv_pages_total);
  w.gauge("tandem:kv_pages_used", "KV cache pages held by requests or the prefix cache.",
          e.kv_pages_used);
  w.gauge("tandem:kv_pages_cached", "KV cache pages held only by the prefix cache (evictable).",
          e.kv_pages_cached);
  w.gauge("tandem:page_size", "Tokens per KV cache page.", ctx.page_size);
  w.counter("tandem:requests_submitted_total", "Requests submitted to the engine.",
            static_cast<double>(e.requests_total));
  w.counter("tandem:preemptions_total", "Requests preempted to free KV cache.",
            static_cast<double>(e.preemptions_total));
  w.counter("tandem:forward_steps_total", "Model forward passes of the target.",
            static_cast<double>(e.forward_steps_total));
  w.counter("tandem:graphed_prefill_steps_total",
            "Prefill steps that replayed the CUDA graph of their padded shape.",
            static_cast<double>(e.graphed_prefill_steps));
  w.counter("tandem:warm_up_forwards_total",
            "Forwards and steps of the start-up warm-up (before any request: prefill at every GEMM "
            "row bucket, decode at every batch bucket and depth).",
            static_cast<double>(e.warm_up_forwards));
  w.family("tandem:engine_loop_seconds_total",
           "Wall seconds of the engine thread by phase of its loop (they sum to its lifetime).",
           "counter");
  for (size_t i = 0; i < e.loop_phase_seconds.size(); ++i)
    w.sample("tandem:engine_loop_seconds_total", fmt::format("phase=\"{}\"", kLoopPhaseNames[i]),
             e.loop_phase_seconds[i]);
  w.family("tandem:engine_decode_loop_seconds_total",
           "The same for the iterations of the engine loop that ran a decode step.", "counter");
  for (size_t i = 0; i < e.decode_loop_phase_seconds.size(); ++i)
    w.sample("tandem:engine_decode_loop_seconds_total",
             fmt::format("phase=\"{}\"", kLoopPhaseNames[i]), e.decode_loop_phase_seconds[i]);
  w.counter("tandem:engine_decode_steps_total", "Iterations of the engine loop that decoded.",
            static_cast<double>(e.decode_loop_steps));
  w.family("tandem:request_success_total", "Finished requests by finish reason.", "counter");
  for (FinishReason r :
       {FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort, FinishReason::kError})
    w.sample("tandem:request_success_total",
             fmt::format("finished_reason=\"{}\"", finish_reason_name(r)),
             static_cast<double>(s.finished[static_cast<size_t>(r)].load()));

  // Speculative decoding counters; acceptance length = 1 + accepted / drafts between scrapes.
  struct Names {
    const char *drafts, *draft_tokens, *accepted, *per_pos;
  };
  for (const Names& n :
       {Names{"tandem:spec_verify_steps_total", "tandem:spec_draft_tokens_total",
              "tandem:spec_accepted_tokens_total", "tandem:spec_accepted_tokens_per_pos_total"},
        Names{"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
              "vllm:spec_decode_num_accepted_tokens_total",
              "vllm:spec_decode_num_accepted_tokens_per_pos_total"}}) {
    w.counter(n.drafts, "Verify rounds, counted per request (each round drafts once).",
              static_cast<double>(e.spec_verify_steps));
    w.counter(n.draft_tokens, "Draft tokens proposed.", static_cast<double>(e.spec_draft_tokens));
    w.counter(n.accepted, "Draft tokens accepted (bonus tokens excluded).",
              static_cast<double>(e.spec_accepted_tokens));
    w.family(n.per_pos, "Draft tokens accepted at each draft position.", "counter");
    for (size_t i = 0; i < e.spec_accepted_per_position.size(); ++i)
      w.sample(n.per_pos, fmt::format("position=\"{}\"", i),
               static_cast<double>(e.spec_accepted_per_position[i]));
  }
  w.family("tandem:spec_depth_steps_total",
           "Decode steps by the number of drafts they ran (adaptive depth; 0 = plain decoding).",
           "counter");
  for (size_t d = 0; d < e.spec_depth_steps.size(); ++d)
    w.sample("tandem:spec_depth_steps_total", fmt::format("depth=\"{}\"", d),
             static_cast<double>(e.spec_depth_steps[d]));
  if (!e.spec_depth_steps.empty()) {
    w.counter("tandem:spec_draft_prefill_tokens_total",
              "Positions the MTP draft read along with prefill steps.",
              static_cast<double>(e.spec_draft_prefill_tokens));
    w.counter("tandem:spec_draft_catch_up_tokens_total",
              "Positions the MTP draft read in catch-ups before a speculative round (adaptive "
              "depth: prompts and plainly decoded positions it had not read).",
              static_cast<double>(e.spec_draft_catch_up_tokens));
  }
  w.gauge("vllm:num_requests_running", "Requests in the running batch.", e.num_running);
  w.gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", e.num_waiting);
  w.gauge("vllm:kv_cache_usage_perc", "Fraction of the KV cache in use.", usage);
  return w.take();
}

}  // namespace tandem::server
