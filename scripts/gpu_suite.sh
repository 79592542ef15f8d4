#!/usr/bin/env bash
# The GPU tiers in one command, for the GPU machine (through the device tool): CUDA op tests
# against the CPU backend, whole-model GPU-vs-CPU tests, and the kernel / decode-step benchmark.
# Ends with a short table; full logs go to $OUT (or ./gpu-suite-out), and the summary, headed by
# the commit it ran on, to docs/results/gpu_suite_<date>_<commit>.txt (and a copy under $OUT,
# which is what the device tool brings back). Exits non-zero when no GPU is visible, when any
# step fails or times out, and when outputs that must be identical differ.
#
# Build here first (the GPU machine has no fmt and friends), then stage the binaries:
#   cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release
#   ninja -C build-cuda ops_tests gpu_model_tests gpu_dist_tests kernel_bench tandem
#   scripts/gpu_suite.sh --stage          # copies binaries + libfmt into build-cuda/carry
#                                         # (BUILD=dir stages from another CUDA build)
# and run through the device tool with carry ["build-cuda/carry.tar.xz"]:
#   scripts/gpu_suite.sh                  # or: scripts/gpu_suite.sh --quick (short benchmark)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build-cuda}  # the CUDA build to stage from
CARRY=${CARRY:-$ROOT/build-cuda/carry}  # staged binaries (another folder: a planted mutation's)

if [ "${1:-}" = "--stage" ]; then
  mkdir -p "$CARRY/lib"
  cp "$BUILD/tests/ops_tests" "$BUILD/tests/gpu_model_tests" "$BUILD/bench/kernel_bench" "$BUILD/tandem" "$CARRY/"
  # NCCL and the one-shot all-reduce (optional: older builds lack it).
  [ -f "$BUILD/tests/gpu_dist_tests" ] && cp "$BUILD/tests/gpu_dist_tests" "$CARRY/"
  # The adaptive-depth trace replay (host code; optional: older builds lack it).
  [ -f "$BUILD/bench/spec_depth_replay" ] && cp "$BUILD/bench/spec_depth_replay" "$CARRY/"
  # A whole engine's kernels per step, both kernel modes (optional: needs CUPTI at build time).
  [ -f "$BUILD/bench/engine_kernels" ] && cp "$BUILD/bench/engine_kernels" "$CARRY/"
  # The grammar engine's mask benchmark, on a real ~150K vocabulary (Qwen3's, the fixture).
  if [ -f "$BUILD/bench/grammar_bench" ] && [ -f "$ROOT/build/fixtures/tokenizer/qwen3/tokenizer.json" ]; then
    cp "$BUILD/bench/grammar_bench" "$CARRY/"
    cp "$ROOT/build/fixtures/tokenizer/qwen3/tokenizer.json" "$CARRY/qwen3_tokenizer.json"
  fi
  # Non-system shared libraries the binaries need (CUDA's own are on the GPU machine).
  # libnccl (218 MB) is on the GPU machine too, in /usr/lib/x86_64-linux-gnu.
  for lib in $(ldd "$CARRY"/ops_tests "$CARRY"/gpu_model_tests "$CARRY"/kernel_bench "$CARRY"/tandem | awk '/=>/ {print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libpthread*|libdl.so*|librt.so*|libcuda*|libcublas*|libnccl*) ;;
      *) cp -L "$lib" "$CARRY/lib/" ;;
    esac
  done
  # The commit the binaries were built from (the GPU machine gets no .git).
  { git -C "$ROOT" rev-parse --short=12 HEAD; git -C "$ROOT" status --porcelain --untracked-files=no | grep -q . && echo "+uncommitted changes"; } | paste -sd' ' > "$CARRY/COMMIT"
  # The working tree (~42 MB, the shipped model most of it) and what it carries must stay under
  # the device tool's 64 MiB: travel stripped and compressed with xz's largest dictionary, which
  # finds the binaries' shared code across files (session 35: 11.4 MB at -9e against 26.7 MB at
  # xz's default -6, which no longer fit beside the tree with every binary staged).
  strip --strip-unneeded "$CARRY"/ops_tests "$CARRY"/gpu_model_tests "$CARRY"/kernel_bench "$CARRY"/tandem
  [ -f "$CARRY/grammar_bench" ] && strip --strip-unneeded "$CARRY/grammar_bench"
  [ -f "$CARRY/gpu_dist_tests" ] && strip --strip-unneeded "$CARRY/gpu_dist_tests"
  [ -f "$CARRY/spec_depth_replay" ] && strip --strip-unneeded "$CARRY/spec_depth_replay"
  [ -f "$CARRY/engine_kernels" ] && strip --strip-unneeded "$CARRY/engine_kernels"
  tar -cf - -C "$(dirname "$CARRY")" "$(basename "$CARRY")" | xz -9e -T2 > "$CARRY.tar.xz"
  du -sh "$CARRY" "$CARRY.tar.xz"; ls "$CARRY" "$CARRY/lib"; cat "$CARRY/COMMIT"
  exit 0
