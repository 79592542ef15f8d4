#!/usr/bin/env bash
# End-to-end tests of `tandem serve` on the built-in default model (CPU): starts the real server
# on a free port with SGLang-style launch flags, then drives it with curl (every route, bad
# requests, SSE framing, client disconnects) and the official OpenAI Node client
# (openai_client.mjs), checks that no KV pages leaked and that the server is still up, runs
# a second server with MTP speculative decoding, whose web page it drives in headless Chromium
# (web_page.mjs; the screenshot goes to e2e-artifacts/web_page.png beside the binary), and
# servers under hostile connections (connections.mjs: idle and slow clients, the connection
# limit). Exits non-zero if anything failed.
#
# Usage (from the repository root): tests/e2e/run.sh [path/to/tandem]   (default: build/tandem)
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
e2e="$root/tests/e2e"
bin=${1:-build/tandem}
[[ $bin == /* ]] || bin="$PWD/$bin"
if [[ ! -x $bin ]]; then
  echo "tandem binary not found: $bin" >&2
  exit 2
fi
for tool in curl node npm; do
  command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 2; }
done
export CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
[[ -x $CHROMIUM ]] || { echo "chromium is required for the web page checks (scripts/setup.sh installs it)" >&2; exit 2; }
artifacts="$(dirname "$bin")/e2e-artifacts"
mkdir -p "$artifacts"

work=$(mktemp -d)
pid=""
failures=0
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

pass() { echo "ok   $*"; }
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# --- the npm packages: the OpenAI client, ajv, puppeteer-core ---------------------------------
# Installed (npm ci, from package-lock.json) unless every pinned version is already there.
stale=$(node -e '
  const dir = process.argv[1];
  const deps = require(dir + "/package.json").dependencies;
  const have = (n) => { try { return require(dir + "/node_modules/" + n + "/package.json").version; } catch { return ""; } };
  console.log(Object.entries(deps).filter(([n, v]) => have(n) !== v).map(([n, v]) => n + "@" + v).join(" "));
' "$e2e")
if [[ -n $stale ]]; then
  echo "installing $stale into tests/e2e/node_modules"
  (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error) || { echo "npm ci failed" >&2; exit 2; }
fi

# --- helpers ----------------------------------------------------------------------------------
# start_server NAME ARGS...: starts `tandem serve --port 0 ARGS`, waits for /health; sets pid, url.
start_server() {
  local name=$1
  shift
  log="$work/$name.log"
  "$bin" serve --host 127.0.0.1 --port 0 "$@" >"$log" 2>&1 &
  pid=$!
  local port=""
  for _ in $(seq 1 600); do
    port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$log" | head -1 | grep -o '[0-9]*$')
    [[ -n $port ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $port ]]; then
    echo "server $name did not start:"
    cat "$log"
    exit 1
  fi
  url="http://127.0.0.1:$port"
  for _ in $(seq 1 3000); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/health") != 200 ]]; then
    echo "server $name never became healthy:"
    cat "$log"
    exit 1
  fi
  echo "server $name: $url (pid $pid)"
}

# stop_server: SIGTERM, which must end the process cleanly within 30 s.
stop_server() {
  kill -TERM "$pid"
  local code=""
  for _ in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then
      wait "$pid"
      code=$?
      break
    fi
    sleep 0.1
  done
  if [[ $code == 0 ]]; then
    pass "SIGTERM shuts the server down cleanly"
  else
    fail "server did not exit cleanly on SIGTERM (exit '${code:-still running}')"
    kill -KILL "$pid" 2>/dev/null
  fi
  pid=""
}

# req METHOD PATH [BODY]: sets $status; the body is in $work/body, headers in $work/headers.
req() {
  local args=(-s --max-time 120 -o "$work/body" -D "$work/headers" -w '%{http_code}' -X "$1")
  [[ $# -ge 3 ]] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
  status=$(curl "${args[@]}" "$url$2")
}

# js EXPR: evaluates EXPR with j = the last response body parsed as JSON; prints the result.
js() {
  node -e 'const j = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
           process.stdout.write(String(eval(process.argv[2])))' "$work/body" "$1" 2>/dev/null
}

# expect DESCRIPTION STATUS [JS-CONDITION]: checks the last response.
expect() {
  local what=$1 want=$2 cond=${3:-}
  if [[ $status != "$want" ]]; then
    fail "$what: HTTP $status, expected $want: $(head -c 300 "$work/body")"
  elif [[ -n $cond && $(js "$cond") != true ]]; then
    fail "$what: condition '$cond' false for $(head -c 300 "$work/body")"
  else
    pass "$what"
  fi
}

# An OpenAI-style error object, with the offending field when given.
is_error() {
  local code=$1 param=${2:-}
  local c="j.object === 'error' && j.error.code === $code && typeof j.error.message === 'string' && j.error.message.length > 0"
  [[ -n $param ]] && c="$c && j.error.param === '$param' && j.error.type === 'BadRequestError'"
  echo "$c"
}

info() { # prints internal_states[0][FIELD]
  curl -s --max-time 10 "$url/get_server_info" >"$work/info" &&
    node -p "JSON.parse(require('fs').readFileSync('$work/info', 'utf8')).internal_states[0].$1"
}

wait_idle() {
  for _ in $(seq 1 100); do
    [[ $(info num_running_reqs) == 0 && $(info num_queue_reqs) == 0 ]] && return 0
    sleep 0.1
  done
  return 1
}

# --- start-up errors --------------------------------------------------------------------------
check_startup_error() {
  local what=$1 needle=$2
  shift 2
  local out code
  out=$(timeout 60 "$bin" serve --port 0 "$@" 2>&1)
  code=$?
  if [[ $code != 0 && $out == *"$needle"* ]]; then
    pass "start-up error: $what"
  else
    fail "start-up error: $what (exit $code): $out"
  fi
}
check_startup_error "--speculative-eagle-topk 4" "--speculative-eagle-topk" \
  --speculative-algorithm EAGLE --speculative-eagle-topk 4
check_startup_error "--tp-size 8 with 4 attention heads" "num_attention_heads" --tp-size 8
check_startup_error "--ep-size not dividing --tp-size" "--ep-size" --tp-size 4 --ep-size 3
check_startup_error "a node that cannot reach node 0" "could not reach rank 0 at 127.0.0.1:9" \
  --tp-size 2 --nnodes 2 --node-rank 1 --dist-init-addr 127.0.0.1:9 --dist-timeout 2
check_startup_error "node 0 whose other node never joins" "did not join within 2 s" \
  --tp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr 127.0.0.1:0 --dist-timeout 2
check_startup_error "missing model" "config.json" --model-path "$work/nowhere"

# --- the other commands -----------------------------------------------------------------------
out=$("$bin" --version 2>&1)
[[ $out =~ ^tandem\ [0-9]+\.[0-9]+\.[0-9]+\ \(commit\  ]] && pass "tandem --version: $out" ||
  fail "tandem --version: $out"
out=$("$bin" serve --help 2>&1)
[[ $out == *"SGLang-compatible:"*"--tp-size"*"Tandem's own:"*"--max-queued-requests"* &&
  $out == *"Tandem's own:"*"--disable-web-page"* && $out != *"--dist-local-rank"* ]] && pass "serve --help groups SGLang's flags apart from Tandem's" ||
  fail "serve --help groups: $(echo "$out" | grep -E '^[A-Z]')"
# Greedy speculation reproduces plain decoding, and says how many tokens a round committed.
gen() { timeout 120 "$bin" generate --prompt "Emma Woodhouse, handsome, clever, and rich," \
  --max-new-tokens 24 --ignore-eos --enable-deterministic-inference "$@" 2>/dev/null; }
plain=$(gen)
spec=$(gen --speculative-algorithm EAGLE --speculative-num-steps 3)
if [[ -n $plain && $(head -1 <<<"$spec") == "$plain" && $spec == *$'\n'"accept length: "* ]]; then
  pass "generate --speculative-algorithm EAGLE: plain text, then $(tail -1 <<<"$spec")"
else
  fail "generate with and without speculation: '$plain' vs '$spec'"
fi
# A Hub id found through the Hugging Face cache (the snapshot is the shipped model).
snap="$work/hub/models--tandem--austen/snapshots/0123456789abcdef0123456789abcdef01234567"
mkdir -p "$work/hub/models--tandem--austen/refs" "$(dirname "$snap")"
printf %s "$(basename "$snap")" >"$work/hub/models--tandem--austen/refs/main"
ln -s "$root/models/tandem-austen" "$snap"
[[ $(HF_HUB_CACHE=$work/hub gen --model-path tandem/austen) == "$plain" ]] &&
  pass "generate --model-path tandem/austen from HF_HUB_CACHE" ||
  fail "generate --model-path tandem/austen from HF_HUB_CACHE"
HF_HUB_CACHE=$work/hub check_startup_error "a Hub id missing from the cache" \
  "hf download tandem/missing" --model-path tandem/missing

# --- installed -------------------------------------------------------------------------------
# `cmake --install` into a prefix, moved elsewhere: the binary finds its default model and the
# benchmark's prompt text beside itself (share/tandem), not in the source tree.
build_dir=$(dirname "$bin")
if [[ -f $build_dir/cmake_install.cmake ]]; then
  if cmake --install "$build_dir" --prefix "$work/prefix0" >"$work/install.log" 2>&1 &&
    mv "$work/prefix0" "$work/moved-prefix"; then
    out=$("$work/moved-prefix/bin/tandem" generate --prompt "It is a truth" --max-new-tokens 4 2>&1)
    if [[ $? == 0 && $out == *"model: $work/moved-prefix/share/tandem/models/tandem-austen"* ]]; then
      pass "an installed, moved tandem runs its default model from share/tandem"
    else
      fail "installed tandem: $out"
    fi
    [[ -f $work/moved-prefix/share/tandem/bench/prompts.txt ]] && pass "the bench prompts are installed" ||
      fail "share/tandem/bench/prompts.txt missing after install"
  else
    fail "cmake --install failed: $(tail -3 "$work/install.log")"
  fi
fi

# bench-offline's chart: an SVG with both runs drawn.
if timeout 300 "$bin" bench-offline --num-prompts 2 --max-new-tokens 8 --concurrency 1,2 \
  --svg "$work/bench.svg" >"$work/bench-offline.log" 2>&1 &&
  grep -q "</svg>" "$work/bench.svg" && [[ $(grep -c "<polyline" "$work/bench.svg") == 4 ]]; then
  pass "bench-offline --svg writes the chart"
else
  fail "bench-offline --svg: $(tail -3 "$work/bench-offline.log")"
fi

# bench-offline --repeat: every row run twice, interleaved; MTP's repetitions both identical to
# plain decoding (the CPU backend is batch-invariant).
if timeout 300 "$bin" bench-offline --num-prompts 2 --max-new-tokens 8 --concurrency 2 \
  --speculative-num-steps 2 --repeat 2 >"$work/bench-repeat.log" 2>&1 &&
  grep -q "the median of 2 interleaved runs" "$work/bench-repeat.log" &&
  grep -qE "^2 +MTP S=2 .*outputs identical" "$work/bench-repeat.log"; then
  pass "bench-offline --repeat 2 reports each row's median run"
else
  fail "bench-offline --repeat: $(tail -3 "$work/bench-repeat.log")"
fi

# bench-offline --random-range-ratio: requests of different lengths (drawn once, 4-16 new
# tokens here: 59 in all for these 6, seed 1), MTP still identical to plain decoding; a ratio
# outside [0, 1] is refused.
if timeout 300 "$bin" bench-offline --num-prompts 6 --max-new-tokens 16 --concurrency 2 \
  --speculative-num-steps 2 --random-range-ratio 0.25 >"$work/bench-range.log" 2>&1 &&
  grep -q "6 prompts, 4-16 new tokens (59 in all; --random-range-ratio 0.25)" "$work/bench-range.log" &&
  grep -qE "^2 +MTP S=2 .*outputs identical" "$work/bench-range.log" &&
  ! "$bin" bench-offline --num-prompts 1 --max-new-tokens 4 --speculative-num-steps 0 \
    --random-range-ratio 1.5 >"$work/bench-range-bad.log" 2>&1 &&
  grep -q "must be in \[0, 1\]" "$work/bench-range-bad.log"; then
  pass "bench-offline --random-range-ratio draws each request's lengths"
else
  fail "bench-offline --random-range-ratio: $(tail -3 "$work/bench-range.log")"
fi

# bench-offline --adaptive: before its untimed pass the adaptive engine runs one pass per depth
# with the depth pinned (so that its timed pass meets no CUDA graph it has not captured), and
# the policy is shown those steps as calibration: the trace marks them `p`, one or more at every
# depth, and settles (`s`) once before its first choice.
if TANDEM_SPEC_DEPTH_TRACE="$work/adaptive.trace" timeout 300 "$bin" bench-offline --num-prompts 6 \
  --max-new-tokens 16 --concurrency 2 --speculative-num-steps 2 --adaptive \
  --random-range-ratio 0.25 >"$work/bench-adaptive.log" 2>&1 &&
  grep -qE "^2 +MTP adapt .*outputs identical" "$work/bench-adaptive.log" &&
  [[ $(awk '$1 == "p" { print $2 }' "$work/adaptive.trace" | sort -u | tr -d '\n') == 012345 ]] &&
  [[ $(grep -c '^s$' "$work/adaptive.trace") == 1 ]]; then
  pass "bench-offline --adaptive warms every depth's graphs and calibrates the policy"
else
  fail "bench-offline --adaptive warm-up: $(tail -3 "$work/bench-adaptive.log")"
fi

# bench-offline --adaptive-variants: several adaptive rows side by side, each identical to plain
# decoding; the trace's engine lines record batch fill, relaxation and the catch-up weight (cuX);
# pinN holds the depth; an unknown variant is refused.
if TANDEM_SPEC_DEPTH_TRACE="$work/variants.trace" timeout 300 "$bin" bench-offline --num-prompts 4 \
  --max-new-tokens 12 --concurrency 2 --speculative-num-steps 2 \
  --adaptive-variants base,fill+relax,pin1,cu0.05 >"$work/bench-variants.log" 2>&1 &&
  grep -qE "^2 +MTP adapt .*outputs identical" "$work/bench-variants.log" &&
  grep -qE "^2 +MTP adapt\+fr .*outputs identical" "$work/bench-variants.log" &&
  grep -qE "^2 +MTP pin1 .*outputs identical" "$work/bench-variants.log" &&
  grep -qE "^2 +MTP adapt cu0.05 .*outputs identical" "$work/bench-variants.log" &&
  grep -A1 -E "^2 +MTP pin1 " "$work/bench-variants.log" | grep -q "depths 1:100% " &&
  grep -q "^e 5 2 1 1 1 0.01$" "$work/variants.trace" &&
  grep -q "^e 5 2 1 0 1 0.05$" "$work/variants.trace" &&
  ! "$bin" bench-offline --num-prompts 1 --max-new-tokens 4 --speculative-num-steps 1 \
    --adaptive-variants base,turbo >"$work/bench-variants-bad.log" 2>&1 &&
  grep -q "'turbo' in 'turbo' is not base, fill, relax, norelax, pinN or cuX" "$work/bench-variants-bad.log"; then
  pass "bench-offline --adaptive-variants runs each variant beside the others"
else
  fail "bench-offline --adaptive-variants: $(tail -3 "$work/bench-variants.log")"
fi

# --- the main server --------------------------------------------------------------------------
# main_suite LABEL FLAGS...: every route, client and failure check against one server. It runs
# twice: on one rank, and split over ranks (tensor + expert parallelism, one process per rank).
main_suite() {
local label=$1
shift
# SGLang launch flags as users write them, plus other backends' flags that must only warn.
start_server "main-$label" --trust-remote-code "$@" --mem-fraction-static 0.8 --tool-call-parser glm47 \
  --max-running-requests 48 --kv-cache-dtype auto --disable-cuda-graph --page-size 16 \
  --max-total-tokens 32768 --served-model-name tandem-e2e \
  --attention-backend fa3 --enable-metrics
if grep -q "ignoring options.*--attention-backend fa3 --enable-metrics" "$log"; then
  pass "unknown vendor flags accepted with a warning"
else
  fail "no warning for unknown flags: $(cat "$log")"
fi

echo "--- routes"
req GET /health
expect "GET /health" 200
req GET /health_generate
expect "GET /health_generate" 200
req GET /v1/models
expect "GET /v1/models" 200 "j.object === 'list' && j.data[0].id === 'tandem-e2e' && j.data[0].object === 'model' && j.data[0].owned_by === 'tandem' && j.data[0].max_model_len === 4096 && j.data[0].root.length > 0"
req GET /v1/models/tandem-e2e
expect "GET /v1/models/{id}" 200 "j.id === 'tandem-e2e'"
req GET /v1/models/other
expect "GET /v1/models/{unknown}" 404 "$(is_error 404)"
req POST /v1/completions '{"model":"tandem-e2e","prompt":"It is a truth","max_tokens":8,"temperature":0}'
expect "POST /v1/completions" 200 "j.object === 'text_completion' && j.choices[0].text.length > 0 && j.choices[0].finish_reason === 'length' && j.usage.completion_tokens === 8 && j.usage.prompt_tokens_details.cached_tokens >= 0 && j.id.startsWith('cmpl-')"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":0,"chat_template_kwargs":{"enable_thinking":false}}'
expect "POST /v1/chat/completions" 200 "j.object === 'chat.completion' && j.choices[0].message.role === 'assistant' && j.choices[0].message.content.length > 0 && j.usage.total_tokens === j.usage.prompt_tokens + 8 && j.model === 'tandem-e2e'"
# The README's first example: the default model answers in content (no reasoning parser unless
# --reasoning-parser is given, and its template opens no <think>).
req POST /v1/chat/completions '{"messages": [{"role": "user", "content": "Tell me about Mr. Darcy."}], "max_tokens": 64}'
expect "README example answers in content, no reasoning_content" 200 "j.choices[0].message.content.length > 0 && !('reasoning_content' in j.choices[0].message) && j.choices[0].message.tool_calls === null"
req POST /v1/chat/completions '{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}'
expect "tool_choice naming an unknown function" 400 "$(is_error 400) && j.error.param === 'tool_choice'"
req POST /generate '{"text":"The next morning","sampling_params":{"max_new_tokens":6,"temperature":0}}'
expect "POST /generate" 200 "j.output_ids.length === 6 && j.text.length > 0 && j.meta_info.finish_reason.type === 'length' && j.meta_info.completion_tokens === 6 && j.meta_info.prompt_tokens > 0 && typeof j.meta_info.e2e_latency === 'number' && typeof j.meta_info.id === 'string'"
req POST /generate '{"input_ids":[[40,41,42],[50,51]],"sampling_params":{"max_new_tokens":3,"temperature":0}}'
expect "POST /generate (batch of input_ids)" 200 "Array.isArray(j) && j.length === 2 && j[1].meta_info.prompt_tokens === 2"
req POST /generate '{"text":"Elinor","sampling_params":{"max_new_tokens":4,"temperature":0,"stop_token_ids":[0]},"rid":"my-rid"}'
expect "POST /generate with rid" 200 "j.meta_info.id === 'my-rid'"
req GET /get_server_info
expect "GET /get_server_info" 200 "j.served_model_name === 'tandem-e2e' && j.max_running_requests === 48 && j.page_size === 16 && typeof j.version === 'string' && j.internal_states[0].kv_pages_total === 2048 && typeof j.internal_states[0].last_gen_throughput === 'number'"
req GET /get_model_info
expect "GET /get_model_info" 200 "j.is_generation === true && j.model_path.length > 0 && j.architectures[0] === 'GlmMoeDsaForCausalLM'"
req GET /version
expect "GET /version" 200 "typeof j.version === 'string'"
req POST /tokenize '{"prompt":"Hello, world"}'
expect "POST /tokenize" 200 "j.count === j.tokens.length && j.count > 0 && j.max_model_len === 4096"
req POST /detokenize "{\"tokens\":$(js 'JSON.stringify(j.tokens)')}"
expect "POST /detokenize" 200 "j.text === 'Hello, world' && j.prompt === j.text"
req POST /v1/completions '{"prompt":"Mr. Knightley","max_tokens":4,"foo":{"bar":[1,2]},"logit_bias":{},"user":"u1","frequency_penalty":0}'
expect "unknown and neutral fields are ignored" 200 "j.usage.completion_tokens <= 4"

echo "--- SSE framing"
sse() { # BODY PATH: streams into $work/sse, sets $status
  status=$(curl -s -N --max-time 120 -o "$work/sse" -D "$work/headers" -w '%{http_code}' \
    -H 'Content-Type: application/json' --data-binary "$1" "$url$2")
}
# Every event is one "data: <json>" line and a blank line; the stream ends with [DONE].
check_sse() {
  local what=$1 cond=$2
  if [[ $status != 200 ]]; then
    fail "$what: HTTP $status"
    return
  fi
  if ! grep -qi '^content-type: text/event-stream' "$work/headers"; then
    fail "$what: content type $(grep -i '^content-type' "$work/headers")"
    return
  fi
  local verdict
  verdict=$(node -e '
    const s = require("fs").readFileSync(process.argv[1], "utf8");
    if (!s.endsWith("data: [DONE]\n\n")) { console.log("does not end with data: [DONE]"); process.exit(); }
    const events = s.slice(0, -2).split("\n\n");
    for (const e of events) if (!/^data: [^\n]+$/.test(e)) { console.log("bad event " + JSON.stringify(e)); process.exit(); }
    const ev = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    console.log(eval(process.argv[2]) ? "ok" : "condition failed: " + process.argv[2]);
  ' "$work/sse" "$cond" 2>&1)
  [[ $verdict == ok ]] && pass "$what" || fail "$what: $verdict"
}
sse '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":12,"temperature":0,"stream":true,"stream_options":{"include_usage":true},"chat_template_kwargs":{"enable_thinking":false}}' /v1/chat/completions
check_sse "chat stream" "ev[0].choices[0].delta.role === 'assistant' && ev.at(-1).choices.length === 0 && ev.at(-1).usage.completion_tokens === 12 && ev.at(-2).choices[0].finish_reason === 'length' && ev.every((e) => e.object === 'chat.completion.chunk')"
sse '{"prompt":"Hello","max_tokens":12,"temperature":0,"stream":true}' /v1/completions
check_sse "completion stream" "ev.at(-1).choices[0].finish_reason === 'length' && ev.slice(0, -1).every((e) => e.choices[0].finish_reason === null) && ev.map((e) => e.choices[0].text).join('').length > 0"
sse '{"text":"Hello","sampling_params":{"max_new_tokens":10,"temperature":0},"stream":true}' /generate
check_sse "/generate stream (cumulative text and ids)" "ev.every((e, i) => i === 0 || (e.text.startsWith(ev[i - 1].text) && e.output_ids.length >= ev[i - 1].output_ids.length)) && ev.at(-1).output_ids.length === 10 && ev.at(-1).meta_info.finish_reason.type === 'length' && ev.at(-1).meta_info.completion_tokens === 10"
sse '{"prompt":"Hello","max_tokens":4,"stream":true,"temperature":-1}' /v1/completions
if [[ $status == 400 ]] && grep -q '"param":"temperature"' "$work/sse"; then
  pass "bad streaming request is a 400 JSON error before any event"
else
  fail "bad streaming request: HTTP $status $(head -c 200 "$work/sse")"
fi

echo "--- bad requests"
req POST /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}'
expect "malformed JSON" 400 "$(is_error 400) && /JSON/.test(j.error.message)"
req POST /v1/completions '[1, 2, 3]'
expect "JSON that is not an object" 400 "$(is_error 400)"
req POST /v1/completions ''
expect "empty body" 400 "$(is_error 400)"
msgs='"messages":[{"role":"user","content":"hi"}]'
for case in "temperature|-1" "temperature|\"hot\"" "top_p|0" "top_p|1.5" "top_k|-7" "max_tokens|0" \
            "max_tokens|-5" "max_tokens|1.5" "n|0" "n|\"two\"" "stop|5" "seed|\"x\"" \
            "stream|\"yes\"" "stop_token_ids|[\"a\"]" "presence_penalty|5"; do
  field=${case%%|*}
  value=${case#*|}
  req POST /v1/chat/completions "{$msgs,\"$field\":$value}"
  expect "chat $field=$value" 400 "$(is_error 400 "$field")"
done
req POST /v1/chat/completions '{"model":"x"}'
expect "chat without messages" 400 "$(is_error 400 messages)"
req POST /v1/chat/completions '{"messages":[]}'
expect "chat with empty messages" 400 "$(is_error 400 messages)"
req POST /v1/chat/completions '{"messages":[{"content":"no role"}]}'
expect "message without role" 400 "$(is_error 400 'messages[0].role')"
req POST /v1/chat/completions '{"messages":[{"role":"wizard","content":"hi"}]}'
expect "chat template error (raise_exception) is a 400" 400 "$(is_error 400) && /wizard/.test(j.error.message)"
req POST /v1/completions '{"max_tokens":3}'
expect "completion without prompt" 400 "$(is_error 400 prompt)"
req POST /v1/completions '{"prompt":{"a":1}}'
expect "completion with an object prompt" 400 "$(is_error 400 prompt)"
req POST /v1/completions '{"prompt":[1,2,99999999]}'
expect "token id outside the vocabulary" 400 "$(is_error 400) && /vocabulary/.test(j.error.message)"
req POST /v1/completions '{"prompt":"hi","return_hidden_states":true}'
expect "return_hidden_states without the server flag" 400 "$(is_error 400 return_hidden_states)"
req POST /generate '{"text":"hi","sampling_params":{"max_new_tokens":0}}'
expect "/generate max_new_tokens=0" 400 "$(is_error 400 sampling_params.max_new_tokens)"
req POST /generate '{"text":"hi","input_ids":[1]}'
expect "/generate with text and input_ids" 400 "$(is_error 400)"
req POST /generate '{"sampling_params":{}}'
expect "/generate without input" 400 "$(is_error 400)"

echo "--- context length"
long_ids=$(node -p "JSON.stringify(Array(5000).fill(40))")
req POST /v1/completions "{\"prompt\":$long_ids,\"max_tokens\":8}"
expect "prompt of 5000 tokens (context 4096)" 400 "$(is_error 400) && /4096/.test(j.error.message) && /5000/.test(j.error.message)"
long_text=$(node -p "'It is a truth universally acknowledged. '.repeat(700)")
req POST /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$long_text\"}]}"
expect "chat messages beyond the context" 400 "$(is_error 400) && /4096/.test(j.error.message) && /messages/.test(j.error.message)"
head -c $((33 * 1024 * 1024)) /dev/zero | tr '\0' ' ' >"$work/huge"
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$work/huge" "$url/v1/completions")
expect "body over 32 MiB" 413 "$(is_error 413)"
req POST /v1/completions '{"prompt":"hi","max_tokens":100000}'
expect "max_tokens beyond the context" 400 "$(is_error 400 max_tokens) && /100000/.test(j.error.message) && /4096/.test(j.error.message)"
req POST /generate "{\"input_ids\":$long_ids}"
expect "/generate input beyond the context" 400 "$(is_error 400) && /4096/.test(j.error.message)"

echo "--- request limits: nesting depth, Content-Type, CORS"
# 100,000 nested arrays in a field: refused while parsing (limit 128 levels), and the server lives.
node -e 'const d = 100000; process.stdout.write(`{"messages":[{"role":"user","content":"hi"}],"temperature":${"[".repeat(d)}1${"]".repeat(d)}}`)' >"$work/deep"
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$work/deep" "$url/v1/chat/completions")
expect "body nested 100,000 levels deep" 400 "$(is_error 400) && /nested deeper than 128 levels/.test(j.error.message)"
req GET /health
expect "/health after the deep body" 200
node -e 'const d = 127; process.stdout.write(`{"prompt":"hi","max_tokens":1,"x":${"[".repeat(d)}1${"]".repeat(d)}}`)' >"$work/deep"
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$work/deep" "$url/v1/completions")
expect "body nested 128 levels (the limit)" 200 "j.choices.length === 1"
req POST /v1/completions '{"prompt":"hi","max_tokens":9223372036854775807}'
expect "max_tokens 2^63-1" 400 "$(is_error 400 max_tokens) && /9223372036854775807/.test(j.error.message)"
req POST /detokenize '{"tokens":[65,123456]}'
expect "/detokenize with an id outside the vocabulary" 400 "$(is_error 400 tokens) && /123456/.test(j.error.message)"
# curl -d without a Content-Type sends a form-encoded body: 415, as is text/plain.
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -d '{"prompt":"hi","max_tokens":1}' "$url/v1/completions")
expect "body without a JSON Content-Type (curl -d)" 415 "$(is_error 415) && /application\/json/.test(j.error.message)"
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -H 'Content-Type: text/plain' --data-binary '{"prompt":"hi"}' "$url/tokenize")
expect "text/plain body" 415 "$(is_error 415)"
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json; charset=utf-8' --data-binary '{"prompt":"hi"}' "$url/tokenize")
expect "application/json; charset=utf-8" 200 "j.count > 0"
# A chunked request body (curl sends one when told to).
status=$(curl -s --max-time 60 -o "$work/body" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' --data-binary '{"prompt":"Hello, world"}' "$url/tokenize")
expect "chunked request body" 200 "j.count > 0"
# HTTP/1.0 clients know no chunked encoding: streamed and generated bodies end with the connection.
curl -s --http1.0 --max-time 60 -D "$work/h10" -o "$work/b10" -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"Hello","max_tokens":4,"stream":true}' "$url/v1/completions"
if ! grep -qi '^transfer-encoding' "$work/h10" && grep -qi '^connection: close' "$work/h10" &&
  [[ $(tail -c 14 "$work/b10") == 'data: [DONE]' ]]; then
  pass "HTTP/1.0 stream: close-delimited, no chunked encoding, ends with [DONE]"
else
  fail "HTTP/1.0 stream: $(cat "$work/h10") $(tail -c 200 "$work/b10")"
fi
curl -s --http1.0 --max-time 60 -D "$work/h10" -o "$work/body" -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"Hello","max_tokens":4}' "$url/v1/completions"
status=$(head -1 "$work/h10" | cut -d' ' -f2)
if ! grep -qi '^transfer-encoding' "$work/h10"; then
  expect "HTTP/1.0 completion: whole JSON body without chunked encoding" 200 "j.choices[0].text.length > 0"
else
  fail "HTTP/1.0 completion sent chunked: $(cat "$work/h10")"
fi
status=$(curl -s --max-time 10 -o "$work/body" -D "$work/headers" -w '%{http_code}' -H 'Origin: http://evil.example' "$url/v1/models")
if [[ $status == 200 ]] && ! grep -qi '^access-control-allow-origin' "$work/headers"; then
  pass "no CORS header for an origin not allowed (default)"
else
  fail "CORS by default: HTTP $status, $(grep -i '^access-control' "$work/headers")"
fi
status=$(curl -s --max-time 10 -o /dev/null -D "$work/headers" -w '%{http_code}' -X OPTIONS -H 'Origin: http://evil.example' -H 'Access-Control-Request-Method: POST' "$url/v1/chat/completions")
if [[ $status == 204 ]] && ! grep -qi '^access-control-allow' "$work/headers"; then
  pass "preflight from an origin not allowed gets no Access-Control-Allow-* headers"
else
  fail "preflight by default: HTTP $status, $(grep -i '^access-control' "$work/headers")"
fi

echo "--- unknown routes and methods"
req GET /no/such/route
expect "unknown route" 404 "$(is_error 404)"
req GET /v1/chat/completions
expect "GET on a POST route" 405 "$(is_error 405)"
if grep -qi '^allow: POST' "$work/headers"; then pass "405 names the allowed method"; else fail "405 without Allow header"; fi
req DELETE /v1/models
expect "DELETE on a GET route" 405 "$(is_error 405)"
req POST /health '{}'
expect "POST /health" 405 "$(is_error 405)"

echo "--- OpenAI client (openai@$(node -p "require('$e2e/package.json').dependencies.openai"))"
if node "$e2e/openai_client.mjs" "$url"; then
  pass "OpenAI client checks"
else
  fail "OpenAI client checks"
fi

echo "--- structured outputs (openai client, ajv validation, SGLang fields)"
if node "$e2e/structured_client.mjs" "$url" "$work/structured_$label.json"; then
  pass "structured-output checks ($label)"
else
  fail "structured-output checks ($label)"
fi

echo "--- clients that disconnect mid-stream (curl)"
before=$(info generation_tokens_total)
clients=()
for i in 1 2 3 4; do
  # --max-time 1 makes curl hang up mid-stream.
  curl -s -N --max-time 1 -H 'Content-Type: application/json' \
    --data-binary "{\"prompt\":\"Chapter $i\",\"max_tokens\":3800,\"temperature\":0,\"ignore_eos\":true,\"stream\":true}" \
    "$url/v1/completions" >"$work/cut$i" 2>/dev/null &
  clients+=($!)
done
# A non-streamed request whose client gives up is aborted too.
curl -s --max-time 1 -H 'Content-Type: application/json' \
  --data-binary '{"prompt":"Chapter 5","max_tokens":3800,"temperature":0,"ignore_eos":true}' \
  "$url/v1/completions" >/dev/null 2>&1 &
clients+=($!)
for c in "${clients[@]}"; do wait "$c" 2>/dev/null; done
if wait_idle; then
  pass "disconnected streams are aborted"
else
  fail "requests still running after their clients left: $(info num_running_reqs)"
fi
after=$(info generation_tokens_total)
if ((after - before < 5 * 3800)); then
  pass "aborted requests stopped early ($((after - before)) tokens generated)"
else
  fail "aborted requests ran to completion ($((after - before)) tokens)"
fi
for i in 1 2 3 4; do
  grep -q '^data: {' "$work/cut$i" || fail "disconnect client $i got no events before leaving"
done

echo "--- no KV pages leaked"
wait_idle || fail "server not idle before the leak check"
req GET /metrics
expect "GET /metrics" 200
metrics_ok=true
for name in sglang:num_running_reqs sglang:num_queue_reqs sglang:token_usage sglang:num_used_tokens \
            sglang:gen_throughput sglang:cache_hit_rate sglang:spec_accept_length sglang:spec_accept_rate \
            sglang:prompt_tokens_total sglang:generation_tokens_total sglang:num_requests_total \
            sglang:time_to_first_token_seconds_bucket sglang:inter_token_latency_seconds_bucket \
            sglang:e2e_request_latency_seconds_bucket tandem:kv_pages_used tandem:kv_pages_cached \
            vllm:spec_decode_num_drafts_total vllm:spec_decode_num_draft_tokens_total \
            vllm:spec_decode_num_accepted_tokens_total; do
  grep -q "^$name{" "$work/body" || { fail "/metrics lacks $name"; metrics_ok=false; }
done
bad_lines=$(grep -v '^#' "$work/body" | grep -Ev '^[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\} [-+0-9.eE]+$|^[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\} (NaN|[+-]Inf)$' | head -3)
[[ -n $bad_lines ]] && { fail "/metrics lines not in the Prometheus text format: $bad_lines"; metrics_ok=false; }
$metrics_ok && pass "/metrics has the SGLang/vLLM series in the text format"
metric() { grep "^$1{" "$work/body" | head -1 | awk '{print $2}'; }
used=$(metric tandem:kv_pages_used)
cached=$(metric tandem:kv_pages_cached)
if [[ -n $used && $used == "$cached" ]]; then
  pass "idle server: KV pages in use ($used) are exactly the prefix cache's ($cached)"
else
  fail "KV pages leaked: $used in use, $cached held by the prefix cache"
fi
req POST /flush_cache
expect "POST /flush_cache (no body)" 200
zero=false
for _ in $(seq 1 50); do
  [[ $(info kv_pages_used) == 0 ]] && { zero=true; break; }
  sleep 0.1
done
$zero && pass "after /flush_cache no KV page is in use" || fail "after /flush_cache $(info kv_pages_used) pages in use"
req GET /health
expect "server still healthy" 200
req POST /v1/completions '{"prompt":"And so","max_tokens":4,"temperature":0}'
expect "server still generates" 200 "j.usage.completion_tokens === 4"
# The greedy output the speculative server must reproduce.
req POST /v1/completions '{"prompt":"It is a truth universally acknowledged","max_tokens":48,"temperature":0,"ignore_eos":true}'
plain_text=$(js "j.choices[0].text")
stop_server
}
main_suite tp1 --tp-size 1
tp1_text=$plain_text
echo "--- the same checks with the model split over 2 ranks (tp 2, ep 2)"
main_suite tp2 --tp-size 2 --ep-size 2
[[ $plain_text == "$tp1_text" ]] && pass "tp 2 / ep 2 greedy text equals tp 1's" ||
  fail "tp 2 / ep 2 greedy text differs: '$plain_text' vs '$tp1_text'"
# same_structured A B WHAT: the constrained greedy outputs of two servers are identical.
same_structured() {
  if [[ -s "$work/structured_$1.json" ]] && cmp -s "$work/structured_$1.json" "$work/structured_$2.json"; then
    pass "$3: constrained greedy outputs identical ($(node -p "Object.keys(require('$work/structured_$1.json')).length") outputs)"
  else
    fail "$3: constrained greedy outputs differ: $(diff "$work/structured_$1.json" "$work/structured_$2.json" | head -4)"
  fi
}
same_structured tp1 tp2 "tp 2 / ep 2 vs tp 1"

# --- speculative decoding ---------------------------------------------------------------------
echo "--- MTP speculative decoding"
start_server spec --tool-call-parser glm47 --speculative-algorithm EAGLE --speculative-num-steps 3 \
  --speculative-draft-reads-prompts \
  --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 \
  --speculative-draft-attention-backend aiter --max-total-tokens 16384 \
  --enable-return-hidden-states --allowed-origins '["http://a.example", "http://b.example"]'
status=$(curl -s --max-time 10 -o /dev/null -D "$work/headers" -w '%{http_code}' -H 'Origin: http://b.example' "$url/v1/models")
if [[ $status == 200 ]] && grep -qi '^access-control-allow-origin: http://b.example' "$work/headers" && grep -qi '^vary: origin' "$work/headers"; then
  pass "--allowed-origins: an allowed origin is echoed with Vary: Origin"
else
  fail "--allowed-origins: HTTP $status, $(grep -i '^access-control\|^vary' "$work/headers")"
fi
curl -s --max-time 10 -o /dev/null -D "$work/headers" -H 'Origin: http://c.example' "$url/v1/models"
grep -qi '^access-control-allow-origin' "$work/headers" && fail "--allowed-origins: another origin allowed" || pass "--allowed-origins: other origins get no CORS header"
req POST /v1/completions '{"prompt":"It is a truth universally acknowledged","max_tokens":48,"temperature":0,"ignore_eos":true}'
expect "speculative greedy output equals plain decoding" 200 "j.choices[0].text === $(node -p 'JSON.stringify(process.argv[1])' "$plain_text")"
sse '{"prompt":"It is a truth universally acknowledged","max_tokens":48,"temperature":0,"ignore_eos":true,"stream":true}' /v1/completions
check_sse "speculative stream equals plain decoding" "ev.map((e) => e.choices[0].text).join('') === $(node -p 'JSON.stringify(process.argv[1])' "$plain_text")"
req POST /generate '{"text":"Emma Woodhouse, handsome, clever, and rich,","sampling_params":{"max_new_tokens":32,"temperature":0,"ignore_eos":true}}'
# Adaptive depth may run a request's every step plain (0 verify rounds) once it has measured
# plain decoding to be faster on this CPU; the fields must be there and agree either way.
expect "/generate reports spec_verify_ct and spec_accept_length" 200 "const m = j.meta_info; Number.isInteger(m.spec_verify_ct) && m.spec_verify_ct >= 0 && (m.spec_verify_ct === 0 ? m.spec_accept_length === 0 && m.spec_draft_token_num === 0 : m.spec_accept_length >= 1 && m.spec_draft_token_num >= m.spec_verify_ct) && m.spec_accept_rate >= 0 && m.spec_accept_rate <= 1 && m.completion_tokens === 32"
req POST /generate '{"text":"Hello","sampling_params":{"max_new_tokens":5,"temperature":0},"return_hidden_states":true}'
expect "/generate return_hidden_states (one row per token)" 200 "j.meta_info.hidden_states.length === 5 && j.meta_info.hidden_states.every((h) => h.length === 256)"
req POST /v1/completions '{"prompt":"Hello","max_tokens":6,"temperature":0,"return_hidden_states":true}'
expect "completions return_hidden_states" 200 "j.choices[0].hidden_states.length === 6"
req GET /get_server_info
expect "/get_server_info avg_spec_accept_length" 200 "j.speculative_algorithm === 'EAGLE' && j.internal_states[0].avg_spec_accept_length >= 1"
req GET /metrics
drafts=$(grep '^vllm:spec_decode_num_drafts_total{' "$work/body" | awk '{print $2}')
[[ -n $drafts && $drafts -gt 0 ]] && pass "spec counters in /metrics ($drafts drafts)" || fail "spec counters: '$drafts'"
grep -q '^vllm:spec_decode_num_accepted_tokens_per_pos_total{.*position="2"}' "$work/body" &&
  pass "per-position acceptance series" || fail "no per-position acceptance series"
# Adaptive depth (on by default): decode steps counted by depth, 0..5, and in /get_server_info.
depth_steps=$(grep '^tandem:spec_depth_steps_total{' "$work/body" | awk '{s += $2} END {print s + 0}')
[[ $(grep -c '^tandem:spec_depth_steps_total{' "$work/body") == 6 && $depth_steps -gt 0 ]] &&
  pass "adaptive depth: $depth_steps decode steps by depth in /metrics" ||
  fail "adaptive depth series: $(grep '^tandem:spec_depth_steps_total' "$work/body" | head -3)"
# The draft read the prompts as they were prefilled (the policy starts out speculating).
prefill_reads=$(grep '^tandem:spec_draft_prefill_tokens_total{' "$work/body" | awk '{print $2}')
[[ -n $prefill_reads && $prefill_reads -gt 0 ]] &&
  grep -q '^tandem:spec_draft_catch_up_tokens_total{' "$work/body" &&
  pass "draft reads: $prefill_reads prompt positions with prefill steps" ||
  fail "draft read counters: '$prefill_reads'"
req GET /get_server_info
expect "/get_server_info spec_depth_steps (adaptive)" 200 "j.speculative_adaptive === true && j.internal_states[0].spec_adaptive === true && j.internal_states[0].spec_depth_steps.length === 6 && j.internal_states[0].spec_depth_steps.reduce((a, b) => a + b, 0) > 0 && j.internal_states[0].spec_draft_prefill_tokens > 0 && j.internal_states[0].spec_draft_catch_up_tokens >= 0"
if node "$e2e/openai_client.mjs" "$url" >"$work/spec_client.log" 2>&1; then
  pass "OpenAI client checks with speculative decoding"
else
  fail "OpenAI client checks with speculative decoding:"
  grep FAIL "$work/spec_client.log"
fi
if node "$e2e/structured_client.mjs" "$url" "$work/structured_spec.json" >"$work/spec_structured.log" 2>&1; then
  pass "structured-output checks with speculative decoding"
else
  fail "structured-output checks with speculative decoding:"
  grep FAIL "$work/spec_structured.log"
fi
same_structured tp1 spec "MTP vs plain"
# The web page: served at /, then used in a real browser (chat, live statistics, Stop).
req GET /
if [[ $status == 200 ]] && grep -qi '^content-type: text/html; charset=utf-8' "$work/headers" &&
  grep -qi '^content-security-policy: .*connect-src .self.' "$work/headers" &&
  grep -q '<title>Tandem</title>' "$work/body"; then
  pass "GET / serves the web page (text/html with a Content-Security-Policy)"
else
  fail "GET /: HTTP $status, $(grep -i '^content-type' "$work/headers"), $(head -c 200 "$work/body")"
fi
rm -f "$artifacts/web_page.png"
if node "$e2e/web_page.mjs" "$url" "$artifacts/web_page.png" >"$work/web_page.log" 2>&1 &&
  [[ -s $artifacts/web_page.png ]]; then
  pass "the web page in headless Chromium ($(grep -c '^ok' "$work/web_page.log") checks; screenshot $artifacts/web_page.png)"
else
  fail "the web page in headless Chromium:"
  grep -v '^ok' "$work/web_page.log"
fi
wait_idle
req POST /flush_cache
expect "spec server: flush_cache" 200
zero=false
for _ in $(seq 1 50); do
  [[ $(info kv_pages_used) == 0 ]] && { zero=true; break; }
  sleep 0.1
done
$zero && pass "spec server: no KV page in use after flush" || fail "spec server: $(info kv_pages_used) pages in use"
stop_server

# --- graceful shutdown ------------------------------------------------------------------------
# SIGTERM with requests in flight: a stream and a non-streamed request sent before the signal
# finish in full (the stream with its final chunk and [DONE]), a request sent after it gets 503,
# and the process exits 0. Then with a 1 s grace period a long stream is aborted past it and
# still ends with finish_reason "abort" and [DONE].
gen_async() { # gen_async OUT BODY: POSTs BODY to /v1/completions in the background
  curl -sN --max-time 300 -H 'Content-Type: application/json' --data-binary "$2" \
    "$url/v1/completions" >"$1" 2>/dev/null &
}
# Long enough that both are still running when the late request arrives (the server exits as
# soon as nothing is in flight), within a grace period no CI machine runs out of.
start_server graceful --graceful-shutdown-timeout 300
gen_async "$work/g_stream" '{"prompt":"It is a truth","max_tokens":1200,"temperature":0,"ignore_eos":true,"stream":true}'
g1=$!
gen_async "$work/g_plain" '{"prompt":"Emma Woodhouse","max_tokens":800,"temperature":0,"ignore_eos":true}'
g2=$!
for _ in $(seq 1 100); do [[ $(info num_running_reqs) == 2 ]] && break; sleep 0.05; done
kill -TERM "$pid"
sleep 0.3
req POST /v1/completions '{"prompt":"late","max_tokens":4}'
expect "a request after SIGTERM is refused" 503 "j.error.message.includes('shutting down')"
wait "$g1" "$g2"
if tail -n 3 "$work/g_stream" | grep -q '^data: \[DONE\]' &&
   grep -q '"finish_reason":"length"' "$work/g_stream"; then
  pass "a stream in flight at SIGTERM completes with finish_reason length and [DONE]"
else
  fail "stream cut by SIGTERM: $(tail -c 300 "$work/g_stream")"
fi
cp "$work/g_plain" "$work/body"
status=200
expect "a non-streamed request in flight at SIGTERM gets its whole body" 200 \
  "j.usage.completion_tokens === 800 && j.choices[0].finish_reason === 'length'"
stop_server_wait() { # waits for the signalled server to exit; checks exit code 0
  local code=""
  for _ in $(seq 1 300); do
    if ! kill -0 "$pid" 2>/dev/null; then wait "$pid"; code=$?; break; fi
    sleep 0.1
  done
  [[ $code == 0 ]] && pass "$1" || { fail "$1 (exit '${code:-still running}')"; kill -KILL "$pid" 2>/dev/null; }
  pid=""
}
stop_server_wait "the server exits 0 once its requests are done"

start_server grace1 --graceful-shutdown-timeout 1
gen_async "$work/g_long" '{"prompt":"Chapter 9","max_tokens":3800,"temperature":0,"ignore_eos":true,"stream":true}'
g3=$!
for _ in $(seq 1 100); do [[ $(info num_running_reqs) == 1 ]] && break; sleep 0.05; done
started=$(date +%s%N)
kill -TERM "$pid"
wait "$g3"
took=$(( ($(date +%s%N) - started) / 1000000 ))
if tail -n 3 "$work/g_long" | grep -q '^data: \[DONE\]' && grep -q '"finish_reason":"abort"' "$work/g_long" &&
   ((took < 10000)); then
  pass "past the grace period a stream is aborted with a final chunk and [DONE] (${took} ms)"
else
  fail "grace period: ${took} ms, stream tail: $(tail -c 300 "$work/g_long")"
fi
stop_server_wait "the server exits 0 after aborting past its grace period"

# --- several processes, several nodes ----------------------------------------------------------
echo "--- tensor parallelism: two nodes over loopback, a rank that dies"
dport=$((20000 + RANDOM % 20000))
"$bin" serve --port 0 --tp-size 2 --nnodes 2 --node-rank 1 --dist-init-addr "127.0.0.1:$dport" \
  >"$work/node1.log" 2>&1 &
node1=$!
start_server node0 --tp-size 2 --nnodes 2 --node-rank 0 --dist-init-addr "127.0.0.1:$dport"
req POST /v1/completions '{"prompt":"It is a truth universally acknowledged","max_tokens":48,"temperature":0,"ignore_eos":true}'
expect "two nodes (one rank each) answer" 200 "j.choices[0].text === $(node -p 'JSON.stringify(process.argv[1])' "$tp1_text")"
stop_server
for _ in $(seq 1 100); do kill -0 "$node1" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$node1" 2>/dev/null; then
  fail "node 1 still running after node 0 stopped"
  kill -KILL "$node1"
else
  wait "$node1"
  code=$?
  [[ $code == 0 ]] && grep -q "stopped by rank 0" "$work/node1.log" &&
    pass "node 1 exits 0 when node 0 stops" || fail "node 1 exit $code: $(tail -3 "$work/node1.log")"
fi

# server_stops_with_error WHAT SECONDS NEEDLE: the server ($pid) must exit non-zero within SECONDS
# with NEEDLE in its log (one clear error, never a hang).
server_stops_with_error() {
  local what=$1 secs=$2 needle=$3 code
  for _ in $(seq 1 $((secs * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$what: the server was still running after $secs s"
    kill -KILL "$pid"
  else
    wait "$pid"
    code=$?
    [[ $code != 0 ]] && grep -q "$needle" "$log" && pass "$what (exit $code)" ||
      fail "$what: exit $code, log: $(tail -3 "$log")"
  fi
  pid=""
}

# A rank killed while the server runs: the whole server stops with one clear error, non-zero.
start_server killed --tp-size 2
child=$(pgrep -P "$pid" -f -- "--dist-local-rank 1")
kill -KILL "$child"
server_stops_with_error "a killed rank stops the server with an error" 10 \
  "rank 1 closed its connection"

# A rank that hangs (stopped, not dead): the next step's collective times out after
# --dist-timeout and the server stops with an error instead of hanging.
start_server hung --tp-size 2 --dist-timeout 3
child=$(pgrep -P "$pid" -f -- "--dist-local-rank 1")
kill -STOP "$child"
curl -s --max-time 30 -o /dev/null "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"Hello","max_tokens":4}' &
server_stops_with_error "a hung rank stops the server after --dist-timeout" 20 \
  "rank 1 did not answer within the collective timeout"
kill -KILL "$child" 2>/dev/null

# --- bounded waiting queue --------------------------------------------------------------------
# With one running and one waiting slot, a third request gets 503 with Retry-After at once.
# (This server also runs without the web page.)
start_server queue --max-running-requests 1 --max-queued-requests 1 --disable-web-page
req GET /
expect "--disable-web-page: GET / is a 404" 404 "$(is_error 404)"
gen_async "$work/q1" '{"prompt":"Chapter 1","max_tokens":3800,"temperature":0,"ignore_eos":true,"stream":true}'
q1=$!
for _ in $(seq 1 100); do [[ $(info num_running_reqs) == 1 ]] && break; sleep 0.05; done
gen_async "$work/q2" '{"prompt":"Chapter 2","max_tokens":3800,"temperature":0,"ignore_eos":true,"stream":true}'
q2=$!
for _ in $(seq 1 100); do [[ $(info num_queue_reqs) == 1 ]] && break; sleep 0.05; done
req POST /v1/completions '{"prompt":"Chapter 3","max_tokens":4}'
expect "a request beyond --max-queued-requests gets 503" 503 "j.error.message.includes('capacity')"
grep -qi '^retry-after: 1' "$work/headers" && pass "the 503 says Retry-After" ||
  fail "no Retry-After on the 503: $(cat "$work/headers")"
kill "$q1" "$q2" 2>/dev/null
wait "$q1" "$q2" 2>/dev/null
wait_idle && pass "queue server idle after its clients left" || fail "queue server still busy"
stop_server

# --- hostile connections ----------------------------------------------------------------------
# Issue #21: with 1,000 idle and 200 slow connections open (one byte a second, in the headers or
# the body), /health answers within 100 ms and a normal completion finishes; then the drippers
# are cut off with 408 at the header and body deadlines and the idle ones at the idle timeout.
# Beyond --max-connections a new connection gets 503 with Retry-After at once. The server raises
# its own open-file limit; the client needs one too.
echo "--- hostile connections"
ulimit -n 4096 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null
if (($(ulimit -n) < 1400)); then
  fail "hostile connections: the open-file limit is $(ulimit -n) (ulimit -Hn $(ulimit -Hn)); 1,400 needed"
else
  start_server hostile --http-header-timeout 6 --http-body-timeout 8 --http-idle-timeout 12
  if node "$e2e/connections.mjs" hostile "$url" 1000 200 6 8 12; then
    pass "1,000 idle and 200 slow connections: /health fast, completions served, deadlines kept"
  else
    fail "hostile connections"
  fi
  stop_server
  start_server limit --max-connections 100 --api-key sekrit
  if node "$e2e/connections.mjs" limit "$url" 100; then
    pass "connection limit: 503 with Retry-After beyond --max-connections"
  else
    fail "connection limit"
  fi
  # The Bearer scheme is case-insensitive (RFC 7235); the key is not.
  for scheme in Bearer bearer BEARER; do
    status=$(curl -s --max-time 10 -o "$work/body" -w '%{http_code}' -H "Authorization: $scheme sekrit" "$url/v1/models")
    expect "--api-key with scheme '$scheme'" 200 "j.object === 'list'"
  done
  status=$(curl -s --max-time 10 -o "$work/body" -w '%{http_code}' -H "Authorization: Bearer SEKRIT" "$url/v1/models")
  expect "--api-key compared exactly" 401 "$(is_error 401)"
  status=$(curl -s --max-time 10 -o "$work/body" -w '%{http_code}' "$url/v1/models")
  expect "--api-key missing" 401 "$(is_error 401)"
  stop_server
fi

echo
if ((failures)); then
  echo "e2e: $failures check(s) FAILED"
  exit 1
fi
echo "e2e: all checks passed"
