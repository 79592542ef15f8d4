#!/usr/bin/env bash
# Tensor and expert parallelism on a multi-GPU machine (issues #16: nvidia-h200-x2, #17: x8), from
# the binaries `scripts/gpu_suite.sh --stage` packs (build-cuda/carry.tar.xz, carried by the
# device call). One call does everything and prints a short table:
#   1. GPU tiers that take several GPUs: gpu_dist_tests (NCCL and the one-shot all-reduce);
#   2. correctness on the shipped model: `tandem serve` on 1 GPU and on all of them (TP, TP+EP),
#      plain and MTP, in deterministic mode; greedy outputs of 16 held-out prompts compared;
#   3. speed on real GLM-5.2 shapes (a slice of NUM_LAYERS layers, dummy FP8 weights): the serving
#      benchmark at concurrency 1, 8, 32 on 1 GPU and split over all of them.
# Usage (device call, kind nvidia-h200-x2 or -x8):
#   tar xJf build-cuda/carry.tar.xz -C build-cuda && OUT=$OUT scripts/multi_gpu.sh
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=${CARRY:-$ROOT/build-cuda/carry}
OUT=${OUT:-$ROOT/multi-gpu-out}
NUM_LAYERS=${NUM_LAYERS:-4}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$CARRY/lib:${LD_LIBRARY_PATH:-}"
export TANDEM_SOURCE_DIR="$ROOT"
T=${TANDEM:-$CARRY/tandem}
# DEVICE=cpu GPUS=2 SPEED=0 runs part 2 on the CPU (a smoke test of this script without GPUs).
DEVICE=${DEVICE:-cuda}
N=${GPUS:-$(nvidia-smi -L | wc -l)}
echo "GPUs: $N"
[ "$DEVICE" = cuda ] && nvidia-smi topo -m | tee "$OUT/topo.txt" | head -"$((N + 2))"
[ "$N" -ge 2 ] || { echo "FAIL: this script needs at least 2 GPUs"; exit 2; }
FAIL=()

# 1. The collectives' own tests (NCCL over real peers where the test sees several GPUs).
if [ "$DEVICE" = cuda ] && [ -x "$CARRY/gpu_dist_tests" ]; then
  timeout 300 "$CARRY/gpu_dist_tests" --gtest_color=no > "$OUT/gpu_dist_tests.log" 2>&1 ||
    FAIL+=("gpu_dist_tests")
  grep -E "^LATENCY|PASSED|FAILED" "$OUT/gpu_dist_tests.log"
fi

# serve NAME ARGS...: starts `tandem serve`, waits until healthy; sets PID and URL.
serve() {
  local name=$1
  shift
  "$T" serve --host 127.0.0.1 --port 0 --device "$DEVICE" "$@" > "$OUT/$name.log" 2>&1 &
  PID=$!
  local port=""
  for _ in $(seq 1 6000); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$OUT/$name.log" | head -1 | grep -o '[0-9]*$')
    [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
    kill -0 "$PID" 2> /dev/null || break
    sleep 0.1
  done
  URL="http://127.0.0.1:$port"
  curl -sf "$URL/health" > /dev/null || { echo "FAIL: $name did not start"; tail -5 "$OUT/$name.log"; FAIL+=("$name start"); return 1; }
}
stop() { kill -TERM "$PID"; wait "$PID"; }

# Greedy outputs of the held-out prompts through /generate (one batch request).
generate() {
  python3 - "$URL" "$ROOT/tests/data/austen/heldout_prompt_ids.json" "$1" << 'PY'
import json, sys, urllib.request
url, prompts, out = sys.argv[1:]
ids = json.load(open(prompts))
body = json.dumps({"input_ids": ids, "sampling_params": {"max_new_tokens": 64, "temperature": 0,
                   "ignore_eos": True}}).encode()
req = urllib.request.Request(url + "/generate", body, {"Content-Type": "application/json"})
res = json.load(urllib.request.urlopen(req, timeout=600))
json.dump([r["output_ids"] for r in res], open(out, "w"))
PY
}
same() {  # same A B: how many of the 16 outputs are identical
  python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); print(sum(x==y for x,y in zip(a,b)), 'of', len(a))" "$1" "$2"
}

# 2. Correctness: one GPU, then all of them; deterministic mode, so plain and MTP must agree
# exactly on the same split. Across splits the bf16 all-reduce changes rounding, so outputs may
# part at a near-tie: the count is reported, not required.
DET="--enable-deterministic-inference"
MTP="--speculative-algorithm EAGLE --speculative-num-steps 3"
echo; echo "--- correctness (shipped model, 16 prompts x 64 tokens, greedy, deterministic)"
for split in "1 1" "$N 1" "$N $N"; do
  set -- $split
  tag="tp$1_ep$2"
  serve "$tag" --tp-size "$1" --ep-size "$2" $DET && { generate "$OUT/$tag.plain.json"; stop; }
  serve "$tag.mtp" --tp-size "$1" --ep-size "$2" $DET $MTP && { generate "$OUT/$tag.mtp.json"; stop; }
  s=$(same "$OUT/$tag.plain.json" "$OUT/$tag.mtp.json")
  echo "$tag: MTP identical to plain: $s"
  [[ $s == "16 of 16" ]] || FAIL+=("$tag: MTP differs from plain ($s)")
  [ "$tag" != tp1_ep1 ] && echo "$tag: identical to tp1: $(same "$OUT/tp1_ep1.plain.json" "$OUT/$tag.plain.json")"
done

# 3. Speed on GLM-5.2 shapes: a slice with dummy FP8 weights (config only on disk).
[ "${SPEED:-1}" = 1 ] || { echo; [ ${#FAIL[@]} -eq 0 ] && echo "MULTI-GPU: all checks passed"; exit ${#FAIL[@]}; }
echo; echo "--- speed: GLM-5.2, $NUM_LAYERS layers, dummy FP8 weights, random 1024-token prompts, 128 out"
M="$OUT/glm52_slice"
"$T" make-checkpoint --preset glm5.2 --num-layers "$NUM_LAYERS" --quant fp8 --config-only \
  --with-tokenizer --out "$M" > /dev/null 2>&1
for split in "1 1" "$N 1" "$N $N"; do
  set -- $split
  tag="glm52_tp$1_ep$2"
  serve "$tag" --model-path "$M" --load-format dummy --tp-size "$1" --ep-size "$2" \
    --max-total-tokens 262144 --max-running-requests 64 || continue
  for c in 1 8 32; do
    "$T" bench --base-url "$URL" --backend sglang --dataset-name random-ids --random-input-len 1024 \
      --random-output-len 128 --num-prompts $((c * 4)) --max-concurrency "$c" \
      --output-file "$OUT/$tag.jsonl" > "$OUT/$tag.c$c.txt" 2>&1 || FAIL+=("$tag c=$c bench")
    printf "%-18s c=%-3s %s\n" "$tag" "$c" "$(grep -E 'Output token throughput|Median TPOT|Median TTFT' "$OUT/$tag.c$c.txt" | tr -s ' ' | paste -sd ';')"
  done
  stop
done

echo
if [ ${#FAIL[@]} -gt 0 ]; then
  printf 'MULTI-GPU: FAILED\n'; printf '  %s\n' "${FAIL[@]}"; exit 1
fi
echo "MULTI-GPU: all checks passed"
