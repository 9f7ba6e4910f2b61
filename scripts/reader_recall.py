"""Spec recall and precision of the question reader (:mod:`harness.manager.reader`) against the gold's specs.

    python scripts/reader_recall.py --config configs/synthesis/default.yaml --split validation [--question-writer b]

Generates the tasks of the synthesis config (the ``validation`` split by default: the same task ids
:func:`synthesis.export.split_tasks` puts there), runs each task's reference code once in this process to learn the
variables every turn writes (names, kinds, frame columns: what ``check_execution`` lists; the slots are never read
for the reader), and reads every turn with :func:`harness.manager.reader.read_turn`, the earlier turns noted as the
``read`` policy notes them. The gold's specs are the ones synthesis writes for the turn from its slots
(:func:`gold_specs`).

Match rule (:func:`harness.evaluation.spec_metrics.spec_key`, the evaluation's): a reader spec matches a gold spec of
the same kind when the key fields of that kind (:data:`~harness.evaluation.spec_metrics.KEY_FIELDS`) are equal
(numbers compared as numbers, lists as sets; sources and tolerances left out); each gold spec is matched at most once.
Per kind: recall = matched gold specs / gold specs, precision = matched reader specs / reader specs. Prints a table and
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from harness.checks.spec import CheckSpec
from harness.evaluation.spec_metrics import match_counts
from harness.manager.reader import NotedTurn, Variable, read_turn, variable_kind

logger = logging.getLogger("reader_recall")


# ---------------------------------------------------------------- tasks, variables and the gold
def split_task_ids(config: Any, split: str) -> list[tuple[Any, str]]:
    """``(job, task id)`` of the generated tasks of ``config`` in ``split`` (validation | train | all)."""
    from synthesis.driver import plan_jobs
    from synthesis.export import split_tasks

    jobs, skipped = plan_jobs(config)
    for line in skipped:
        logger.warning("%s", line)
    ids = [job.task_id for job in jobs]
    validation = split_tasks(ids, config.validation_fraction, config.seed)
    keep = {"all": set(ids), "validation": validation, "train": set(ids) - validation}[split]
    return [(job, job.task_id) for job in jobs if job.task_id in keep]


def turn_variables(spec: Any) -> list[tuple[Variable, ...]]:
    """Per turn, the variables its reference code wrote (``TurnSpec.writes``), with kinds and frame columns, from one
    in-process run of the reference code over the task's tables."""
    from synthesis.domains.writer import write_public

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        public = write_public(spec, Path(tmp))
        space: dict[str, Any] = {"pd": pd, "BASE_PATH": str(public), "print_result": lambda _: None}
        for turn in spec.turns:
            exec(compile(turn.code, f"turn {turn.turn_id}", "exec"), space)  # noqa: S102 - the task's reference code
            variables = []
            for name in turn.writes:
                value = space.get(name)
                kind = variable_kind(type(value).__name__)
                columns = tuple(map(str, value.columns)) if isinstance(value, pd.DataFrame) else ()
                variables.append(Variable(name, kind, columns))
            out.append(tuple(variables))
    return out


def gold_specs(task: Any) -> dict[str, list[CheckSpec]]:
    """The gold's specs per turn id: the specs of :func:`synthesis.checks.task_checks` (the turn's stated
    requirements, its standing revisions and its public constraints restated), each distinct spec once (the gold
    manager runs each once)."""
    from synthesis.checks import task_checks

    out = {}
    for turn_id, checks in task_checks(task).items():
        unique = {json.dumps(c.spec.to_dict(), sort_keys=True): c.spec for c in checks}
        out[turn_id] = list(unique.values())
    return out


