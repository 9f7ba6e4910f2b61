"""The ``stateguard`` command line.

Sub-commands are plugins: each package registers ``name = "module:register"`` under the entry-point group
``stateguard.commands`` in ``pyproject.toml``, and ``register(subparsers)`` adds its argparse sub-parser with a
``func`` default that returns an exit code. The harness therefore never imports the later layers (``training``,
``synthesis``) itself; they plug in.

    stateguard tasks validate PATH
    stateguard tasks import dabench --src ../shared/benchmarks/dabench-dev --out runs/tasks/dabench
    stateguard tasks grade TASK_DIR --answer "@mean_fare[34.65]"
    stateguard run --task retail-sales --worker scripted --manager rule --faults runs/faults.jsonl
    stateguard evaluate --suite heldout-seeds --manager none,rule --out runs/eval
    stateguard serve --checkpoint runs/sft-tiny-cpu --cpu
    stateguard bench run --suite dabench-dev --workflow react,direct,pipeline,search --model URL --out runs/bench
    stateguard view runs/synth/episodes/gold.jsonl --out episode.html
    stateguard demo --out runs/demo
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points

from harness import __version__

ENTRY_POINT_GROUP = "stateguard.commands"

# Commands of the harness itself. Used when the distribution's entry points are not installed (running from a
# source checkout without `pip install -e .`); installed entry points of the same name take precedence.
BUILTIN_COMMANDS: dict[str, str] = {
    "tasks": "harness.tasks.cli:register",
    "demo": "harness.demo:register",
    "run": "harness.run:register",
    "evaluate": "harness.evaluation.cli:register",
    "serve": "harness.serving:register",
    "bench": "harness.workflow.bench:register",
    "view": "harness.viewer.cli:register",
}


def _load(ref: str) -> Callable[[argparse._SubParsersAction], None]:
    module_name, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def discover_commands() -> dict[str, Callable[[argparse._SubParsersAction], None] | str]:
    """Name -> ``register`` function (or its ``module:function`` reference, loaded lazily)."""
    commands: dict[str, Callable | str] = dict(BUILTIN_COMMANDS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        commands[ep.name] = ep.value
    return commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stateguard",
        description="StateGuard: train and evaluate a state manager that supervises data-science agents.",
    )
    parser.add_argument("--version", action="version", version=f"stateguard {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-v info, -vv debug)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, register in sorted(discover_commands().items()):
        try:
            (_load(register) if isinstance(register, str) else register)(subparsers)
        except ImportError as exc:  # a plugin whose optional dependencies are missing must not break the others
            sub = subparsers.add_parser(name, help=f"(unavailable: {exc})")
            sub.set_defaults(func=lambda _args, _exc=exc, _name=name: _unavailable(_name, _exc))
    return parser


def _unavailable(name: str, exc: ImportError) -> int:
    print(f"stateguard {name}: unavailable because an import failed: {exc}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
