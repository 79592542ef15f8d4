#!/usr/bin/env bash
# Builds the libFuzzer harnesses (fuzz/) with clang-14, ASan and UBSan into build-fuzz/ and runs
# each for a bounded time from its seed corpus. Any crash, leak, UB report, timeout or
# out-of-memory fails the script; the input that caused it is saved under build-fuzz/artifacts/.
# Usage: scripts/fuzz.sh [seconds-per-target] [target...]   (default 30 s, every target)
#        scripts/fuzz.sh --runs N [target...]                 (N executions per target, no time limit)
# CI runs the short default; docs/testing.md describes the long run.
set -euo pipefail
cd "$(dirname "$0")/.."

limit=()
if [[ ${1:-} == --runs ]]; then
  [[ ${2:-} =~ ^[0-9]+$ ]] || { echo "scripts/fuzz.sh: --runs takes a count" >&2; exit 2; }
  limit=(-runs="$2")
  what="$2 runs"
  shift 2
else
  seconds=${1:-30}
  limit=(-max_total_time="$seconds")
  what="${seconds}s"
  shift || true
fi
targets=("$@")
((${#targets[@]})) || targets=(safetensors config tokenizer chat_template request sse grammar tool_calls http_request)

# libFuzzer and the sanitizer runtimes ship in Debian's compiler-rt package (scripts/setup.sh
# installs it), which a bare clang install lacks.
if ! dpkg -s clang-14 libclang-rt-14-dev >/dev/null 2>&1; then
  echo "scripts/fuzz.sh needs clang-14 and libclang-rt-14-dev: run scripts/setup.sh" >&2
  exit 1
fi

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 with line tables: the usual fuzzing trade-off between speed and readable stack traces.
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Fuzz \
  -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" -DTANDEM_FUZZ=ON -DTANDEM_CUDA=OFF \
  -DTANDEM_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}"

mkdir -p build-fuzz/artifacts
for t in "${targets[@]}"; do
  # New inputs go to the first (scratch) corpus folder; the committed seeds stay untouched.
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  echo "fuzz_$t: $what"
  log=build-fuzz/fuzz_$t.log
  if ! build-fuzz/fuzz/fuzz_"$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/artifacts/"$t"- \
    "$work" fuzz/corpus/"$t" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$t FAILED (log: $log, inputs: build-fuzz/artifacts/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "fuzz_$t: ${runs} runs, ${speed} exec/s, no findings"
done