fi
# Through the device tool only the archive travels (carry ["build-cuda/carry.tar.xz"]).
if [ ! -x "$CARRY/ops_tests" ] && [ -f "$CARRY.tar.xz" ]; then
  tar -xJf "$CARRY.tar.xz" -C "$(dirname "$CARRY")"
fi

BENCH_ARGS=""
[ "${1:-}" = "--quick" ] && BENCH_ARGS="--quick"
# Logs are written to a scratch folder and come back as one archive: the device tool returns
# at most 8 files from $OUT.
FINAL=${OUT:-$ROOT/gpu-suite-out}
OUTDIR=$(mktemp -d)
mkdir -p "$FINAL"
export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
export TANDEM_SOURCE_DIR="$ROOT"
cd "$ROOT"
COMMIT=$(cat "$CARRY/COMMIT" 2>/dev/null || echo unknown)
if ! nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv > "$OUTDIR/gpu.txt" 2>&1 ||
   [ "$(grep -c . "$OUTDIR/gpu.txt")" -lt 2 ]; then
  cat "$OUTDIR/gpu.txt"; cp "$OUTDIR/gpu.txt" "$FINAL/"
  echo "FAIL: no GPU visible (nvidia-smi); the GPU suite needs one" >&2
  exit 2
fi
cat "$OUTDIR/gpu.txt"
FAILURES=()

declare -A RC SECS
step() {  # step NAME TIMEOUT CMD...
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$OUTDIR/$name.log" 2>&1
  RC[$name]=$?
  SECS[$name]=$(( $(date +%s) - t0 ))
  echo "== $name: rc=${RC[$name]} (${SECS[$name]} s)"
  [ "${RC[$name]}" = 0 ] || FAILURES+=("$name: exit code ${RC[$name]}")
  # A GPU test that skips for want of a device has checked nothing.
  if grep -q "no CUDA device" "$OUTDIR/$name.log"; then
    RC[$name]=3
    FAILURES+=("$name: tests skipped with no CUDA device")
  fi
}
[ "${OPS:-1}" = "1" ] && step ops_tests "${OPS_TIMEOUT:-240}" "$CARRY/ops_tests" --gtest_color=no
[ "${MODEL:-1}" = "1" ] && step gpu_model_tests "${MODEL_TIMEOUT:-300}" "$CARRY/gpu_model_tests" --gtest_color=no
# NCCL at world 1, the one-shot all-reduce with two ranks on this one GPU, its latency table.
[ "${DIST:-1}" = "1" ] && [ -x "$CARRY/gpu_dist_tests" ] && step gpu_dist_tests "${DIST_TIMEOUT:-150}" "$CARRY/gpu_dist_tests" --gtest_color=no
[ "${KERNEL_BENCH:-1}" = "1" ] && step kernel_bench "${BENCH_TIMEOUT:-150}" "$CARRY/kernel_bench" $BENCH_ARGS
# Kernel by kernel (CUPTI timeline of one graph replay): a dense layer's decode step at 8k context,
# batch 1 and 32, deterministic mode (mla_decode's chain, the FP8-free batch-invariant path)
# against default mode, for issue #20 item 3's gap.
if [ "${TIMELINE:-1}" = "1" ]; then
  for L in ${TIMELINE_LAYERS:-dense moe}; do
    for B in ${TIMELINE_BATCHES:-1 32}; do
      # (dense keeps the names earlier results used.)
      N=$([ "$L" = dense ] && echo "" || echo "${L}_")
      step timeline_${N}det_b$B "${TIMELINE_TIMEOUT:-120}" "$CARRY/kernel_bench" --deterministic --timeline \
        --profile-step $L $B --profile-ctx 8192
      # The chain's values kernel on fewer value columns a block (more blocks a token; the same
      # bits, CudaOps.MlaDecodeChainGivesTheOneBlockBits).
      for VC in ${TIMELINE_VALUE_COLS-64}; do
        step timeline_${N}det_v${VC}_b$B "${TIMELINE_TIMEOUT:-120}" env TANDEM_MLA_CHAIN_VALUE_COLS=$VC \
          "$CARRY/kernel_bench" --deterministic --timeline --profile-step $L $B --profile-ctx 8192
      done
      step timeline_${N}default_b$B "${TIMELINE_TIMEOUT:-120}" "$CARRY/kernel_bench" --timeline \
        --profile-step $L $B --profile-ctx 8192
    done
  done
