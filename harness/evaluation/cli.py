"""``stateguard evaluate``: run manager variants on a suite and report accuracy, DCR, repairs and manager statistics.

    stateguard evaluate --config configs/eval/smoke.yaml --out runs/eval/smoke
    stateguard evaluate --config configs/eval/heldout-seeds.yaml --managers none rule llm:http://localhost:8000/v1
    stateguard evaluate --suite heldout-seeds --worker scripted --manager none,rule --out runs/eval/heldout
    stateguard evaluate --suite runs/synth --manager none,rule,window-rule:3 --runs 1 --out runs/eval/synth
    stateguard evaluate --suite dabench-dev --worker openai:http://localhost:8000/v1 --manager none,llm:URL ...
    stateguard evaluate --suite runs/tasks/longds --faults other/faults.jsonl --manager none,rule --out runs/eval/x

The flags are the fields of :class:`~harness.evaluation.evaluate.EvaluationConfig` (:mod:`harness.config_cli`: the
dataclass defaults, then the ``--config`` YAML file, then the flags; ``--field_name`` or ``--field-name``; bools
also ``--no-field-name``; lists take several values, ``--managers none rule``). Two spellings are kept from before:
``--manager none,rule`` (one comma-separated value for ``managers``) and ``--resamples`` (``n_resamples``).
Every value's type is checked; errors name the file or the flag and the fix. ``--workers 16`` plays 16 episodes at
a time on threads (for managers and workers behind an endpoint; same outputs); ``--executor ray`` plays the episodes
as Ray tasks (``--address HOST:6379`` of a running cluster, or none: a local Ray for the run); ``--report-to
trackio|tensorboard|wandb`` logs the summary metrics and plots to that tracker (see docs/scaling-out.md).

``--manager`` takes a comma-separated list of variants (the grammar of :data:`harness.specs.MANAGER_GRAMMAR`: ``none``,
``rule``, ``windowed:K:URL``, ``llm:URL`` ...); all run on the same episodes and every pair is compared (``b - a``:
list the baseline first). Re-running with the same ``--out`` resumes: finished episodes are not re-run, errored ones
are; an ``--out`` holding another evaluation's episodes (another faults file, worker, manager spec, runtime option,
task folder or code version: ``OUT/fingerprint.json``) is refused naming what changed, and ``--overwrite`` starts
fresh. One evaluation at a time per ``--out`` (a lock; a second is refused). Every endpoint named by ``--manager`` and
``--worker`` must answer ``GET /models`` before any episode runs. An ``--out`` inside a task folder is refused.
Progress (episodes done / total, ETA) goes to stderr: a bar on a terminal, plain lines otherwise. The output ends with
a table per arm (episodes, errored, task and turn accuracy, DCR with its n, repair precision / recall, the difference
versus the first arm with its 95 % CI); every figure is in ``OUT/results.json``. ``--out`` (and ``--cache`` for a named
suite) is checked writable, and created, before any episode runs. The manager sees each turn's question, context and
constraint texts: ``--oracle-relations`` adds the task's dependency graph and ``--executable-constraints`` the
constraints' code, ``--oracle-checks`` gives the oracle arm ``hier-checks:gold`` the gold's check specs (oracles a real
benchmark does not give: results.json's ``oracles`` and report.md say so, loudly for a held-out suite). Exit code 0
when the evaluation ran, 2 for bad input (the message names the flag or the file and the fix; also a dead endpoint, a
locked or mismatched ``--out``), 3 when the suite is unavailable (e.g. the DABench dev set is not on this machine), 4
when some episodes errored (an exception, or a manager backend that failed during them: recorded as the episode's
``error``, counted per variant as ``n_errored``, left out of the metrics).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from harness.cli import prepare_out_dir
from harness.config_cli import add_config_arguments, given_flag, parse_config
from harness.evaluation.evaluate import RESULTS_FILE, EvaluationConfig
from harness.evaluation.report import REPORT_FILE, dcr_n
from harness.evaluation.suite import SuiteUnavailableError
from harness.run_guard import check_out_outside, enclosing_task_folder
from harness.specs import parse_suite_spec

EXIT_OK, EXIT_INPUT, EXIT_SUITE_MISSING, EXIT_ERRORED = 0, 2, 3, 4
EXAMPLE = "configs/eval/smoke.yaml"
ALIASES = {"managers": "--manager", "n_resamples": "--resamples"}
"""The flags ``stateguard evaluate`` had before its config (both still work)."""


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
    """``--config FILE`` and one flag per :class:`EvaluationConfig` field (with the aliases of :data:`ALIASES`)."""
    add_config_arguments(parser, EvaluationConfig, what="evaluation", example=EXAMPLE, aliases=ALIASES)


def out_flag(args: argparse.Namespace, name: str) -> str:
    """How messages name the output field ``name``: the flag that set it, else the field of the config file."""
    return given_flag(args, name) or (f"{name} (of {args.config})" if args.config else f"--{name}")


def evaluate_command(args: argparse.Namespace) -> int:
    from harness.evaluation.evaluate import EvaluationError, run_evaluation
    from harness.tasks import TaskConfigError
    from harness.worker.faults import FaultFileError

    try:
        (config,) = parse_config(args)
        suite = parse_suite_spec(config.suite, flag=given_flag(args, "suite") or "suite=")
        task = enclosing_task_folder(config.out)  # before --out is created there
        if task is not None:
            check_out_outside(config.out, [task], out_flag(args, "out"))
        prepare_out_dir(config.out, out_flag(args, "out"))
        if suite.named:
            prepare_out_dir(config.cache, out_flag(args, "cache"))  # a named suite is built there
        results = run_evaluation(config)
    except SuiteUnavailableError as exc:
        print(f"stateguard evaluate: suite unavailable: {exc}", file=sys.stderr)
        return EXIT_SUITE_MISSING
    except (EvaluationError, FaultFileError, TaskConfigError, ValueError, ImportError) as exc:
        print(f"stateguard evaluate: {exc}", file=sys.stderr)
        return EXIT_INPUT
    print(arms_table(results, config.out))
    errored = {name: n for name, n in results["errored"].items() if n}
    if errored:
        shown = ", ".join(f"{name}: {n}" for name, n in errored.items())
        print(
            f"stateguard evaluate: {sum(errored.values())} episode(s) errored ({shown}); they are left out of the "
            f"metrics (see 'error' in {config.out}/episodes/*.jsonl) and played again by a re-run with this --out.",
            file=sys.stderr,
        )
        return EXIT_ERRORED
    return EXIT_OK


def arms_table(results: dict[str, Any], out: str | Path) -> str:
    """The end of ``stateguard evaluate``'s output: one row per arm (episodes, errored, task and turn accuracy with its
    95 % CI, DCR with its number of turns, repair precision / recall, the paired turn-accuracy difference versus the
    first arm with its 95 % CI), then where the results and the report are. Plain text: no colour codes."""
    names = list(results["variants"])
    baseline = names[0] if names else None
    paired = {c["b"]: c for c in results["comparisons"] if c["a"] == baseline}
    header = ["arm", "episodes", "errored", "task acc", "turn acc [95% CI]", "DCR (n)", "repair P / R"]
    header.append(f"vs {baseline} [95% CI]")
    rows = [header]
    for name, v in results["variants"].items():
        n = dcr_n(v)
        diff = paired.get(name)
        rows.append([
            name,
            str(v.get("n_episodes", "")),
            str(v.get("n_errored", 0)),
            _num(v.get("task_accuracy")),
            f"{_num(v.get('turn_accuracy'))} {_interval(v.get('turn_accuracy_ci95'))}",
            f"{_num(v.get('dcr'))} ({'n/a' if n is None else n})",
            f"{_num(v.get('repair_precision'))} / {_num(v.get('repair_recall'))}",
            "" if diff is None else f"{_num(diff['turn_accuracy_diff'], signed=True)} {_interval(diff['ci95'])}",
        ])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    suite = results.get("suite", {}).get("name", "?")
    simulated = " (SIMULATED worker: it replays reference programs)" if results.get("simulated") else ""
    report = Path(out) / REPORT_FILE
    lines = [f"suite {suite}{simulated}", *lines, f"results: {Path(out) / RESULTS_FILE}"]
    return "\n".join(lines + ([f"report: {report}"] if report.is_file() else []))


def _num(value: Any, *, signed: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _interval(bounds: Any) -> str:
    return "[n/a]" if not bounds or None in bounds else f"[{bounds[0]:.3f}, {bounds[1]:.3f}]"
