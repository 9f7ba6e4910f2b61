"""Memory and time expectations of Qwen3-8B SFT on 8x A100 80 GB (DeepSpeed ZeRO-3), with the arithmetic shown.

    python scripts/estimate_gpu.py                      # the README's numbers
    python scripts/estimate_gpu.py --gpus 16 --seq 32768 --mean-tokens 12000 --mfu 0.4

Runs on CPU in seconds: the model is built on the meta device (no weights), DeepSpeed's own estimators give the
model-state tables. The last line is one JSON object (see training/estimate.py for every formula).
"""

from __future__ import annotations

import argparse
import json
import sys

from training.estimate import deepspeed_model_states, model_shape, plan


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--seq", type=int, default=40960, help="tokens per sequence (max_length)")
    parser.add_argument("--samples", type=int, default=13_441, help="SFT samples (the default synthesis run)")
    parser.add_argument("--mean-tokens", type=float, default=10_000, help="mean tokens per SFT sample")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--mfu", type=float, default=0.35, help="assumed model-FLOPs utilization")
    args = parser.parse_args()
    shape = model_shape()
    for stage in (3, 2):
        print(f"--- DeepSpeed ZeRO-{stage} model states (deepspeed's estimator) ---")
        print(deepspeed_model_states(shape, stage, args.gpus))
    result = plan(args.gpus, args.seq, args.samples, args.mean_tokens, args.epochs, args.mfu)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