fi
# The shipped model's whole decode steps kernel by kernel, both kernel modes (engine_kernels,
# CUPTI): where deterministic mode's time goes on a launch-bound model (issue #20 item 3).
if [ "${ENGINE_KERNELS:-1}" = "1" ] && [ -x "$CARRY/engine_kernels" ]; then
  for S in ${ENGINE_KERNELS_STEPS:-0 3}; do
    step engine_kernels_s$S "${ENGINE_KERNELS_TIMEOUT:-120}" "$CARRY/engine_kernels" \
      --prompts tests/data/austen/heldout_prompts_64.json --num-prompts 64 --concurrency 1 \
      --speculative-num-steps $S --top 30
  done
fi
# Quantized weights (FP8 block, MXFP4): decode linears and a GLM-5.2 MoE layer against the copy
# bandwidth, FP8 prefill against cuBLASLt's per-tensor FP8 (allocates ~34 GB, so its own step).
[ "${QUANT_BENCH:-1}" = "1" ] && step quant_bench "${QUANT_BENCH_TIMEOUT:-200}" "$CARRY/kernel_bench" --quant-only --quick
# The grouped FP8 wgmma kernels with their old stage shape, one K block per stage and 64-row token
# boxes (the same bits; set_fp8_wgmma_shape; the default since session 31 is 4 and 16 rows): their
# columns against quant_bench's, same binary, minutes apart.
[ "${QUANT_SHAPE:-1}" = "1" ] && step quant_bench_kstage1 "${QUANT_BENCH_TIMEOUT:-200}" \
  env TANDEM_FP8_WGMMA_KSTAGE=1 TANDEM_FP8_WGMMA_SMALL_BOX=0 "$CARRY/kernel_bench" --quant-only --quick
# Baseline: transformers' own GlmMoeDsa modules at the same shapes, timed in this same run.
if [ "${HF_BASELINE:-1}" = "1" ]; then
  step hf_baseline "${HF_TIMEOUT:-150}" env PYTHONUNBUFFERED=1 python3 python/hf_baseline.py
