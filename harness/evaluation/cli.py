"""``stateguard evaluate``: run manager variants on a suite and report accuracy, DCR, repairs and manager statistics.

    stateguard evaluate --suite heldout-seeds --worker scripted --manager none,rule --out runs/eval/heldout
    stateguard evaluate --suite runs/synth --manager none,rule,window-rule:3 --runs 1 --out runs/eval/synth
    stateguard evaluate --suite dabench-dev --worker openai:http://localhost:8000/v1 --manager none,llm:URL ...
    stateguard evaluate --suite runs/tasks/longds --faults other/faults.jsonl --manager none,rule --out runs/eval/x

``--manager`` takes a comma-separated list of variants (the grammar of :data:`harness.manager.policies.POLICY_GRAMMAR`:
``none``, ``rule``, ``windowed:K:URL``, ``llm:URL`` ...); all run on the same episodes and every pair is compared
(``b - a``: list the baseline first). Re-running with the same ``--out`` resumes: finished episodes are not re-run. The
last line printed is a JSON summary (per variant: task/turn accuracy, DCR, repair precision/recall). ``--out`` (and
``--cache`` for a named suite) is checked writable, and created, before any episode runs. The manager sees each turn's
question, context and constraint texts: ``--oracle-relations`` adds the task's dependency graph and
``--executable-constraints`` the constraints' code (oracles a real benchmark does not give: results.json's ``oracles``
and report.md say so, loudly for a held-out suite). Exit code 0 when the
evaluation ran, 2 for bad input (the message names the flag and the fix), 3 when the suite is unavailable (e.g.
DABench dev is not in ../shared).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli import prepare_out_dir
from harness.evaluation.suite import DEFAULT_CACHE, SUITES, SuiteUnavailableError
from harness.run import add_oracle_arguments

EXIT_OK, EXIT_INPUT, EXIT_SUITE_MISSING = 0, 2, 3


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="evaluate manager variants on a suite: accuracy with bootstrap CI, DCR, repairs, report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(parser)
    parser.set_defaults(func=evaluate_command)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", required=True, help=f"a suite folder, or a name: {', '.join(SUITES)}")
    parser.add_argument("--worker", default="scripted", help="scripted | openai:URL | hf:PATH (default: scripted)")
    parser.add_argument("--manager", default="none,rule", help="comma-separated variants (default: none,rule)")
    parser.add_argument("--faults", default=None, help="faults.jsonl replacing the suite's faults (scripted worker)")
    parser.add_argument("--runs", type=int, default=1, help="repetitions of every episode (default 1)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of the suite")
    parser.add_argument("--out", required=True, help="output folder (results.json, report.md, episodes/)")
    parser.add_argument("--cache", default=str(DEFAULT_CACHE), help="where named suites are built (reused)")
    parser.add_argument("--isolation", choices=["bwrap", "none"], default="bwrap", help="sandbox isolation")
    parser.add_argument("--flow", choices=["turn", "segment"], default=None, help="review cadence (default: by kind)")
    add_oracle_arguments(parser)
    parser.add_argument("--manager-max-tokens", type=int, default=None, help="cap on one manager reply (llm)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10,000)")
    parser.add_argument("--no-report", action="store_true", help="write results.json only")


def evaluate_command(args: argparse.Namespace) -> int:
    from harness.evaluation.run import EvaluationConfig, EvaluationError, run_evaluation
    from harness.tasks import TaskConfigError
    from harness.worker.faults import FaultFileError

    try:
        config = EvaluationConfig(
            suite=args.suite,
            out=args.out,
            worker=args.worker,
            managers=[m.strip() for m in args.manager.split(",") if m.strip()],
            faults=args.faults,
            runs=args.runs,
            limit=args.limit,
            cache=args.cache,
            isolation=args.isolation,
            flow=args.flow,
            oracle_relations=args.oracle_relations,
            executable_constraints=args.executable_constraints,
            manager_max_tokens=args.manager_max_tokens,
            seed=args.seed,
            n_resamples=args.resamples,
            report=not args.no_report,
        )
        prepare_out_dir(args.out)
        if args.suite in SUITES and not Path(args.suite).is_dir():
            prepare_out_dir(args.cache, "--cache")  # a named suite is built there
        results = run_evaluation(config)
    except SuiteUnavailableError as exc:
        print(f"stateguard evaluate: suite unavailable: {exc}", file=sys.stderr)
        return EXIT_SUITE_MISSING
    except (EvaluationError, FaultFileError, TaskConfigError, ValueError) as exc:
        print(f"stateguard evaluate: {exc}", file=sys.stderr)
        return EXIT_INPUT
    keys = ("task_accuracy", "turn_accuracy", "dcr", "repair_precision", "repair_recall", "simulated")
    summary = {
        "out": args.out,
        "variants": {name: {k: v[k] for k in keys} for name, v in results["variants"].items()},
        "comparisons": [{k: c[k] for k in ("a", "b", "turn_accuracy_diff", "ci95")} for c in results["comparisons"]],
    }
    print(json.dumps(summary))
    return EXIT_OK
