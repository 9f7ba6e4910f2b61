#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py): one JSON record on stdout within 8 minutes on one H100/H200, no network.
#
#   bash scripts/gpu_check.sh > gpu_check.json        # then commit it under docs/records/
#   PYTHON=.venv/bin/python GPU_CHECK_LIMIT_S=300 bash scripts/gpu_check.sh
#
# Needs: a CUDA torch, transformers, trl (the fused LM head) and this package (pip install -e '.[train]');
# vLLM is not needed. It first synthesizes the smoke replay pool (configs/synthesis/smoke.yaml, offline, at most
# 90 s) for the wave part unless POOL names one; if that fails the wave part is skipped and says so. The whole run
# stays within GPU_CHECK_LIMIT_S (470 s): no part starts in the last 60 s, and at the limit the running part is
# recorded as stopped and the record still prints. Progress goes to stderr; extra arguments go to gpu_check.py.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY="${PYTHON:-python}"
POOL="${POOL:-runs/gpu-check-pool}"
LIMIT="${GPU_CHECK_LIMIT_S:-470}"
pool_args=()
if [ -f "$POOL/episodes/index.jsonl" ] || timeout 90 "$PY" -m harness.cli synthesize \
        --config configs/synthesis/smoke.yaml --out "$POOL" >&2; then
    pool_args=(--pool "$POOL")
else
    echo "gpu_check: the smoke pool could not be synthesized; the wave part will be skipped" >&2
fi
left=$((LIMIT - SECONDS))
exec timeout --kill-after=20 "$left" "$PY" scripts/gpu_check.py --budget-s "$((left - 60))" ${pool_args[@]+"${pool_args[@]}"} "$@"
