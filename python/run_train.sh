#!/usr/bin/env bash
# On the GPU machine: train the default model (python/train_austen.py) in one device command.
# The corpus travels in .device/austen (a copy of ../shared/data/austen; carry it).
# $OUT receives the model as split tar parts (each under the 16 MiB transfer limit), the golden
# outputs and the logs.
set -euo pipefail
out=${OUT:-/tmp/out}
work=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
PYTHONUNBUFFERED=1 python3 python/train_austen.py --corpus .device/austen --out "$work" \
  --minutes "${MINUTES:-5.5}" --template models/tandem-austen/chat_template.jinja 2>&1 | tee "$out/train.log"
tar -C "$work" -czf - tandem-austen | split -b 15M - "$out/model.tar.gz.part-"
cp "$work/austen_golden.safetensors" "$work/train_log.json" "$out/"
ls -la "$out"