# ---------------------------------------------------------------- the measurement
def measure(config: Any, split: str, limit: int | None = None, strict: bool = False) -> dict[str, Any]:
    """Recall and precision per kind over the turns of ``split`` (at most ``limit`` tasks); ``strict``: sources and
    stated decimals must agree too (:data:`~harness.evaluation.spec_metrics.STRICT_FIELDS`)."""
    from synthesis.driver import _spec_of

    totals = {"gold": Counter(), "read": Counter(), "matched": Counter()}
    tasks = split_task_ids(config, split)[:limit]
    n_turns = 0
    for job, task_id in tasks:
        writer = getattr(config, "question_writer", None)
        spec = _spec_of(job) if writer is None else _spec_of(job, writer)
        variables = turn_variables(spec)
        gold = gold_specs(spec)
        noted: list[NotedTurn] = []
        for turn, written in zip(spec.turns, variables, strict=True):
            constraints = [text for text, _ in turn.constraints]
            read = read_turn(turn.question, turn.context, written, noted, constraints)
            g, r, m = match_counts(read, gold.get(turn.turn_id, []), strict)
            totals["gold"] += g
            totals["read"] += r
            totals["matched"] += m
            noted.append(NotedTurn(turn.turn_id, turn.question, turn.context, written))
            n_turns += 1
            logger.debug("task %s turn %s: read %s gold %s", task_id, turn.turn_id, read, gold.get(turn.turn_id))
    kinds = sorted(set(totals["gold"]) | set(totals["read"]))
    per_kind = {
        kind: {
            "gold": totals["gold"][kind],
            "read": totals["read"][kind],
            "matched": totals["matched"][kind],
            "recall": _ratio(totals["matched"][kind], totals["gold"][kind]),
            "precision": _ratio(totals["matched"][kind], totals["read"][kind]),
        }
        for kind in kinds
    }
    all_matched = sum(totals["matched"].values())
    return {
        "split": split,
        "question_writer": getattr(config, "question_writer", None),
        "strict": strict,
        "tasks": len(tasks),
        "turns": n_turns,
        "gold": sum(totals["gold"].values()),
        "read": sum(totals["read"].values()),
        "matched": all_matched,
        "recall": _ratio(all_matched, sum(totals["gold"].values())),
        "precision": _ratio(all_matched, sum(totals["read"].values())),
        "per_kind": per_kind,
    }


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def table(result: dict[str, Any]) -> str:
    """The per-kind table of :func:`measure`'s result."""
    rows = [f"{'kind':<16} {'gold':>5} {'read':>5} {'match':>5} {'recall':>7} {'precision':>9}"]
    for kind, row in result["per_kind"].items():
        rows.append(
            f"{kind:<16} {row['gold']:>5} {row['read']:>5} {row['matched']:>5} {_show(row['recall']):>7} "
            f"{_show(row['precision']):>9}"
        )
    rows.append(
        f"{'all':<16} {result['gold']:>5} {result['read']:>5} {result['matched']:>5} {_show(result['recall']):>7} "
        f"{_show(result['precision']):>9}"
    )
    return "\n".join(rows)


def _show(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    from synthesis.config import SynthesisConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/synthesis/default.yaml", help="A synthesis config (YAML).")
    parser.add_argument("--split", default="validation", choices=("validation", "train", "all"))
    parser.add_argument("--limit", type=int, default=None, help="At most this many tasks of the split.")
    parser.add_argument(
        "--question-writer", choices=("a", "b"), default=None, help="The config's question_writer (default: its own)."
    )
    parser.add_argument("--strict", action="store_true", help="Sources and stated decimals must agree too.")
    parser.add_argument("--debug", action="store_true", help="Log each turn's reader and gold specs.")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="%(message)s")
    overrides = {} if args.question_writer is None else {"question_writer": args.question_writer}
    if overrides and "question_writer" not in SynthesisConfig.__dataclass_fields__:
        parser.error("--question-writer: this synthesis config has no question_writer field")
    config = SynthesisConfig.from_yaml(args.config, **overrides)
    result = measure(config, args.split, args.limit, args.strict)
    sys.stdout.write(table(result) + "\n")
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