fi
# MTP speculative decoding on the GPU through the engine: the shipped model (real acceptance;
# greedy outputs compared with plain decoding) and a real-shape GLM-5.2 slice with dummy weights
# and simulated acceptance.
if [ "${SPEC:-1}" = "1" ]; then
  PROMPTS="--prompts tests/data/austen/heldout_prompts_64.json --num-prompts 64"
  # identical MODE CONCURRENCY LOG: the MTP row of that concurrency says "outputs identical".
  identical() {
    grep -E "^$2 +MTP" "$OUTDIR/$3.log" | grep -q "outputs identical" || {
      echo "FAIL: $1: MTP output differs from plain decoding at concurrency $2"
      RC[$3]=1
      FAILURES+=("$1: MTP output differs from plain decoding at concurrency $2")
    }
  }
  # Default kernels (fastest; not batch-invariant): speed, and the divergence rate is reported.
  step spec_austen "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
    --concurrency 1,8,32
  # Deterministic mode: batch-invariant at every shape, so identical at every concurrency.
  step spec_austen_det "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
    --concurrency 1,8,32 --enable-deterministic-inference
  for c in 1 8 32; do identical deterministic $c spec_austen_det; done
  step spec_austen_eager "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
    --concurrency 1,32 --disable-cuda-graph --enable-deterministic-inference
  identical eager-deterministic 1 spec_austen_eager
  identical eager-deterministic 32 spec_austen_eager
  # Other draft lengths, deterministic: identical at concurrency 1 and 32.
  for S in ${SPEC_S_VARIANTS-1 2 5}; do
    step spec_austen_det_s$S "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
      --concurrency 1,32 --enable-deterministic-inference --speculative-num-steps $S
    identical deterministic-S$S 1 spec_austen_det_s$S
    identical deterministic-S$S 32 spec_austen_det_s$S
  done
  # Real GLM-5.2 shapes (dummy weights), prompts past index_topk (2048): MTP with real (near-zero)
  # acceptance on random weights must still reproduce plain greedy decoding exactly.
  step spec_glm52_det "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda --load-format dummy \
    --preset glm5.2 --num-layers 4 --num-prompts 8 --prompt-tokens 2100 --max-new-tokens 24 \
    --concurrency 1,8 --enable-deterministic-inference --max-total-tokens 65536 --workspace-mb 16384
  identical glm52-deterministic 1 spec_glm52_det
  identical glm52-deterministic 8 spec_glm52_det
  # Cost side on real shapes: simulated acceptance, per-phase round times (GLM52_BF16=0 skips
  # the two bf16 slices when a run needs the time for others).
  [ "${GLM52_BF16:-1}" = "1" ] && step spec_glm52 "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda --load-format dummy \
    --preset glm5.2 --num-layers 4 --num-prompts 64 --prompt-tokens 1024 --max-new-tokens 48 \
    --concurrency 1,8,32 --simulate-accept-length 2.4 --profile-spec-phases
  # Quantized weights and the FP8 KV cache on real shapes: MTP with FP8 weights and FP8 KV in
  # deterministic mode reproduces plain greedy decoding exactly; then the cost side with FP8 and
  # MXFP4 weights at 4 and 7 layers (the per-MoE-layer increment, as for bf16 below).
  step spec_glm52_fp8_det "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda --load-format dummy \
    --preset glm5.2 --quantization fp8 --kv-cache-dtype fp8_e4m3 --num-layers 4 --num-prompts 8 \
    --prompt-tokens 2100 --max-new-tokens 24 --concurrency 1,8 --enable-deterministic-inference \
    --max-total-tokens 65536 --workspace-mb 16384
  identical glm52-fp8-deterministic 1 spec_glm52_fp8_det
  identical glm52-fp8-deterministic 8 spec_glm52_fp8_det
  # The grouped FP8 wgmma kernels (by default in place of the cuBLASLt-per-expert host path, and
  # deterministic mode's FP8 linears and experts at every size, which the step above runs): the
  # configurations deterministic mode does not take by default must reproduce plain decoding too,
  # FP8 on the weight stream and the grouped decode kernels (switches 0) and MXFP4 W4A4 experts on
  # the grouped FP8 kernels (switches 1); then TTFT of a 10,000-token prompt with the grouped
  # kernels (-1, the default) and without (0).
  if [ "${GROUPED_FP8:-1}" = "1" ]; then
    for Q in fp8 mxfp4; do
      SW=$([ $Q = fp8 ] && echo 0 || echo 1)
      step spec_glm52_${Q}_grouped_det "${SPEC_TIMEOUT:-150}" env TANDEM_MOE_FP8_WGMMA=$SW \
        TANDEM_FP8_LINEAR_WGMMA=$SW "$CARRY/tandem" bench-offline --device cuda --load-format dummy \
        --preset glm5.2 --quantization $Q --kv-cache-dtype fp8_e4m3 --num-layers 4 --num-prompts 8 \
        --prompt-tokens 2100 --max-new-tokens 24 --concurrency 1,8 --enable-deterministic-inference \
        --max-total-tokens 65536 --workspace-mb 16384
      identical glm52-$Q-deterministic-switches$SW 1 spec_glm52_${Q}_grouped_det
      identical glm52-$Q-deterministic-switches$SW 8 spec_glm52_${Q}_grouped_det
      for M in 0 -1; do
        step ttft_glm52_${Q}_grouped${M} "${SPEC_TIMEOUT:-150}" env TANDEM_MOE_FP8_WGMMA=$M \
          "$CARRY/tandem" bench-offline --device cuda --load-format dummy --preset glm5.2 \
          --quantization $Q --num-layers 4 --num-prompts 3 --prompt-tokens 10000 --max-new-tokens 4 \
          --concurrency 1 --speculative-num-steps 0 --max-total-tokens 65536 --workspace-mb 24576 \
          --chunked-prefill-size 8192 --max-prefill-tokens 16384
      done
    done
  fi
  for Q in fp8 mxfp4; do
    for NL in 4 7; do
      step spec_glm52_${Q}_$NL "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda \
        --load-format dummy --preset glm5.2 --quantization $Q --num-layers $NL --num-prompts 16 \
        --prompt-tokens 1024 --max-new-tokens 48 --concurrency 1,8 --simulate-accept-length 2.4 \
        --profile-spec-phases
    done
  done
  # Three more MoE layers (7 = 3 dense + 4 MoE, ~100 GB): the per-MoE-layer increments of the
  # plain step and of each round phase, for extrapolating to the full 78-layer model.
  [ "${GLM52_BF16:-1}" = "1" ] && step spec_glm52_7 "${SPEC_TIMEOUT:-200}" "$CARRY/tandem" bench-offline --device cuda --load-format dummy \
    --preset glm5.2 --num-layers 7 --num-prompts 16 --prompt-tokens 1024 --max-new-tokens 48 \
    --concurrency 1,8 --simulate-accept-length 2.4 --profile-spec-phases
