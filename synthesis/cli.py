"""``stateguard synthesize --config configs/synthesis/default.yaml --out DIR`` (entry point ``synthesis.cli``).

Loads the config (every field's type is checked; all problems of the file are reported at once), checks that
``--out`` is a writable folder (created when missing), then runs :func:`synthesis.pipeline.synthesize` and prints the
closing summary table. A killed run, re-run with the same ``--out``, continues from its shards. Bad input prints one
line on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys

from harness.cli import prepare_out_dir
from synthesis.config import SynthesisConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="synthesis YAML (configs/synthesis/*.yaml)")
    parser.add_argument("--out", required=True, help="output folder (shards, dataset, episodes, card, stats)")
    parser.add_argument("--workers", type=int, default=None, help="worker processes (default: the config's)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    from synthesis.pipeline import summary_table, synthesize

    try:
        config = SynthesisConfig.from_yaml(args.config, workers=args.workers)
    except ValueError as error:
        print(f"stateguard synthesize: {error}", file=sys.stderr)
        return 2
    prepare_out_dir(args.out)
    logging.getLogger("synthesis").setLevel(max(logging.getLogger().level, logging.INFO))
    try:
        result = synthesize(config, args.out, progress=not args.no_progress)
    except ValueError as error:
        print(f"stateguard synthesize: {error}", file=sys.stderr)
        return 2
    print(summary_table(result))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("synthesize", help="counterfactual synthesis of the manager's SFT data")
    add_arguments(parser)
    parser.set_defaults(func=main)
