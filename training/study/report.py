"""The study's results, report and plots, from episode records, exact-match scores and trainer logs.

:func:`collect` gathers everything into the results dict (``results.json``), with each arm's metrics from
:mod:`training.study.metrics` (where every metric is defined), and checks the targets;
:func:`training.study.render.write_outputs` writes ``results.json``, ``report.md`` and the plots.
All worker numbers are SIMULATED: the scripted worker replays reference or faulty programs.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from harness.evaluation.report import fmt
from training.rl.temperature import PROBE_FILE
from training.study.layout import Study
from training.study.metrics import (
    arm_metrics,
    comparisons,
    decision_metrics,
    episode_facts,
    f1_contributions,
    metric_entry,
    paired,
    teacher_forced_repair_f1,
)
from training.study.plots import PLOTS

__all__ = [  # the report's own names, and the metrics under their historical import path
    "LEGAL_TARGET",
    "SFT_ARMS",
    "arm_metrics",
    "collect",
    "comparisons",
    "decision_metrics",
    "episode_facts",
    "f1_contributions",
    "metric_entry",
    "paired",
    "targets",
    "teacher_forced_repair_f1",
    "training_figures",
]

LEGAL_TARGET = 0.95
DAPO_ARMS = ("sft-dapo", "rl-only")
"""The arms trained by DAPO (their curves: reward, illegal-action rate, repair precision / recall)."""
SFT_ARMS = ("sft-lora", "sft-full", "sft-dapo", "hier")
"""The arms trained by SFT (sft-dapo after its SFT; hier on its own samples): the legal-action target is theirs."""
F1_TARGET, FALSE_REPAIR_TARGET = 0.8, 0.05
"""sft's stretch target on the held-out fault types: repair F1 at least this, false repairs at most that."""


# ---------------------------------------------------------------- collection
def training_figures(folder: Path) -> dict[str, Any]:
    """Loss (and, for RL, reward / clip / filtered-group) curves and the final metrics of one trained arm."""
    state_path, results_path = folder / "trainer_state.json", folder / "all_results.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    logs = state.get("log_history", [])
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    results["steps"] = state.get("global_step")
    probe_path = folder / PROBE_FILE
    probe = json.loads(probe_path.read_text()) if probe_path.is_file() else None
    curves: dict[str, list[list[float]]] = {}
    for entry in logs:
        step = entry.get("step")
        for key, value in entry.items():
            wanted = key in ("loss", "eval_loss", "reward", "action_name_nll") or key.startswith(
                ("rewards/", "clip", "dapo/", "manager/")
            )
            if wanted and isinstance(value, int | float) and step is not None:
                curves.setdefault(key, []).append([step, float(value)])
    return {"curves": curves, "results": results, **({"temperature_probe": probe} if probe else {})}