fi
# Adaptive speculation depth (issue #20): plain, fixed S = 3, 1, 2, 5 and adaptive (starting at
# 3, up to 5) on the same workload at concurrency 1, 8, 32, 64; bench-offline prints each
# adaptive row's depth histogram and its ratio to the best other row (goal: >= 0.98). On the
# shipped model with default kernels (speed) and with batch-invariant kernels (every MTP row,
# adaptive included, must reproduce plain greedy decoding), then on real-shape GLM-5.2 slices
# with simulated acceptance (ADAPT_ACCEPT, ADAPT_LAYERS). Each row of the shipped model's is the
# median of ADAPT_REPEAT interleaved runs (3: rows measured separately drift by up to 5% on the
# H200, more than the 2% the goal allows; ADAPT_GLM_REPEAT for the slices, 1). ADAPT_QUANT=fp8
# runs the slices with FP8 weights (a 7-layer bf16 slice, ~100 GB, does not fit an H100).
# bench-offline's adaptive rows first run one pass per depth with the depth pinned (graph
# warm-up, docs/runtime.md "CUDA graphs"): hence ADAPT_TIMEOUT 300 s a step (the 7-layer slice
# took 175 s without them on the H200).
if [ "${ADAPTIVE:-1}" = "1" ]; then
  APROMPTS="--prompts tests/data/austen/heldout_prompts_64.json --num-prompts 64"
  # all_identical NAME CONCURRENCY LOG: every MTP row of that concurrency says "outputs identical".
  all_identical() {
    local rows same
    rows=$(grep -cE "^$2 +MTP" "$OUTDIR/$3.log")
    same=$(grep -E "^$2 +MTP" "$OUTDIR/$3.log" | grep -c "outputs identical")
    if [ "$rows" = 0 ] || [ "$rows" != "$same" ]; then
      echo "FAIL: $1: $((rows - same)) of $rows MTP rows differ from plain decoding at concurrency $2"
      RC[$3]=1
      FAILURES+=("$1: MTP output differs from plain decoding at concurrency $2")
    fi
  }
  # Every adaptive step records what its policies were asked and shown (TANDEM_SPEC_DEPTH_TRACE,
  # NAME.trace) and, where the replay tool travelled, what the build's policy makes of it
  # (NAME.replay.txt: step times per class and depth, draft reads, estimates; docs/runtime.md).
  trace() { echo "TANDEM_SPEC_DEPTH_TRACE=$OUTDIR/$1.trace"; }
  if [ "${ADAPT_AUSTEN:-1}" = "1" ]; then
    step adapt_austen "${ADAPT_TIMEOUT:-300}" env "$(trace adapt_austen)" "$CARRY/tandem" bench-offline --device cuda $APROMPTS \
      --concurrency 1,8,32,64 --speculative-num-steps 3,1,2,5 --adaptive --repeat "${ADAPT_REPEAT:-3}"
    step adapt_austen_det "${ADAPT_TIMEOUT:-300}" env "$(trace adapt_austen_det)" "$CARRY/tandem" bench-offline --device cuda $APROMPTS \
      --concurrency 1,8,32,64 --speculative-num-steps 3,1,2,5 --adaptive --enable-deterministic-inference \
      --repeat "${ADAPT_REPEAT:-3}"
    for c in 1 8 32 64; do all_identical adaptive-deterministic $c adapt_austen_det; done
    # The same with answers of different lengths (--random-range-ratio: 24-96 new tokens), where
    # plainly decoded requests no longer finish together (docs/runtime.md, "What the step times
    # do not see"); ADAPT_RANGE="" skips it.
    for R in ${ADAPT_RANGE-0.25}; do
      step adapt_austen_range$R "${ADAPT_TIMEOUT:-300}" env "$(trace adapt_austen_range$R)" "$CARRY/tandem" \
        bench-offline --device cuda $APROMPTS --concurrency 1,8,32,64 --speculative-num-steps 3,1,2,5 \
        --adaptive --repeat "${ADAPT_REPEAT:-3}" --random-range-ratio $R
    done
  fi
  GPU_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
  for NL in ${ADAPT_LAYERS-4}; do
    # A bf16 slice of more than 4 layers (7: ~105 GB with the MTP layer's experts) runs out of an
    # H100's 80 GB: skip it there, said so, rather than report an out-of-memory failure.
    if [ "$NL" -gt 4 ] && [ -z "${ADAPT_QUANT:-}" ] && [ "${GPU_MIB:-0}" -lt 110000 ]; then
      echo "adapt_glm52_$NL: skipped, a bf16 $NL-layer slice needs ~105 GB (this GPU: ${GPU_MIB:-?} MiB); ADAPT_QUANT=fp8 fits"
      continue
    fi
    for A in ${ADAPT_ACCEPT-2.4}; do
      step adapt_glm52_${NL}_$A${ADAPT_QUANT:+_$ADAPT_QUANT} "${ADAPT_TIMEOUT:-300}" \
        env "$(trace adapt_glm52_${NL}_$A${ADAPT_QUANT:+_$ADAPT_QUANT})" "$CARRY/tandem" bench-offline --device cuda \
        --load-format dummy --preset glm5.2 ${ADAPT_QUANT:+--quantization $ADAPT_QUANT} --num-layers $NL --num-prompts 64 --prompt-tokens 512 \
        --max-new-tokens 32 --concurrency 1,8,32,64 --simulate-accept-length $A \
        --speculative-num-steps 3,1,2,5 --adaptive --repeat "${ADAPT_GLM_REPEAT:-1}"
    done
  done
  if [ -x "$CARRY/spec_depth_replay" ]; then
    for t in "$OUTDIR"/adapt_*.trace; do
      [ -f "$t" ] && "$CARRY/spec_depth_replay" "$t" > "${t%.trace}.replay.txt" 2>&1
    done
  fi
