"""The study's record: ``results.json``, ``timing.json``, ``report.md`` and the plots of one run, written to a folder.

:func:`build_results` turns each arm's evaluation (the records ``stateguard evaluate`` wrote over the frozen test set,
:func:`load_arm_records`) into the results dict: the arms in report order, each with its kind (baseline, oracle,
model), description, settings (the manager spec and the ``manager.json`` it was served with, :func:`arm_settings`)
and metrics (:mod:`training.study.episode_metrics`); the paired comparisons; the targets
(:mod:`training.study.study_targets`); the test set's summary (id, hash, how many editions have seen it); the
decision-point diagnostic (per arm, :func:`training.study.decision_metrics.decision_metrics` of its rows, the digest
rule included); the timing. :func:`write_record` writes it (:mod:`training.study.record_render` renders the report and
plots). All worker numbers are SIMULATED: the scripted worker replays reference or faulty programs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.evaluation.stats import N_RESAMPLES
from harness.evaluation.summary import TaskInfo
from harness.manager.episode import EpisodeRecord
from training.study.episode_metrics import ORACLE_ARMS, evaluate_arms
from training.study.record_render import PLOTS
from training.study.study_targets import targets

MANAGER_FILE = "manager.json"
"""What a checkpoint folder holds of its serving settings (read here as plain JSON, reported verbatim)."""
ARM_ORDER = ("none", "rule", "read", "gold-specs", "prompt", "sft", "sft-dapo")
"""The report's order: the baselines (the oracle among them, labelled), then the models; other arms follow."""
BASELINE_ARMS = ("none", "rule", "read")
RESULTS_FILE, TIMING_FILE, REPORT_FILE = "results.json", "timing.json", "report.md"


def arm_kind(arm: str) -> str:
    """``baseline`` (no model), ``oracle`` (reads the gold's specs: an upper bound) or ``model``."""
    return "oracle" if arm in ORACLE_ARMS else "baseline" if arm in BASELINE_ARMS else "model"


def arm_label(arm: str) -> str:
    """The arm's name as every table shows it: an oracle arm says so."""
    return f"{arm} (ORACLE upper bound)" if arm_kind(arm) == "oracle" else arm


def ordered(arms: Iterable[str]) -> list[str]:
    """``arms`` in :data:`ARM_ORDER`, the others after them in their given order."""
    arms = list(arms)
    return [a for a in ARM_ORDER if a in arms] + [a for a in arms if a not in ARM_ORDER]


def load_arm_records(eval_out: str | Path, variant: str) -> list[EpisodeRecord]:
    """The records of ``variant`` in an evaluation folder ``eval_out`` (``OUT/episodes/<variant>.jsonl``; none when
    absent). Errored and repeated records are dropped later, by :func:`training.study.episode_metrics.arm_facts`."""
    from harness.evaluation.evaluate import read_variant, variant_file

    return read_variant(variant_file(Path(eval_out), variant))


def testset_tasks(suite: Any) -> dict[str, TaskInfo]:
    """Task id -> :class:`~harness.evaluation.summary.TaskInfo` of every task of ``suite`` (a
    :class:`harness.evaluation.suite.Suite`, e.g. from ``resolve_suite``), as ``stateguard evaluate`` builds them."""
    from harness.tasks import load_task

    dirs = {spec.task_id: spec.task_dir for spec in suite.episodes(with_faults=True)}
    return {task_id: TaskInfo.of(load_task(folder)) for task_id, folder in dirs.items()}


def arm_settings(manager: str, checkpoint: str | Path | None = None, **extra: Any) -> dict[str, Any]:
    """An arm's settings for the record: its ``--manager`` spec, its checkpoint and the ``manager.json`` found there
    (verbatim; None when the folder has none or there is no checkpoint), plus ``extra`` (e.g. ``episodes_limit``)."""
    found = None
    if checkpoint is not None and (Path(checkpoint) / MANAGER_FILE).is_file():
        found = json.loads((Path(checkpoint) / MANAGER_FILE).read_text())
    return {"manager": manager, "checkpoint": None if checkpoint is None else str(checkpoint),
            MANAGER_FILE: found, **extra}  # fmt: skip


