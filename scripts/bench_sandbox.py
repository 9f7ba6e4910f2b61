"""Benchmark the sandbox against a jupyter ipykernel round trip.

    python scripts/bench_sandbox.py            # defaults: --n 50, isolation bwrap when available
    python scripts/bench_sandbox.py --n 5 --isolation none --no-ipykernel

Prints a small table, then one JSON line (the last line) with ``cell_ms_p50``, ``ipykernel_cell_ms_p50``,
``speedup_vs_ipykernel``, ``kernel_start_ms_p50``, ``probe_ms_p50`` and more. A checkpoint's fork is deferred to the
next cell, so it is measured with that cell against a plain cell in the same run: ``checkpoint_plus_cell_ms_p50``,
``plain_cell_ms_p50``, ``checkpoint_plus_cell_vs_plain_cell`` and ``checkpoint_ms_p50`` (the median added cost);
``restore_*`` likewise. ``verdict_cold_ms_p50`` (export of the 1M-row frame + the clean verifier's verdict, the first
probe after a cell), ``verdict_cached_ms_p50`` (a later probe before the next cell), ``probe_in_fork_ms_p50`` (the old
probe in a fork of the worker's kernel, same run) and their ratios ``verdict_*_vs_fork``; the check reads one column
(only that column is exported), ``verdict_cold_full_ms_p50`` is the cold verdict of a check reading the whole frame.
``spec_aggregate_cold_ms_p50`` and ``spec_filter_cold_ms_p50``: typed check specs (``harness.checks``, a total and a
filter) compiled and run as cold clean verdicts on the same frame, export included.
"""

from __future__ import annotations

import argparse
import json
import logging

from harness.sandbox.bench import format_table, run_benchmark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=50, help="iterations per measurement (default 50)")
    parser.add_argument(
        "--isolation",
        choices=["bwrap", "none"],
        default=None,
        help="sandbox isolation (default: bwrap when installed, else none)",
    )
    parser.add_argument("--no-ipykernel", action="store_true", help="skip the jupyter ipykernel reference")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be >= 1, got {args.n}")
    logging.basicConfig(level=logging.WARNING)
    metrics = run_benchmark(args.n, args.isolation, with_ipykernel=not args.no_ipykernel)
    print(format_table(metrics))
    print(json.dumps(metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