fi
# Structured outputs: every request constrained by a JSON schema (masks on the device, one
# captured forward per draft step), TPOT against the unconstrained rows of spec_austen (same
# prompts and lengths), MTP identical to plain in deterministic mode; then the grammar engine's
# per-token mask cost on a real ~150K vocabulary on this host's CPU.
if [ "${STRUCTURED:-1}" = "1" ]; then
  PROMPTS=${PROMPTS:-"--prompts tests/data/austen/heldout_prompts_64.json --num-prompts 64"}
  # The same run unconstrained (spec_austen's rows when SPEC=1 ran it; repeated here so that both
  # sides come from the same minutes of the same machine).
  step spec_austen_free "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
    --concurrency 1,8,32
  step spec_austen_json "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
    --concurrency 1,8,32 --json-schema bench/structured/chapters.json
  step spec_austen_json_det "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda $PROMPTS \
    --concurrency 1,32 --json-schema bench/structured/chapters.json --enable-deterministic-inference
  if grep -qE "^1 +MTP.*outputs identical" "$OUTDIR/spec_austen_json_det.log" &&
     grep -qE "^32 +MTP.*outputs identical" "$OUTDIR/spec_austen_json_det.log"; then :; else
    FAILURES+=("constrained MTP output differs from constrained plain decoding (deterministic)")
  fi
  [ -x "$CARRY/grammar_bench" ] && step grammar_bench "${GRAMMAR_TIMEOUT:-120}" "$CARRY/grammar_bench" "$CARRY/qwen3_tokenizer.json"
fi
# The draft vocabulary (--speculative-token-map, issue #20 item 2): what a 32,768-token draft head
# saves on the 4-layer GLM-5.2 slice (V = 154,880; simulated acceptance, so the map's ids are
# simply the first 32,768), against the full head in the same run; then the default model with
# the DRAFT_MAP its training corpus gives (tandem make-token-map), outputs identical to plain.
if [ "${DRAFT_VOCAB:-1}" = "1" ]; then
  python3 -c "import json; print(json.dumps(list(range(32768))))" > "$OUTDIR/first32k.json"
  for MAP in "" "--speculative-token-map $OUTDIR/first32k.json"; do
    step "draft_vocab_glm52${MAP:+_32k}" "${ADAPT_TIMEOUT:-300}" "$CARRY/tandem" bench-offline --device cuda \
      --load-format dummy --preset glm5.2 --num-layers 4 --num-prompts 64 --prompt-tokens 512 \
      --max-new-tokens 32 --concurrency 1,8,32,64 --simulate-accept-length 2.4 \
      --speculative-num-steps 3 $MAP
  done
  if [ -n "${DRAFT_MAP:-}" ]; then
    step draft_vocab_austen "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda \
      --prompts tests/data/austen/heldout_prompts_64.json --num-prompts 64 --concurrency 1,8,32 \
      --speculative-num-steps 3 --speculative-token-map "$DRAFT_MAP"
  fi
fi
# Mixed prefill and decode steps (--enable-mixed-chunk, issue #19): the default model, plain
# decoding, 512-token prompts arriving as earlier requests finish; TPOT and tok/s with and
# without (MIXED_CHUNK=1 to run it; measured on the CPU backend so far, docs/benchmarks.md).
if [ "${MIXED_CHUNK:-0}" = "1" ]; then
  for MIX in "" "--enable-mixed-chunk"; do
    step "mixed_chunk${MIX:+_on}" "${SPEC_TIMEOUT:-150}" "$CARRY/tandem" bench-offline --device cuda \
      --prompts tests/data/austen/heldout_prompts_64.json --num-prompts 64 --prompt-tokens 512 \
      --max-new-tokens 64 --concurrency 8,32 --speculative-num-steps 0 $MIX
  done
fi
# Long-prompt TTFT (issue #19): 10,000-token prompts, one at a time, plain decoding, on the
# 4- and 7-layer GLM-5.2 slices (dummy bf16 weights; 7 - 4 = three MoE layers, the increment
# that extrapolates to 78 layers), with the default prefill chunks (512 per request, 2048 per
# step) and with large ones (8192 per request, 16384 per step). PREFILL_TTFT=1 to run it.
# TTFT_CHUNKS: "CHUNK BUDGET" pairs separated by commas ("512 512": a lone prompt's chunks as
# they were before a prompt alone could take the whole budget).
if [ "${PREFILL_TTFT:-0}" = "1" ]; then
  IFS=, read -r -a TTFT_CHUNKS <<< "${TTFT_CHUNKS:-512 2048,8192 16384}"
  for NL in ${TTFT_LAYERS:-4 7}; do
    for CH in "${TTFT_CHUNKS[@]}"; do
      read -r CHUNK BUDGET <<< "$CH"
      step "ttft_${NL}l_${CHUNK}_$BUDGET" "${SPEC_TIMEOUT:-200}" "$CARRY/tandem" bench-offline --device cuda \
        --load-format dummy --preset glm5.2 --num-layers $NL --num-prompts 3 --prompt-tokens 10000 \
        --max-new-tokens 4 --concurrency 1 --speculative-num-steps 0 --max-total-tokens 65536 \
        --workspace-mb 24576 --chunked-prefill-size $CHUNK --max-prefill-tokens $BUDGET
    done
  done
