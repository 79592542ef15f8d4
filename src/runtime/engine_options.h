// What an engine is configured with, and the one place its rules are checked: the server's flags,
// bench-offline and the tests all build EngineOptions and the engine validates them here, so a
// rule cannot give two answers in two layers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"

namespace tandem {

// The deepest draft a round may run (S): its captured graphs and static buffers grow with S.
constexpr int64_t kMaxSpeculativeSteps = 8;

struct SpeculativeOptions {
  std::string algorithm;  // "" (off) | "EAGLE" | "NEXTN" (an alias): the MTP layer drafts
  int64_t num_steps = 3;  // S: draft tokens per round (adaptive: the starting depth)
  // Adaptive depth (spec_depth_policy.h): every decode step chooses its number of drafts in
  // [0, max_steps] (0: plain decoding) from the batch size, the running acceptance and the
  // measured cost of each depth. false (--disable-speculative-adaptive): always num_steps.
  bool adaptive = true;
  int64_t max_steps = 0;  // deepest adaptive round; 0: max(num_steps, 5) (capped at 8)
  // Adaptive depth only: the draft reads a prompt along with its prefill where the policy expects
  // the batch to speculate and the reading pays for itself (SpecDepthPolicy::worth_reading),
  // instead of in a catch-up before the prompt's first speculative round. Off by default: on the
  // H200 (2026-12-05) it cost the GLM-5.2 4-layer slice at accept 3.5 25% of its TTFT and
  // 5-6% of its throughput at concurrency 8-64 (the policy then decoded plainly throughout) and
  // did not move the concurrency-1 cells (docs/benchmarks.md, "Adaptive depth").
  // --speculative-draft-reads-prompts turns it on.
  bool draft_reads_prompts = false;
  // Adaptive depth only: weigh each depth by the batch slots requests leave empty between them
  // (SpecDepthOptions::batch_fill). Off until measured on the GPU; bench-offline
  // --adaptive-batch-fill turns it on.
  bool adaptive_batch_fill = false;
  // Adaptive depth only: plain steps move the running acceptance toward its long-run mean
  // (SpecDepthOptions::accept_relax). On since session 39; bench-offline --adaptive-variants
  // norelax turns it off for comparison.
  bool adaptive_accept_relax = true;
  // Adaptive depth only: weight of one speculative step in the catch-up average
  // (SpecDepthOptions::catch_up_alpha); < 0: the policy's default. bench-offline
  // --adaptive-variants cuX sets it, to compare weights side by side.
  double adaptive_catch_up_alpha = -1.0;
  int64_t eagle_topk = 1;        // only 1 (chain drafts) is supported
  int64_t num_draft_tokens = 4;  // S + 1 tokens verified per round; 0: S + 1
  // The draft's vocabulary (--speculative-token-map, runtime/draft_vocab.h): it proposes only
  // these token ids, through an LM head of their rows; empty: the whole vocabulary.
  std::vector<int32_t> token_map;
  // Benchmarking aid: instead of comparing drafts with the target, accept each draft position
  // with one fixed conditional probability, chosen so that rounds of num_steps drafts commit this
  // many tokens on average (bonus included); 0 = off. Output text is then not the model's.
  double simulate_accept_length = 0.0;
  // Testing aid: each draft token d at position pos of a request becomes hook(request, pos, d),
  // just before verification (forces full acceptance or full rejection).
  std::function<int32_t(uint64_t request, int64_t position, int32_t draft)> draft_override;
  // Testing aid: the depth of each decode step becomes hook(batch size, the policy's choice),
  // clamped to [0, max_depth()] (forces schedules through plain steps and catch-ups). A step
  // whose depth the hook changed is not shown to the policy, which did not choose it.
  std::function<int64_t(int64_t batch, int64_t chosen)> depth_override;
  bool enabled() const { return !algorithm.empty(); }
  // The deepest round the engine must be built for (graphs, static buffers, KV headroom).
  int64_t max_depth() const { return adaptive ? max_steps : num_steps; }
};

struct EngineOptions {
  int64_t max_running_requests = 64;
  // Requests waiting to start beyond which submit() refuses new ones (Overloaded); 0: no bound.
  int64_t max_queued_requests = 0;
  int64_t page_size = 16;
  int64_t num_pages = 0;               // 0: derived from max_total_tokens
  int64_t max_total_tokens = 1 << 16;  // KV capacity in tokens when num_pages is 0
  // Largest prefill chunk of one request per step while any request decodes; with none
  // decoding a prompt may take what the others leave of max_prefill_tokens (SchedulerOptions).
  int64_t chunked_prefill_size = 512;
  int64_t max_prefill_tokens = 2048;  // prefill token budget of one step
  // SGLang's --enable-mixed-chunk: while prompts are being prefilled, every decoding sequence
  // rides along in the prefill step with its last token (one token of the step's budget), so
  // decoding does not stall behind prompts. Plain decoding only (validate() turns it off when
  // speculating, as SGLang does).
  bool enable_mixed_chunk = false;
  // vLLM's --scheduler-delay-factor (SchedulerOptions::delay_factor): while sequences decode,
  // waiting requests are admitted once the oldest has waited this many times the last prefill
  // step, so arrivals a few hundred microseconds apart share a prefill step. 0: no delay.
  double scheduler_delay_factor = 0;
  bool enable_prefix_cache = true;
  int64_t context_length = 0;   // longest prompt + output; 0: the model's max_position_embeddings
  int64_t workspace_mb = 4096;  // activation arena of one step on GPUs
  // Before the first request: prefill forwards at every row bucket up to this many tokens, then
  // of 2 .. max_running_requests one-token sequences (ModelRunner::warm_up), so that no request
  // pays for a GEMM kernel's first launch. -1: max_prefill_tokens on GPUs, none on the CPU (no
  // such cost there); 0: none. Under tensor parallelism every rank runs them (run_follower).
  int64_t warm_up_tokens = -1;
  int64_t warm_up_tokens_for(Device d) const {
    if (warm_up_tokens >= 0) return warm_up_tokens;
    return d.is_cpu() ? 0 : max_prefill_tokens;
  }
  bool disable_cuda_graph = false;  // run decode-shaped forwards eagerly on GPUs
  // Prefill steps whose padded size (sequences rounded up to a batch bucket, times their longest
  // chunk rounded up to a bucket of the same list: 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192,
  // 256, ...) is at most this many tokens run as captured graphs like decode steps (the padding
  // writes no KV). 0: prefill is always eager; -1: kDefaultPrefillGraphTokens on GPUs, 0 on the
  // CPU (where static_batches runs the same padded layout eagerly only when this is set).
  int64_t cuda_graph_max_prefill_tokens = -1;
  static constexpr int64_t kDefaultPrefillGraphTokens = 256;
  int64_t prefill_graph_tokens(Device d) const {
    if (disable_cuda_graph) return 0;
    return cuda_graph_max_prefill_tokens >= 0 ? cuda_graph_max_prefill_tokens
           : d.is_cpu()                       ? 0
                                              : kDefaultPrefillGraphTokens;
  }
  // --kv-cache-dtype fp8_e4m3: the KV pools hold the FP8 rows of docs/kv-cache.md (656 + 132
  // bytes a token and layer on GLM-5) instead of the compute dtype.
  bool kv_cache_fp8 = false;
  // Batch-invariant kernels (SGLang's --enable-deterministic-inference): a request's output
  // does not depend on what else is batched with it, so greedy speculation reproduces plain
  // decoding on GPUs too. The engine sets it on its backend for each of its steps.
  bool deterministic = false;
  // Run decode-shaped forwards from padded static batches even on the CPU (what GPUs capture as
  // graphs); tests use it to check that padding never changes results.
  bool static_batches = false;
  // Profiling aid: wait for the device after each phase of a speculative round and add the phase's
  // wall time to EngineMetrics::spec_phase_seconds (the waits cost some speed).
  bool profile_spec_phases = false;
  // Tensor parallelism: what the engine calls when the ranks can no longer agree (a rank died, a
  // collective timed out, a step failed after it was sent to the other ranks). Empty: log the
  // reason and end the process with exit code 1 (the server must not hang or serve half a model).
  std::function<void(const std::string& why)> on_fatal;
  SpeculativeOptions spec;

  // Checks every field and normalizes the speculative ones as SGLang does (algorithm names are
  // case-insensitive and MTP means NEXTN; num_draft_tokens 0 means S + 1, and any other value is
  // adjusted to S + 1 with a warning, since chain drafts verify exactly S + 1 tokens). Throws
  // InvalidArgument naming the flag; notes go to `warnings` when given.
  void validate(std::vector<std::string>* warnings = nullptr);
};

// --kv-cache-dtype: auto / bf16 / bfloat16 (the compute dtype) -> false; fp8_e4m3 / fp8 (SGLang's
// names) -> true; anything else throws InvalidArgument naming the flag.
bool parse_kv_cache_dtype(const std::string& value);

// The one rule for a request's length: the prompt plus max_new_tokens must fit the context.
// Returns "" when it does, else the error (compared without forming P + max_new_tokens, which
// can overflow).
std::string request_length_error(int64_t prompt_tokens, int64_t max_new_tokens,
                                 int64_t context_length);

}  // namespace tandem
