#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py): one JSON record on stdout, at most 8 minutes on one H100/H200, no network.
#
#   bash scripts/gpu_check.sh > gpu_check.json        # then commit it under docs/records/
#   PYTHON=.venv/bin/python bash scripts/gpu_check.sh --budget-s 300
#
# Needs: a CUDA torch, transformers, trl (the fused LM head) and this package (pip install -e '.[train]');
# vLLM is not needed. It first synthesizes the smoke replay pool (configs/synthesis/smoke.yaml, ~1 minute, offline)
# for the wave part unless POOL names one; if that fails the wave part is skipped and says so. Progress goes to
# stderr; extra arguments go to scripts/gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY="${PYTHON:-python}"
POOL="${POOL:-runs/gpu-check-pool}"
pool_args=()
if [ -f "$POOL/episodes/index.jsonl" ] || timeout 120 "$PY" -m harness.cli synthesize --config configs/synthesis/smoke.yaml \
        --out "$POOL" >&2; then
    pool_args=(--pool "$POOL")
else
    echo "gpu_check: the smoke pool could not be synthesized; the wave part will be skipped" >&2
fi
exec timeout 470 "$PY" scripts/gpu_check.py "${pool_args[@]}" "$@"
