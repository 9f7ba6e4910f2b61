"""Teacher-forced decision margins of a model on a synthesis split (training.study.margin): per sample, log
P(REPAIR) minus log P(FINALIZE_RELATIONS) after the gold context, and the AUC separating repair from confirm samples.

    python -m training.study.margin_cli --model runs/study-smollm2/arms/sft-lora/merged \\
        --data runs/study-smollm2/data/train-bare --split validation --prompt_view full --out margins.json

``--data`` is a synthesis output folder or its ``dataset/`` folder (a ``train-bare`` copy is already in the bare view:
leave ``--prompt_view full`` there; on a raw synthesis pass the view the model was trained with). ``--out`` gets the
rows and the summary; the last line printed is the summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="causal LM folder with its tokenizer and chat template")
    parser.add_argument("--data", required=True, help="synthesis output folder or its dataset/ folder")
    parser.add_argument("--split", default="validation", help="dataset split (default: validation)")
    parser.add_argument("--prompt_view", default="full", choices=["full", "bare"], help="what the model reads")
    parser.add_argument("--limit", type=int, default=None, help="at most this many samples (repair/confirm in turn)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--out", default=None, help="JSON file for the rows and the summary")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    model_dir = Path(args.model)
    if not (model_dir / "config.json").is_file():
        print(f"--model {model_dir}: no config.json there; pass a saved model folder", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit <= 0:
        print(f"--limit {args.limit}: must be positive; leave it out for every sample", file=sys.stderr)
        return 2
    from training.study.margin import decision_samples, score_model, summary

    try:
        samples = decision_samples(args.data, args.split, args.prompt_view, args.limit)
    except (FileNotFoundError, ValueError) as error:
        print(f"--data: {error}", file=sys.stderr)
        return 2
    if not samples:
        what = "holds no flat REPAIR / FINALIZE_RELATIONS sample"
        print(f"--data {args.data}: split {args.split!r} {what}", file=sys.stderr)
        return 2

    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    rows = score_model(model_dir, samples)
    result = {
        "model": str(model_dir),
        "data": str(args.data),
        "split": args.split,
        "prompt_view": args.prompt_view,
        "summary": summary(rows),
        "rows": rows,
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
