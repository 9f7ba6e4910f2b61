"""``stateguard synthesize --config configs/synthesis/default.yaml --out DIR`` (entry point ``synthesis.cli``).

The flags are the fields of :class:`~synthesis.config.SynthesisConfig` (:mod:`harness.config_cli`: the defaults, then
the ``--config`` YAML file, then the flags, e.g. ``--workers 4``, ``--seed 7``, ``--domains commerce energy``;
every value's type is checked and all problems are reported at once), plus ``--out`` (required) and
``--no-progress``. ``--executor ray`` runs the tasks as Ray tasks (``--address HOST:6379`` of a running cluster, or
none: a local Ray for the run) with the same outputs (docs/scaling-out.md). Checks that ``--out`` is a writable
folder (created when missing), then runs :func:`synthesis.driver.synthesize` and prints the closing summary table. A
killed run, re-run with the same ``--out``, continues from its shards. Bad input (a missing Ray, an unreachable
``--address`` among it, checked before any work) prints one line on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys

from harness.cli import prepare_out_dir
from harness.config_cli import add_config_arguments, parse_config
from synthesis.config import SynthesisConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, SynthesisConfig, what="synthesis", example="configs/synthesis/smoke.yaml")
    parser.add_argument("--out", required=True, help="output folder (shards, dataset, episodes, card, stats)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    from synthesis.driver import summary_table, synthesize

    try:
        (config,) = parse_config(args)
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
    parser = subparsers.add_parser(
        "synthesize",
        help="counterfactual synthesis of the manager's SFT data",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=main)
