#!/usr/bin/env bash
# Quick start: install, build, and run Tandem on its built-in default model on the CPU.
# Extra arguments go to `tandem generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/tandem generate --prompt "It is a truth universally acknowledged" "$@"
