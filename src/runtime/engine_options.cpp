#include "runtime/engine_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/error.h"

namespace tandem {

namespace {

void positive(const char* flag, int64_t v) {
  if (v < 1) throw InvalidArgument(fmt::format("{} must be at least 1, got {}", flag, v));
}

}  // namespace

bool parse_kv_cache_dtype(const std::string& v) {
  if (v == "auto" || v == "bf16" || v == "bfloat16") return false;
  if (v == "fp8_e4m3" || v == "fp8") return true;
  throw InvalidArgument(fmt::format(
      "--kv-cache-dtype {}: expected auto, bf16, bfloat16, fp8_e4m3 or fp8 (e4m3 rows with "
      "per-128 scales; fp8_e5m2 is not supported)",
      v));
}

void EngineOptions::validate(std::vector<std::string>* warnings) {
  positive("--max-running-requests", max_running_requests);
  positive("--page-size", page_size);
  if (max_queued_requests < 0)
    throw InvalidArgument(
        fmt::format("--max-queued-requests must not be negative, got {}", max_queued_requests));
  positive("--chunked-prefill-size", chunked_prefill_size);
  positive("--max-prefill-tokens", max_prefill_tokens);
  if (!(scheduler_delay_factor >= 0 && scheduler_delay_factor <= 100))
    throw InvalidArgument(fmt::format("--scheduler-delay-factor must be in [0, 100], got {}",
                                      scheduler_delay_factor));
  if (num_pages < 0) throw InvalidArgument(fmt::format("num_pages must not be negative"));
  if (num_pages == 0) positive("--max-total-tokens", max_total_tokens);
  positive("workspace_mb", workspace_mb);
  if (cuda_graph_max_prefill_tokens < -1)
    throw InvalidArgument(fmt::format(
        "--cuda-graph-max-prefill-tokens must be at least 0 (or -1: the default), got {}",
        cuda_graph_max_prefill_tokens));
  if (warm_up_tokens < -1)
    throw InvalidArgument(fmt::format(
        "--warm-up-tokens must be at least 0 (or -1: the default), got {}", warm_up_tokens));
  if (context_length < 0)
    throw InvalidArgument(
        fmt::format("--context-length must not be negative, got {}", context_length));
  if (!spec.enabled()) return;
  if (enable_mixed_chunk) {
    // A speculating sequence decodes in rounds (drafts, verify, draft extend), not as one token
    // of a prefill step.
    enable_mixed_chunk = false;
    if (warnings)
      warnings->push_back(
          "--enable-mixed-chunk is off: speculative decoding runs decode rounds, not one-token "
          "chunks in prefill steps");
  }
  std::string alg = spec.algorithm;
  std::transform(alg.begin(), alg.end(), alg.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  if (alg == "MTP") alg = "NEXTN";
  if (alg != "EAGLE" && alg != "NEXTN")
    throw InvalidArgument(fmt::format(
        "--speculative-algorithm {}: Tandem drafts with the checkpoint's MTP layer; use EAGLE or "
        "NEXTN",
        spec.algorithm));
  spec.algorithm = alg;
  if (spec.eagle_topk != 1)
    throw InvalidArgument(
        fmt::format("--speculative-eagle-topk {}: only chain drafts are supported, use "
                    "--speculative-eagle-topk 1",
                    spec.eagle_topk));
  if (spec.num_steps < 1 || spec.num_steps > kMaxSpeculativeSteps)
    throw InvalidArgument(fmt::format("--speculative-num-steps must be in [1, {}], got {}",
                                      kMaxSpeculativeSteps, spec.num_steps));
  if (spec.num_draft_tokens != spec.num_steps + 1) {
    if (spec.num_draft_tokens != 0 && warnings)
      warnings->push_back(
          fmt::format("--speculative-num-draft-tokens {} adjusted to num_steps + 1 = {} (topk 1)",
                      spec.num_draft_tokens, spec.num_steps + 1));
    spec.num_draft_tokens = spec.num_steps + 1;
  }
  if (spec.max_steps < 0 || spec.max_steps > kMaxSpeculativeSteps)
    throw InvalidArgument(fmt::format("--speculative-max-steps must be in [0, {}], got {}",
                                      kMaxSpeculativeSteps, spec.max_steps));
  if (spec.max_steps == 0) spec.max_steps = std::max<int64_t>(spec.num_steps, 5);
  if (spec.max_steps < spec.num_steps)
    throw InvalidArgument(
        fmt::format("--speculative-max-steps {} is below --speculative-num-steps {}",
                    spec.max_steps, spec.num_steps));
  const double a = spec.simulate_accept_length;
  if (a != 0 && !(a >= 1 && a <= static_cast<double>(spec.num_steps + 1)))
    throw InvalidArgument(fmt::format(
        "--simulate-accept-length must be 0 (off) or in [1, num_steps + 1 = {}], got {}",
        spec.num_steps + 1, a));
}

std::string request_length_error(int64_t prompt_tokens, int64_t max_new_tokens,
                                 int64_t context_length) {
  if (max_new_tokens < 1)
    return fmt::format("max_new_tokens must be at least 1, got {}", max_new_tokens);
  if (max_new_tokens <= context_length - prompt_tokens) return "";
  return fmt::format(
      "This model's maximum context length is {} tokens. However, you requested {} tokens ({} in "
      "the prompt, {} in the completion)",
      context_length, static_cast<uint64_t>(prompt_tokens) + static_cast<uint64_t>(max_new_tokens),
      prompt_tokens, max_new_tokens);
}

}  // namespace tandem
