"""The study's numbers: per-episode facts, each arm's metrics and the paired comparisons between arms.

Per arm (definitions; every interval is a task-clustered percentile bootstrap of
:mod:`harness.evaluation.stats`, 95 %, ``n_resamples`` resamples):

- **legal-action rate**: legal manager actions / manager actions, over every activation of every episode (n/a
  for ``none``, which takes no action). CI: the actions' 0/1 values, clustered by task.
- **exact match**: teacher-forced, on held-out atomic samples: the share whose next response parses to the gold
  control action's name. CI: per sample, clustered by task.
- **repairs** against the injected *harmful* faults (a benign rewrite is not a fault to repair), over keys
  ``(episode, run, turn)``: precision, recall, F1 = 2TP / (2TP + FP + FN), and the **false-repair rate**: repaired
  keys that hold no harmful fault / keys that hold none. F1's CI resamples tasks and recomputes F1 (each TP counts
  as two values 1, each FP and FN as one value 0, whose pooled mean is exactly F1).
- **reward by term**: :func:`rewards.score_episode` of each episode with its fault (terms that do not apply are left
  out of that term's mean), and the weighted total.
- **turn accuracy** (with CI) and **DCR** from :func:`harness.evaluation.summary.summarize_variant`, and
  **downstream turn accuracy**: turns from the faulted turn on, in episodes with a harmful fault.
- **paired comparisons** ``b - a`` (:func:`~harness.evaluation.stats.paired_cluster_bootstrap`) over what both arms
  share: exact match per sample, legal-action rate and reward per episode, turn correctness per turn; at the decision
  points the reward, control match, model calls and model tokens per point, and the repair F1 (:func:`paired_f1`).

At the decision points (:func:`decision_metrics`) the legal-action rate counts the model's actions only (a ``hier``
arm's tier-0 actions are the harness's, written without a model), and each model arm's **usage** is reported: model
calls and model tokens (prompt + completion, as the backend reported them) per point, overall and by the gold
control (the ``hier`` manager asks no model where tier 0 decides, e.g. a commit after the state was finalized).

All worker numbers are SIMULATED: the scripted worker replays reference or faulty programs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.evaluation.stats import cluster_bootstrap_ci, paired_cluster_bootstrap, repair_precision_recall
from harness.manager.hier import HARNESS
from harness.manager.lifecycle import CONTROL_ACTIONS

if TYPE_CHECKING:
    from harness.manager.episode import EpisodeRecord


# ---------------------------------------------------------------- per-episode facts
def episode_facts(record: EpisodeRecord, turns: Sequence[str], fault: Any, benign: bool) -> dict[str, Any]:
    """What the study needs of one episode: action legality, repaired/faulted turns, turn outcomes, reward terms."""
    from harness.evaluation.summary import TaskInfo, eval_meta, turn_outcomes
    from rewards import FaultInfo, score_episode

    actions = [a for act in record.activations if act.get("actor") == "policy" for a in act.get("actions", [])]
    harmful = fault is not None and not benign
    info = None if fault is None else FaultInfo(fault.turn_id, fault.fault_type, fault.variables, benign=benign)
    outcomes = turn_outcomes(record, TaskInfo("multi_turn", {t: () for t in turns}))
    reward = score_episode(record, info)
    fault_index = turns.index(fault.turn_id) if harmful and fault.turn_id in turns else None
    return {
        "task_id": record.task_id,
        "legal": [bool(a.get("legal")) for a in actions],
        "repaired": sorted({str(r.get("turn_id")) for r in record.repairs}),
        "faulted": fault.turn_id if harmful else None,
        "turns": list(turns),
        "correct": [bool(outcomes[t]) for t in turns],
        "downstream": [] if fault_index is None else [bool(outcomes[t]) for t in turns[fault_index:]],
        "reward": {"total": reward.total, **reward.terms},
        "key": eval_meta(record)["key"],
    }


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


def metric_entry(metrics: Mapping[str, Any], name: str) -> Any:
    """``metrics[name]``; a dotted ``name`` ("decisions.repair_f1") looks into sub-dicts; None if missing."""
    found: Any = metrics
    for part in name.split("."):
        found = found.get(part) if isinstance(found, Mapping) else None
    return found


def arm_metrics(facts: Sequence[dict[str, Any]], exact: Sequence[dict[str, Any]], seed: int, n: int) -> dict:
    """The metrics of one arm (see the module docstring)."""
    legal = [(f["task_id"], float(v)) for f in facts for v in f["legal"]]
    faulted = {(f["key"], f["faulted"]) for f in facts if f["faulted"] is not None}
    repaired = {(f["key"], t) for f in facts for t in f["repaired"]}
    score = repair_precision_recall(repaired, faulted)
    keys = [(f["task_id"], (f["key"], turn)) for f in facts for turn in f["turns"]]
    decisions = [(task, key in faulted, key in repaired) for task, key in keys]
    f1_values = f1_contributions(decisions)
    false_values = [(task, float(did)) for task, should, did in decisions if not should]
    terms = sorted({t for f in facts for t in f["reward"]})
    rewards = {}
    for term in terms:
        values = [f["reward"][term] for f in facts if f["reward"].get(term) is not None]
        rewards[term] = float(np.mean(values)) if values else None
    has_actions = any(f["legal"] for f in facts)
    exact_f1 = teacher_forced_repair_f1(exact)
    return {
        "episodes": len(facts),
        "legal_action_rate": _ci(legal, seed, n) if has_actions else {"value": None, "ci95": None, "n": 0},
        "exact_match": _ci([(r["task_id"], float(r["match"])) for r in exact], seed, n),
        "parse_rate_exact": float(np.mean([r["parsed"] for r in exact])) if exact else None,
        "repair_f1_exact": _ci(exact_f1, seed, n) if exact_f1 else {"value": None, "ci95": None, "n": 0},
        "repair_precision": score.precision,
        "repair_recall": score.recall,
        "repair_f1": _ci(f1_values, seed, n) if faulted or repaired else {"value": None, "ci95": None, "n": 0},
        "repair_counts": {"true_positive": score.true_positives, "repaired": score.repaired, "faulted": score.faulted},
        "false_repair_rate": _ci(false_values, seed, n),
        "downstream_turn_accuracy": _ci([(f["task_id"], float(v)) for f in facts for v in f["downstream"]], seed, n),
        "reward": rewards,
        "reward_total": _ci([(f["task_id"], f["reward"]["total"]) for f in facts], seed, n),
    }


def teacher_forced_repair_f1(exact: Sequence[dict[str, Any]]) -> list[tuple[str, float]]:
    """Per-sample contributions whose mean is the repair F1 of the exact-match samples, ``2TP / (2TP + FP + FN)``:
    a sample whose gold action is REPAIR counts twice 1.0 if the model repaired there, once 0.0 if not (FN); a
    REPAIR the gold did not take is one 0.0 (FP); the rest do not enter. (task id, value) pairs, for the bootstrap."""
    return f1_contributions([(row["task_id"], row["gold"] == "REPAIR", row["predicted"] == "REPAIR") for row in exact])


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


def paired_f1(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]], seed: int, n: int) -> dict[str, Any] | None:
    """Repair F1 of ``b`` minus that of ``a`` over the decision points both played (by ``key``), with a paired
    task-clustered percentile bootstrap (95 %): each resample draws tasks with replacement (the same draw for both
    arms) and recomputes both F1 values, ``2TP / (2TP + FP + FN)``, from the drawn tasks' counts. Resamples where
    either F1 is undefined (no REPAIR point and no repair) are left out (``n_resamples`` says how many were kept).
    None when the arms share no point or the difference is undefined."""
    rows_b = {r["key"]: r for r in b}
    common = [r for r in a if r["key"] in rows_b]
    if not common:
        return None
    tasks = sorted({r["task_id"] for r in common})
    index = {task: i for i, task in enumerate(tasks)}
    counts = np.zeros((2, len(tasks), 3))  # (arm, task, [TP, FP, FN])
    for row in common:
        for side, r in enumerate((row, rows_b[row["key"]])):
            should, did = row["gold"] == "REPAIR", bool(r["repaired"])
            if should or did:
                counts[side, index[row["task_id"]], 0 if should and did else (1 if did else 2)] += 1

    def f1(c: np.ndarray) -> np.ndarray:  # (..., 3) -> (...)
        tp, fp, fn = c[..., 0], c[..., 1], c[..., 2]
        denominator = 2 * tp + fp + fn
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(denominator > 0, 2 * tp / denominator, np.nan)

    estimate = float(f1(counts[1].sum(0)) - f1(counts[0].sum(0)))
    if np.isnan(estimate):
        return None
    draws = np.random.default_rng(seed).integers(0, len(tasks), size=(n, len(tasks)))  # (n, n_tasks)
    diffs = f1(counts[1][draws].sum(1)) - f1(counts[0][draws].sum(1))  # (n,)
    kept = diffs[~np.isnan(diffs)]
    low, high = np.quantile(kept, [0.025, 0.975]) if kept.size else (estimate, estimate)
    return {"diff": estimate, "ci95": [float(low), float(high)], "n": len(common), "tasks": len(tasks),
            "n_resamples": int(kept.size)}  # fmt: skip


# ---------------------------------------------------------------- paired comparisons
def paired(
    a: Mapping[str, tuple[str, float]], b: Mapping[str, tuple[str, float]], seed: int, n: int
) -> dict[str, Any] | None:
    """``b - a`` over the ids both hold (``id -> (cluster, value)``), task-clustered paired bootstrap."""
    common = sorted(set(a) & set(b))
    if not common:
        return None
    xs: dict[str, list[float]] = {}
    ys: dict[str, list[float]] = {}
    for key in common:
        xs.setdefault(a[key][0], []).append(a[key][1])
        ys.setdefault(a[key][0], []).append(b[key][1])
    ci = paired_cluster_bootstrap(xs, ys, seed=seed, n_resamples=n)
    return {"diff": ci.estimate, "ci95": [ci.low, ci.high], "n": ci.n_values, "tasks": ci.n_clusters}


def _per_episode(facts: Sequence[dict[str, Any]], value: Callable[[dict[str, Any]], float | None]) -> dict:
    out = {}
    for f in facts:
        v = value(f)
        if v is not None:
            out[f["key"]] = (f["task_id"], v)
    return out


def comparisons(
    pairs: Sequence[Sequence[str]],
    facts: Mapping[str, list],
    exact: Mapping[str, list],
    seed: int,
    n: int,
    decisions: Mapping[str, list] | None = None,
) -> list[dict[str, Any]]:
    """Every configured pair whose arms both ran: paired differences per metric (None where they share nothing)."""
    rows = []
    for a, b in pairs:
        if a not in facts or b not in facts:
            continue
        metrics: dict[str, Callable[[dict[str, Any]], float | None]] = {
            "legal_action_rate": lambda f: float(np.mean(f["legal"])) if f["legal"] else None,
            "reward_total": lambda f: f["reward"]["total"],
        }
        row: dict[str, Any] = {"a": a, "b": b}
        for name, value in metrics.items():
            row[name] = paired(_per_episode(facts[a], value), _per_episode(facts[b], value), seed, n)
        turns = {
            side: {
                f"{f['key']}/{t}": (f["task_id"], float(c))
                for f in facts[side]
                for t, c in zip(f["turns"], f["correct"], strict=True)
            }
            for side in (a, b)
        }
        row["turn_accuracy"] = paired(turns[a], turns[b], seed, n)
        sample = {
            side: {r["content_hash"]: (r["task_id"], float(r["match"])) for r in exact.get(side, [])}
            for side in (a, b)
        }
        row["exact_match"] = paired(sample[a], sample[b], seed, n)
        per_point: dict[str, Callable[[dict[str, Any]], float | None]] = {
            "decision_reward": lambda r: r["reward"],
            "decision_match": _control_match,
            "decision_model_calls": lambda r: r.get("model_calls"),
            "decision_model_tokens": model_tokens,
        }
        for name, value in per_point.items():
            point = {
                side: {
                    r["key"]: (r["task_id"], v) for r in (decisions or {}).get(side, []) if (v := value(r)) is not None
                }
                for side in (a, b)
            }
            row[name] = paired(point[a], point[b], seed, n)
        row["decision_f1"] = paired_f1((decisions or {}).get(a, []), (decisions or {}).get(b, []), seed, n)
        rows.append(row)
    return rows


def _control_match(row: dict[str, Any]) -> float:
    return float(own_control(row) == row["gold"])
