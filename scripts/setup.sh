#!/usr/bin/env bash
# Installs Tandem's build and test dependencies (Debian 12 packages) and builds it into build/.
# Usage: scripts/setup.sh [--no-install]
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" != "--no-install" ]]; then
  pkgs=(build-essential cmake ninja-build pkg-config git curl ca-certificates
        libgtest-dev libgmock-dev nlohmann-json3-dev libcli11-dev libfmt-dev
        libpcre2-dev libutf8proc-dev libcpp-httplib-dev libxxhash-dev
        procps  # pgrep: the e2e suite finds the ranks a server spawned
        chromium  # the e2e suite drives the web page at / in headless Chromium
        clang-14 libclang-rt-14-dev)  # the fuzzers and the sanitizer build (libFuzzer, ASan)
  missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  # Node, npm and Python may come from elsewhere than Debian (nodesource, pyenv): only install
  # Debian's when the commands are missing.
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  python3 -c "import jinja2" >/dev/null 2>&1 || missing+=(python3-jinja2)
  if ((${#missing[@]})); then
    sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    echo "installing: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
  fi
fi

# CUDA is optional: the CUDA backend is compiled whenever nvcc is found.
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