def build_results(
    records: Mapping[str, Iterable[EpisodeRecord]],
    tasks: Mapping[str, TaskInfo],
    *,
    question: str,
    testset: Mapping[str, Any],
    settings: Mapping[str, Mapping[str, Any]],
    timing: Mapping[str, float],
    descriptions: Mapping[str, str] | None = None,
    decisions: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    unavailable: Mapping[str, str] | None = None,
    notes: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    pairs: Sequence[tuple[str, str]] | None = None,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> dict[str, Any]:
    """The results dict of the study (module docstring).

    Args:
        records: arm -> the records its evaluation wrote over the frozen test set (:func:`load_arm_records`).
        tasks: task id -> :class:`~harness.evaluation.summary.TaskInfo` of every task of the test set.
        question: the question the study answers (the report's first line).
        testset: the frozen test set's summary: ``id``, ``sha256``, ``editions_seen`` (this edition included),
            ``domain``, ``question_writer``, ``seed``, ``path`` ... (shown as given).
        settings: arm -> :func:`arm_settings`.
        timing: stage -> seconds.
        descriptions: arm -> one line (what it is).
        decisions: arm -> its decision-point rows (:mod:`training.study.decisions`), the digest rule's included.
        unavailable: arm -> why it did not run.
        notes: target id -> the measured reason of a missed target (:mod:`training.study.study_targets`).
        config: the study config as run (recorded as given).
        pairs: the ``(a, b)`` comparisons; default every arm against ``none`` and the named ones.
    """
    from training.study.decision_metrics import decision_metrics

    evaluated = evaluate_arms(records, tasks, pairs=pairs, seed=seed, n_resamples=n_resamples)
    played = {arm: decision_metrics(rows, seed, n_resamples) for arm, rows in (decisions or {}).items() if rows}
    arms = {
        arm: {
            "kind": arm_kind(arm),
            "label": arm_label(arm),
            "description": (descriptions or {}).get(arm, ""),
            "settings": dict(settings.get(arm, {})),
            "metrics": evaluated["metrics"][arm],
        }
        for arm in ordered(evaluated["metrics"])
    }
    results: dict[str, Any] = {
        "question": question,
        "simulated": True,
        "worker": "scripted: replays reference or faulty programs (SIMULATED)",
        "testset": {**testset, **_suite_counts(evaluated["metrics"])},
        "arms": arms,
        "comparisons": evaluated["comparisons"],
        "decisions": played or None,
        "unavailable": dict(unavailable or {}),
        "config": dict(config or {}),
        "timing": {**timing, "total": round(sum(v for k, v in timing.items() if k != "total"), 1)},
        "bootstrap": {"n_resamples": n_resamples, "seed": seed, "confidence": 0.95, "clusters": "tasks"},
    }
    results["targets"] = targets(results, notes)
    return results


def _suite_counts(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The test set's size as the arm with the most episodes played it (the baselines play it whole)."""
    if not metrics:
        return {"tasks": 0, "episodes": 0, "faulted_episodes": 0, "clean_episodes": 0}
    widest = max(metrics.values(), key=lambda m: m["episodes"])
    return {k: widest[k] for k in ("tasks", "episodes", "faulted_episodes", "clean_episodes")}


def write_record(out_dir: str | Path, results: Mapping[str, Any]) -> list[Path]:
    """``results.json``, ``timing.json``, ``report.md`` and the plots of ``results`` in ``out_dir`` (created);
    returns the paths written."""
    from training.study.record_render import render_report, write_plots

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / RESULTS_FILE, out / TIMING_FILE, out / REPORT_FILE]
    paths[0].write_text(json.dumps(results, indent=2, sort_keys=False, default=str) + "\n")
    paths[1].write_text(json.dumps(results.get("timing", {}), indent=2) + "\n")
    paths[2].write_text(render_report(results))
    return paths + write_plots(out, results)


def study_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The scalars a tracker gets, ``study/<arm>/<metric>``: every number of each arm's metrics (a metric with an
    interval gives its value), nested names joined with ``/`` (``decisions_by_group/heldout/repair_f1``); missing
    values (None) are left out."""
    from harness.tracking import tag

    metrics: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and "value" in value and "ci95" in value:
            value = value["value"]
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}/{tag(str(key))}", inner)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            metrics[prefix] = float(value)

    for arm, entry in results["arms"].items():
        walk(f"study/{tag(arm)}", entry.get("metrics", {}))
    return metrics


def track_study(out: Path, results: dict[str, Any], report_to: str, run_name: str) -> None:
    """Log :func:`study_metrics` and the plots written in ``out`` to one run of ``report_to`` (nothing for
    ``none``), project ``stateguard``."""
    from harness.tracking import open_tracker

    tracker = open_tracker(report_to, project="stateguard", name=run_name, out=out, config=results.get("config"))
    if tracker is None:
        return
    try:
        tracker.log(study_metrics(results))
        plots = {f"study/plots/{Path(name).stem}": out / name for name in PLOTS if (out / name).is_file()}
        if plots:
            tracker.log_images(plots)
    finally:
        tracker.finish()