fi
# The HTTP/SSE path against the engine in-process (issue #21: at least 95% at every
# concurrency): `tandem bench` through a real server and `bench-offline` on the same workload,
# with CPU time per thread group (scripts/http_bench.py).
if [ "${HTTP_BENCH:-1}" = "1" ]; then
  step http_bench "${HTTP_TIMEOUT:-300}" python3 scripts/http_bench.py --tandem "$CARRY/tandem" --device cuda
fi
# compute-sanitizer over the small op cases: out-of-bounds / misaligned accesses, then
# shared-memory races in the attention, indexer, MoE and FP8 weight-stream kernels.
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$SAN" ] && [ "${SANITIZE:-1}" = "1" ]; then
  step memcheck "${MEMCHECK_TIMEOUT:-180}" env TANDEM_OPS_SMALL=1 "$SAN" --tool memcheck --error-exitcode 9 "$CARRY/ops_tests" --gtest_color=no
  step racecheck "${RACECHECK_TIMEOUT:-90}" env TANDEM_OPS_SMALL=1 "$SAN" --tool racecheck --error-exitcode 9 "$CARRY/ops_tests" --gtest_color=no --gtest_filter='CudaOps.Mla*:CudaOps.Indexer*:CudaOps.Moe*:CudaQuant.Fp8*:CudaQuantBackend.Fp8MoeWgmma*:CudaQuantBackend.Mxfp4W4A4*'
fi

