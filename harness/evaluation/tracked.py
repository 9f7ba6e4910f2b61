"""The summary metrics an evaluation logs to a tracker (``report_to``): :func:`tracked_metrics` and
:func:`track_results`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.tracking import open_tracker, tag

logger = logging.getLogger(__name__)

TRACKED = (
    "task_accuracy",
    "turn_accuracy",
    "dcr",
    "repair_precision",
    "repair_recall",
    "mean_score",
    "relation_accuracy",
)
"""The per-variant numbers of ``results.json`` that :func:`tracked_metrics` logs (when not null)."""


def tracked_metrics(results: Mapping[str, Any]) -> dict[str, float]:
    """The scalars logged to a tracker, namespaced ``eval/<variant>/<name>``: the :data:`TRACKED` numbers, the
    fault detection and spec scores (``checks/detection_rate``, ``checks/detectable_detection_rate``,
    ``checks/false_repair_rate``, ``checks/spec_recall``, ``checks/spec_precision``; each when defined), the
    manager's ``legal_action_rate`` (legal actions over all actions; absent without actions), ``illegal_actions``,
    ``states_per_episode``, ``activations_per_episode``, ``repairs`` (light + heavy), ``n_episodes`` and
    ``n_errored``; and per comparison ``eval/<b>_vs_<a>/turn_accuracy_diff``."""
    metrics: dict[str, float] = {}
    for name, variant in results["variants"].items():
        prefix = f"eval/{tag(name)}"
        for key in TRACKED:
            value = variant.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                metrics[f"{prefix}/{key}"] = float(value)
        nested = {
            "detection_rate": (variant.get("fault_detection") or {}).get("detection_rate"),
            "false_repair_rate": (variant.get("fault_detection") or {}).get("false_repair_rate"),
            "detectable_detection_rate": ((variant.get("fault_detection") or {}).get("detectable") or {}).get(
                "detection_rate"
            ),
            "spec_recall": (variant.get("spec_scores") or {}).get("recall"),
            "spec_precision": (variant.get("spec_scores") or {}).get("precision"),
        }
        for key, value in nested.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                metrics[f"{prefix}/checks/{key}"] = float(value)
        manager = variant["manager"]
        actions = sum(manager["tool_calls"].values()) + sum(manager["control_actions"].values())
        if actions:
            metrics[f"{prefix}/manager/legal_action_rate"] = 1.0 - manager["illegal_actions"] / actions
        metrics[f"{prefix}/manager/illegal_actions"] = float(manager["illegal_actions"])
        metrics[f"{prefix}/manager/states_per_episode"] = float(manager["states_per_episode"])
        metrics[f"{prefix}/manager/activations_per_episode"] = float(manager["activations_per_episode"])
        metrics[f"{prefix}/manager/repairs"] = float(sum(manager["repairs"].values()))
        metrics[f"{prefix}/n_episodes"] = float(variant["n_episodes"])
        metrics[f"{prefix}/n_errored"] = float(variant.get("n_errored", 0))
    for comparison in results["comparisons"]:
        if comparison.get("turn_accuracy_diff") is not None:
            key = f"eval/{tag(comparison['b'])}_vs_{tag(comparison['a'])}/turn_accuracy_diff"
            metrics[key] = float(comparison["turn_accuracy_diff"])
    return metrics


def track_results(out: Path, results: Mapping[str, Any], config: Any) -> None:
    """Log :func:`tracked_metrics` and the report's plots (when written) to one run of ``config.report_to``."""
    from harness.evaluation.report import PLOTS

    name = config.run_name or f"eval-{out.resolve().name}"
    tracker = open_tracker(config.report_to, project=config.project, name=name, out=out, config=results["config"])
    if tracker is None:
        return
    try:
        tracker.log(tracked_metrics(results))
        plots = {f"eval/plots/{Path(p).stem}": out / p for p in PLOTS if (out / p).is_file()}
        if config.report and plots:
            tracker.log_images(plots)
    finally:
        tracker.finish()
    logger.info("logged %d metrics and the plots to %s (project %s, run %s)", len(tracked_metrics(results)),
                config.report_to, config.project, name)  # fmt: skip
