#!/usr/bin/env bash
# Installs, builds and runs Tandem's whole CPU test suite: unit, model (golden outputs from
# transformers), tokenizer and chat-template oracles (Hugging Face tokenizers via npm, Python
# Jinja2), end-to-end tests against the real server, a short soak, the .deb in a fresh Debian root, the unit
# and server tests under ASan and UBSan, and a short run of every fuzzer. GPU tests live in scripts/gpu_suite.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "$@"

fixtures=build/fixtures
mkdir -p "$fixtures"
scripts/fetch_tokenizer_fixtures.sh "$fixtures/tokenizer"
scripts/fetch_template_fixtures.sh "$fixtures/templates"

export TANDEM_TOKENIZER_FIXTURES=$PWD/$fixtures/tokenizer
export TANDEM_TEMPLATE_FIXTURES=$PWD/$fixtures/templates
ctest --test-dir build --output-on-failure -j "$(nproc)"

# End to end: the real server on the default model, driven by the official openai npm client,
# curl, and tandem bench.
tests/e2e/run.sh build/tandem
tests/e2e/bench.sh build/tandem

# Soak and chaos (docs/testing.md, "Soak"): 1,000 requests of every API with bad, very large and
# disconnecting requests and slow clients interleaved; RSS, fds, threads and KV pages back at idle.
node tests/soak/soak.mjs --bin build/tandem --requests 1000

# The package: the .deb installed with apt into a fresh minimal Debian 12 root, then run there.
scripts/package_test.sh build-pkg

# Memory errors and undefined behaviour (docs/testing.md): the unit and server tests under ASan
# and UBSan, then every libFuzzer harness for 20 s from its committed seeds.
scripts/sanitize.sh
scripts/fuzz.sh 20
