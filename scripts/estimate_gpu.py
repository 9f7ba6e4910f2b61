"""Memory and time expectations of Qwen3-8B on 8x A100 80 GB (DeepSpeed ZeRO-3), with the arithmetic shown, and the
memory budget of any SFT or RL config against a card.

    python scripts/estimate_gpu.py                      # the README's numbers
    python scripts/estimate_gpu.py --gpus 16 --seq 32768 --mean-tokens 12000 --mfu 0.4
    python scripts/estimate_gpu.py --config configs/rl/qwen3-8b.yaml configs/sft/qwen3-8b.yaml --card-gib 80

Runs on CPU in seconds: the model is built on the meta device (no weights), DeepSpeed's own estimators give the
model-state tables. The last line is one JSON object (see training/estimate.py for every formula). With
``--config``, one JSON line per config (its rows and phases in GiB); a config over the card is refused: one line
``REFUSED <config>: <reason>`` on stderr and exit status 1. A ``use_cpu: true`` config is reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import sys

from training.estimate import config_budget, deepspeed_model_states, model_shape, plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--seq", type=int, default=40960, help="tokens per sequence (max_length)")
    parser.add_argument("--samples", type=int, default=13_441, help="SFT samples (the default synthesis run)")
    parser.add_argument("--mean-tokens", type=float, default=10_000, help="mean tokens per SFT sample")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--mfu", type=float, default=0.35, help="assumed model-FLOPs utilization")
    parser.add_argument("--config", nargs="+", help="SFT or RL YAML files to size against the card")
    parser.add_argument("--card-gib", type=float, default=80.0, help="memory of one GPU (A100/H100 80 GB: 80)")
    parser.add_argument("--zero", type=int, choices=(2, 3), help="DeepSpeed stage (default: 2 for LoRA, else 3)")
    args = parser.parse_args(argv)
    if args.config:
        refused = 0
        for path in args.config:
            budget = config_budget(path, gpus=args.gpus, card_gib=args.card_gib, zero=args.zero)
            print(json.dumps(budget.as_dict()))
            if not budget.fits:
                print(f"REFUSED {path}: {budget.reason}", file=sys.stderr)
                refused += 1
        return 1 if refused else 0
    shape = model_shape()
    for stage in (3, 2):
        print(f"--- DeepSpeed ZeRO-{stage} model states (deepspeed's estimator) ---")
        print(deepspeed_model_states(shape, stage, args.gpus))
    result = plan(args.gpus, args.seq, args.samples, args.mean_tokens, args.epochs, args.mfu)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