def collect(
    study: Study,
    *,
    data: dict[str, Any],
    trained: dict[str, dict[str, Any]],
    exact: dict[str, list[dict[str, Any]]],
    evaluation: dict[str, Any],
    timing: dict[str, float],
    decisions: dict[str, list[dict[str, Any]]] | None = None,
    margins: dict[str, dict[str, Any]] | None = None,
    calibration: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The study's results dict (written to ``results.json``)."""
    from harness.evaluation.evaluate import read_variant, variant_file
    from harness.evaluation.suite import resolve_suite
    from harness.tasks import load_task
    from synthesis.faults import BENIGN_TYPES
    from training.study.arms import ARMS

    config = study.config
    seed, n = config.seed, config.n_resamples
    suite = resolve_suite(str(study.eval_suite()), limit=config.eval_limit, fault_limit=config.eval_fault_limit)
    specs = {spec.key: spec for spec in suite.episodes(with_faults=True)}
    turn_ids = {s.task_id: [str(t.turn_id) for t in load_task(s.task_dir).turns] for s in specs.values()}
    facts: dict[str, list[dict[str, Any]]] = {}
    arms: dict[str, Any] = {}
    ran = [a for a in config.arms if "unavailable" not in trained.get(a, {})]
    for arm in ran:
        summary = evaluation["variants"].get(arm)  # None: the arm played no episodes (not in episode_arms)
        records = [] if summary is None else read_variant(variant_file(study.out / "eval", arm))
        records = [r for r in records if r.config["eval"]["key"] in specs and r.error is None]  # errored: not played
        facts[arm] = []
        for record in records:
            spec = specs[record.config["eval"]["key"]]
            benign = spec.fault is not None and spec.fault.fault_type in BENIGN_TYPES
            facts[arm].append(episode_facts(record, turn_ids[spec.task_id], spec.fault, benign))
        metrics = arm_metrics(facts[arm], exact.get(arm, []), seed, n)
        metrics.update(
            turn_accuracy={"value": summary["turn_accuracy"], "ci95": summary["turn_accuracy_ci95"]}
            if summary
            else {"value": None, "ci95": None},
            dcr=summary["dcr"] if summary else None,
            manager=summary["manager"] if summary else None,
            decisions=decision_metrics(decisions[arm], seed, n) if decisions and decisions.get(arm) else None,
            decisions_by_group={
                group: decision_metrics([r for r in decisions[arm] if r.get("group") == group], seed, n)
                for group in sorted({r.get("group", "") for r in decisions[arm]})
            }
            if decisions and decisions.get(arm)
            else None,
        )
        folder = trained.get(arm, {}).get("adapter") or trained.get(arm, {}).get("checkpoint")
        arms[arm] = {
            "description": ARMS[arm].description,
            "metrics": metrics,
            "training": {**training_figures(Path(folder)), "seconds": trained[arm].get("seconds")} if folder else None,
            "margins": {"split": margins[arm]["split"], **margins[arm]["summary"]} if arm in (margins or {}) else None,
            "calibration": (calibration or {}).get(arm),
        }
    results = {
        "simulated": True,
        "data": {
            split: {
                "trajectories": s["trajectories"],
                "samples": s["samples"]["total"],
                "samples_by_label": s["samples"]["by_label"],
                "faults_by_type": s["faults"]["kept_by_type"],
            }
            for split, s in data.items()
        },
        "heldout": {
            "suite": str(study.eval_suite()),
            "turns_per_task": config.eval_turns,
            "episodes": len(specs),
            "tasks": len(turn_ids),
            "fault_types_unseen_in_training": list(config.heldout_fault_types),
            "exact_match_samples": len(next(iter(exact.values()), [])),
            "decision_points": len(next(iter((decisions or {}).values()), [])),
            "decision_points_by_group": dict(
                sorted(Counter(r.get("group", "") for r in next(iter((decisions or {}).values()), [])).items())
            ),
            "decision_max_responses": config.decision_max_responses,
            "decision_takeover": config.decision_takeover,
        },
        "arms": arms,
        "unavailable": {arm: t["unavailable"] for arm, t in trained.items() if "unavailable" in t},
        "comparisons": comparisons(config.comparisons, facts, exact, seed, n, decisions),
        "timing": {**timing, "total": round(sum(timing.values()), 1)},
    }
    results["targets"] = targets(results)
    return results


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The study's targets, each met / missed / n/a (or measured) with the numbers that decide it: legal actions of
    every SFT arm in the episodes and at the decision points; ``sft-lora``'s repair F1 and false-repair rate on the
    held-out fault types (stretch) and its F1 against prompt-only's (paired CI); DAPO's effect over SFT on the
    decision reward; DCR of the best arm against ``none``; and hier against the flat manager."""
    arms = results["arms"]
    comparisons = {(c["a"], c["b"]): c for c in results["comparisons"]}

    def value(arm: str, metric: str) -> float | None:
        entry = metric_entry((arms.get(arm) or {}).get("metrics", {}), metric)
        return entry.get("value") if isinstance(entry, dict) else entry if isinstance(entry, int | float) else None

    def diff(a: str, b: str, metric: str) -> dict[str, Any] | None:
        if (a, b) in comparisons:
            return comparisons[(a, b)].get(metric)
        found = (comparisons.get((b, a)) or {}).get(metric)
        return (
            None
            if found is None
            else {**found, "diff": -found["diff"], "ci95": [-found["ci95"][1], -found["ci95"][0]]}
        )

    out = []
    for arm in (a for a in SFT_ARMS if a in arms):
        for metric, where in (
            ("legal_action_rate", "in the episodes"),
            ("decisions.legal_action_rate", "at the decision points"),
        ):
            legal = value(arm, metric)
            out.append(
                {
                    "target": f"{arm}: legal-action rate {where} >= {LEGAL_TARGET:.0%} (prompt-only: "
                    f"{fmt(value('prompt', metric))})",
                    "status": "n/a" if legal is None else "met" if legal >= LEGAL_TARGET else "missed",
                    "value": legal,
                }
            )
    unseen = "heldout"
    f1 = value("sft-lora", f"decisions_by_group.{unseen}.repair_f1")
    false = value("sft-lora", f"decisions_by_group.{unseen}.false_repair_rate")
    if "sft-lora" in arms:
        stretch = f1 is not None and f1 >= F1_TARGET and (false or 0.0) <= FALSE_REPAIR_TARGET
        out.append(
            {
                "target": f"sft-lora (sft): repair F1 on the held-out fault types >= {F1_TARGET} with false repairs "
                f"<= {FALSE_REPAIR_TARGET:.0%} (stretch; decision points of the {unseen} split)",
                "status": "n/a" if f1 is None else "met" if stretch else "missed",
                "value": {"repair_f1": f1, "false_repair_rate": false},
            }
        )
        against = diff("prompt", "sft-lora", "decision_f1")
        out.append(
            {
                "target": "sft-lora (sft): repair F1 at the decision points above prompt-only's (the paired CI of "
                "sft-lora - prompt lies above 0)",
                "status": "n/a" if against is None else "met" if against["ci95"][0] > 0 else "missed",
                "value": against,
            }
        )
    if "sft-dapo" in arms and "sft-lora" in arms:
        effect = diff("sft-lora", "sft-dapo", "decision_reward")
        out.append(
            {
                "target": "DAPO over SFT: sft-dapo - sft-lora decision reward with a CI that excludes 0",
                "status": "n/a"
                if effect is None
                else "met"
                if effect["ci95"][0] > 0 or effect["ci95"][1] < 0
                else "missed",
                "value": effect,
                "note": results["unavailable"].get("sft-dapo", ""),
            }
        )
    dcr = {a: value(a, "dcr") for a in arms if a != "none"}
    dcr = {a: v for a, v in dcr.items() if v is not None}
    if dcr and "none" in arms:
        best = max(dcr, key=lambda a: dcr[a])
        out.append(
            {
                "target": f"DCR of the best arm ({best}) against none on the faulted episodes (SIMULATED worker)",
                "status": "measured",
                "value": {"best": best, "dcr": dcr[best], "none": value("none", "dcr"),
                          "reward_total": diff("none", best, "reward_total")},
            }
        )  # fmt: skip
    if "hier" in arms and "sft-lora" in arms:
        measured = ("decision_f1", "decision_model_calls", "decision_model_tokens", "decision_match", "reward_total")
        out.append(
            {
                "target": "the hierarchical manager over the flat one with the same SFT budget (hier - sft-lora): "
                "repair F1, model calls and tokens per decision point; measured with their CIs",
                "status": "measured",
                "value": {k: diff("sft-lora", "hier", k) for k in measured},
            }
        )
    return out


# ---------------------------------------------------------------- outputs
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
