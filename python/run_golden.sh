#!/usr/bin/env bash
# On the GPU machine: regenerate tests/data/golden from transformers (see make_golden.py).
# Leaves golden.tar.gz (the data) and hf_sources.tar.gz (the modeling files used) in $OUT.
set -euo pipefail
out=${OUT:-/tmp/out}
work=$(mktemp -d)
PYTHONUNBUFFERED=1 python3 python/make_golden.py "$work/golden" 2>&1 | tee "$out/golden.log"
tar -C "$work" -czf "$out/golden.tar.gz" golden
tf=$(python3 -c "import transformers, os; print(os.path.dirname(transformers.__file__))")
tar -C "$tf/models" -czf "$out/hf_sources.tar.gz" glm_moe_dsa deepseek_v32 deepseek_v3