ADAPT_STEPS=$(cd "$OUTDIR" && ls adapt_*.log 2>/dev/null | sed 's/\.log$//' | tr '\n' ' ')
{
  echo
  echo "==================== GPU SUITE SUMMARY ===================="
  head -1 "$OUTDIR/gpu.txt" >/dev/null; sed -n 2p "$OUTDIR/gpu.txt"
  for n in ops_tests gpu_model_tests gpu_dist_tests kernel_bench quant_bench hf_baseline spec_austen spec_austen_det spec_austen_det_s1 spec_austen_det_s2 spec_austen_det_s5 spec_austen_eager spec_glm52_det spec_glm52 spec_glm52_7 spec_glm52_fp8_det spec_glm52_fp8_grouped_det spec_glm52_mxfp4_grouped_det spec_glm52_fp8_4 spec_glm52_fp8_7 spec_glm52_mxfp4_4 spec_glm52_mxfp4_7 spec_austen_free spec_austen_json spec_austen_json_det $ADAPT_STEPS http_bench grammar_bench memcheck racecheck; do
    [ -f "$OUTDIR/$n.log" ] || continue
    printf "%-16s rc=%-4s %4ss  " "$n" "${RC[$n]}" "${SECS[$n]}"
    grep -E "^\[  (PASSED|FAILED)  \]|ERROR SUMMARY|RACECHECK SUMMARY" "$OUTDIR/$n.log" | head -3 | tr '\n' ' '
    echo
  done
  grep -E "^\[  FAILED  \] [A-Za-z]" "$OUTDIR/ops_tests.log" "$OUTDIR/gpu_model_tests.log" | sort -u | head -20
  echo
  sed -n '/^OPS SUMMARY/,/^(ids rows/p' "$OUTDIR/ops_tests.log"
  grep -h "indexer_topk (.*rows exact" "$OUTDIR/ops_tests.log"
  sed -n '/^SAMPLE SUMMARY/,/^$/p' "$OUTDIR/ops_tests.log"
  echo
  grep -h -E "^GPU_MODEL|^GPU_GRAPHS|^GPU_QUANT_MODEL|GPU FP8 cache" "$OUTDIR/gpu_model_tests.log"
  [ -f "$OUTDIR/gpu_dist_tests.log" ] && { echo; grep -h "^LATENCY" "$OUTDIR/gpu_dist_tests.log"; }
  echo
  grep -h -E "^ceilings" "$OUTDIR/kernel_bench.log"
  sed -n '/^SUMMARY/,$p' "$OUTDIR/kernel_bench.log"
  sed -n '/^DECODE ATTENTION, bf16 vs FP8/,/^$/p' "$OUTDIR/kernel_bench.log"
  [ -f "$OUTDIR/quant_bench.log" ] && { echo; grep -v "^\[" "$OUTDIR/quant_bench.log"; }
  [ -f "$OUTDIR/quant_bench_kstage1.log" ] && { echo; echo "-- quant_bench, TANDEM_FP8_WGMMA_KSTAGE=1 TANDEM_FP8_WGMMA_SMALL_BOX=0 (the old stage shape)"; grep -v "^\[" "$OUTDIR/quant_bench_kstage1.log"; }
  [ -f "$OUTDIR/hf_baseline.log" ] && { echo; echo "-- hf_baseline (transformers, same GPU, same run)"; cat "$OUTDIR/hf_baseline.log"; }
  for n in spec_austen spec_austen_det spec_austen_det_s1 spec_austen_det_s2 spec_austen_det_s5 spec_austen_eager spec_glm52_det spec_glm52 spec_glm52_7 spec_glm52_fp8_det spec_glm52_fp8_grouped_det spec_glm52_mxfp4_grouped_det spec_glm52_fp8_4 spec_glm52_fp8_7 spec_glm52_mxfp4_4 spec_glm52_mxfp4_7 spec_austen_free spec_austen_json spec_austen_json_det mixed_chunk mixed_chunk_on $(cd "$OUTDIR" && ls ttft_*.log 2>/dev/null | sed 's/\.log$//' | tr '\n' ' ') grammar_bench; do [ -f "$OUTDIR/$n.log" ] && { echo; echo "-- $n"; grep -v "^\[" "$OUTDIR/$n.log" | tail -14; }; done
  for n in $(cd "$OUTDIR" && ls engine_kernels_*.log 2>/dev/null | sed 's/\.log$//' | tr '\n' ' '); do
    echo; echo "-- $n"; grep -v "^\[" "$OUTDIR/$n.log" | head -40
  done
  for n in $(cd "$OUTDIR" && ls timeline_*.log 2>/dev/null | sed 's/\.log$//' | tr '\n' ' '); do
    [ -f "$OUTDIR/$n.log" ] && { echo; echo "-- $n"; grep -v "^\[" "$OUTDIR/$n.log" | head -80; }
  done
  for n in $ADAPT_STEPS; do
    echo; echo "-- $n"; grep -v "^\[" "$OUTDIR/$n.log" | tail -40
    # The adaptive engines' sections of the replay (the pinned ones only list their step times).
    [ -f "$OUTDIR/$n.replay.txt" ] && awk '/^== engine/ {p = /adaptive/} p' "$OUTDIR/$n.replay.txt"
  done
  [ -f "$OUTDIR/http_bench.log" ] && { echo; echo "-- http_bench"; sed -n '/^HTTP vs in-process/,$p' "$OUTDIR/http_bench.log"; }
  grep -h -E "error|Error|what\(\)" "$OUTDIR"/*.log | head -10
  echo
  if [ ${#FAILURES[@]} -eq 0 ]; then
    echo "GPU SUITE: PASSED (commit $COMMIT)"
  else
    echo "GPU SUITE: FAILED (commit $COMMIT)"
    printf '  %s\n' "${FAILURES[@]}"
  fi
} > "$OUTDIR/summary.txt"
# The results file: the summary, headed by what ran where.
STAMP=$(date -u +%Y-%m-%d)_$(echo "$COMMIT" | cut -d' ' -f1)
RESULTS=${RESULTS_DIR:-$ROOT/docs/results}/gpu_suite_$STAMP.txt
mkdir -p "$(dirname "$RESULTS")"
{
  echo "# scripts/gpu_suite.sh $*, commit $COMMIT, $(date -u '+%Y-%m-%d %H:%M UTC')"
  cat "$OUTDIR/summary.txt"
  # The full benchmark and engine logs, so every table docs/ quotes is in this file.
  for n in kernel_bench quant_bench hf_baseline spec_austen spec_austen_det spec_austen_det_s1 spec_austen_det_s2 spec_austen_det_s5 spec_austen_eager spec_glm52_det spec_glm52 spec_glm52_7 spec_glm52_fp8_det spec_glm52_fp8_4 spec_glm52_fp8_7 spec_glm52_mxfp4_4 spec_glm52_mxfp4_7 spec_austen_free spec_austen_json spec_austen_json_det $ADAPT_STEPS grammar_bench; do
    [ -f "$OUTDIR/$n.log" ] || continue
    echo; echo "==================== $n.log ===================="
    grep -v "^\[" "$OUTDIR/$n.log"
  done
} > "$RESULTS"
cp "$RESULTS" "$OUTDIR/summary.txt" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/logs.tgz" -C "$OUTDIR" .
cat "$OUTDIR/summary.txt"
[ ${#FAILURES[@]} -eq 0 ]
