"""The decision-point diagnostic's metrics (:mod:`training.study.decisions`): per arm, the legal-action rate, control
match, decided rate, repair precision / recall / F1 against the gold's REPAIR points, false repairs at its
confirmations and the mean reward, each with a task-clustered bootstrap CI, and the model usage per point.

A decision point is measured after the gold manager ran its checks, so an arm there reads evidence it did not write:
the digest rule (:mod:`training.study.digest_rule`) reaches the gold's decisions by construction. The study's primary
result is whole episodes (:mod:`training.study.episode_metrics`); this is a diagnostic.

All worker numbers are SIMULATED: the scripted worker replays reference or faulty programs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.evaluation.stats import cluster_bootstrap_ci, repair_precision_recall
from harness.manager.hier import HARNESS
from harness.manager.lifecycle import CONTROL_ACTIONS


def _clusters(pairs: Sequence[tuple[str, float]]) -> list[list[float]]:
    by: dict[str, list[float]] = {}
    for cluster, value in pairs:
        by.setdefault(cluster, []).append(value)
    return list(by.values())


def _ci(pairs: Sequence[tuple[str, float]], seed: int, n: int) -> dict[str, Any]:
    """Pooled mean of ``(cluster, value)`` pairs with its cluster-bootstrap CI; n/a when there is no value."""
    if not pairs:
        return {"value": None, "ci95": None, "n": 0}
    ci = cluster_bootstrap_ci(_clusters(pairs), seed=seed, n_resamples=n)
    return {"value": ci.estimate, "ci95": [ci.low, ci.high], "n": ci.n_values}


def f1_contributions(decisions: Sequence[tuple[str, bool, bool]]) -> list[tuple[str, float]]:
    """``(task id, should repair, did repair)`` -> (task id, value) pairs whose pooled mean is the repair F1
    ``2TP / (2TP + FP + FN)``: a TP gives two values 1.0, an FN or an FP one value 0.0, a true negative none (so a
    task-clustered bootstrap of the pooled mean resamples F1 itself)."""
    values = []
    for task, should, did in decisions:
        if should:
            values += [(task, 1.0)] * 2 if did else [(task, 0.0)]
        elif did:
            values.append((task, 0.0))
    return values


def own_control(row: dict[str, Any]) -> str | None:
    """The last legal control action the arm's *model* took at a decision point (its ``actions`` without the harness's:
    the ``hier`` manager's tier-0 confirmation of a rejected reply is not the model's decision); None: undecided."""
    names = [
        a["name"] for a in row["actions"] if a["legal"] and a["name"] in CONTROL_ACTIONS and a.get("actor") != HARNESS
    ]
    return names[-1] if names else None


def harness_confirmed(row: dict[str, Any]) -> bool:
    """Whether the harness confirmed in the arm's place at a decision point: the undecided arm's confirmation
    (``row["harness_confirmed"]``) or the ``hier`` manager's tier-0 confirmation of a rejected tier-1 reply."""
    return bool(row.get("harness_confirmed")) or any(
        a.get("actor") == HARNESS and a["legal"] and a["name"] == "FINALIZE_RELATIONS" for a in row["actions"]
    )


def decision_metrics(rows: Sequence[dict[str, Any]], seed: int, n: int) -> dict[str, Any]:
    """The metrics of one arm's decision points (:mod:`training.study.decisions`): legal-action rate over the arm's
    actions in the point activations, control match (the control action that ended the activation equals the gold
    one), the decided rate (the arm's model ended the point with a legal control action, :func:`own_control`; an
    undecided point is confirmed by the harness, :func:`harness_confirmed` counts them), repair precision / recall / F1
    against the REPAIR points, the false-repair rate over the COMMIT points, and the mean episode reward; each with its
    task-clustered bootstrap CI. Control match and the controls counted are the model's own."""
    decisions = [(r["task_id"], r["gold"] == "REPAIR", bool(r["repaired"])) for r in rows]
    score = repair_precision_recall(
        [r["key"] for r in rows if r["repaired"]], [r["key"] for r in rows if r["gold"] == "REPAIR"]
    )
    legal = [(r["task_id"], float(a["legal"])) for r in rows for a in r["actions"] if a.get("actor") != "harness"]
    f1 = f1_contributions(decisions)
    return {
        "points": len(rows),
        "repair_points": score.faulted,
        "legal_action_rate": _ci(legal, seed, n),
        "control_match": _ci([(r["task_id"], _control_match(r)) for r in rows], seed, n),
        "decided": _ci([(r["task_id"], float(own_control(r) is not None)) for r in rows], seed, n),
        "harness_confirmed": sum(harness_confirmed(r) for r in rows),
        "repair_precision": score.precision,
        "repair_recall": score.recall,
        "repair_f1": _ci(f1, seed, n),
        "repair_counts": {"true_positive": score.true_positives, "repaired": score.repaired, "faulted": score.faulted},
        "false_repair_rate": _ci([(task, float(did)) for task, should, did in decisions if not should], seed, n),
        "reward_total": _ci([(r["task_id"], r["reward"]) for r in rows], seed, n),
        "controls": dict(sorted(Counter(str(own_control(r)) for r in rows).items())),
        "usage": decision_usage(rows),
    }


def model_tokens(row: dict[str, Any]) -> int | None:
    """A decision row's model tokens (prompt + completion); None for a manager without a model (or an old row)."""
    if row.get("model_calls") is None:
        return None
    return int(row["prompt_tokens"]) + int(row["completion_tokens"])


def decision_usage(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Model calls and tokens at the decision points: totals, means per point, and means per point by gold control;
    None when no row counted them (a manager without a model)."""
    counted = [r for r in rows if r.get("model_calls") is not None]
    if not counted:
        return None

    def means(part: Sequence[dict[str, Any]]) -> dict[str, float]:
        return {
            "model_calls": float(np.mean([r["model_calls"] for r in part])),
            "model_tokens": float(np.mean([model_tokens(r) for r in part])),
            "prompt_tokens": float(np.mean([r["prompt_tokens"] for r in part])),
            "completion_tokens": float(np.mean([r["completion_tokens"] for r in part])),
        }

    by_gold = {gold: means([r for r in counted if r["gold"] == gold]) for gold in sorted({r["gold"] for r in counted})}
    return {
        "points": len(counted),
        "model_calls": sum(r["model_calls"] for r in counted),
        "model_tokens": sum(model_tokens(r) or 0 for r in counted),
        "per_point": means(counted),
        "per_point_by_gold": by_gold,
    }


def _control_match(row: dict[str, Any]) -> float:
    return float(own_control(row) == row["gold"])
