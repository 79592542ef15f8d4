#!/usr/bin/env bash
# Quick start: install dependencies, build, and serve the built-in default model (OpenAI-compatible
# and SGLang-native API on http://127.0.0.1:30000). Extra arguments go to `tandem serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/tandem serve --host 127.0.0.1 --port 30000 "$@"
