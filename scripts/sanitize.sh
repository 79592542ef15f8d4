#!/usr/bin/env bash
# Builds the unit and server tests with AddressSanitizer (+ LeakSanitizer) and UBSan into
# build-asan/ (clang-14, CPU only) and runs them: any memory error, leak or undefined behaviour
# fails the test that hit it. Only the two test binaries and the libraries they link are built,
# which keeps the CI cost down on a 2-core machine.
# Usage: scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! dpkg -s clang-14 libclang-rt-14-dev >/dev/null 2>&1; then
  echo "scripts/sanitize.sh needs clang-14 and libclang-rt-14-dev: run scripts/setup.sh" >&2
  exit 1
fi

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 keeps the instrumented tests fast enough; -fno-sanitize-recover makes UB abort the test
# rather than print and carry on (a printed report would pass unnoticed).
flags="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Asan \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DTANDEM_CUDA=OFF "${launcher[@]}" >/dev/null
cmake --build build-asan --target unit_tests server_tests

# Tests that start threads and servers report leaks at exit too; a report fails the binary.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1
# GenerationTest.ContextLimits prefills a 4k-token prompt on the CPU model, which instrumented
# code does not finish within the test's 120 s deadline; the plain build runs it.
ctest --test-dir build-asan -L "^(unit|server)$" -E "^GenerationTest.ContextLimits$" \
  --output-on-failure -j "$(nproc)"
