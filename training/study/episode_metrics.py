"""The study's primary numbers: whole held-out episodes per arm, and paired differences between arms.

Inputs: per arm, the :class:`~harness.manager.episode.EpisodeRecord` s ``stateguard evaluate`` wrote (their
``config["eval"]`` holds the episode ``key``, ``run``, ``fault_turn`` and ``fault_detectable``), and per task its
:class:`~harness.evaluation.summary.TaskInfo` (each turn's declared ``depends_on``). An episode is identified by
``(key, run)``; errored records (``record.error``) are not played episodes and are left out (:func:`episode_facts`).

Definitions, per episode (repairs are the ones the harness delivered, ``record.repairs``, counted once per turn):

- **scored fault**: the episode's fault turn ``f`` when its fault is detectable (``fault_detectable`` true); a
  fault not marked detectable is not scored (its turn is neither a hit, a miss nor a clean turn).
- **downstream** of ``f``: the turns that depend on ``f`` through the declared ``depends_on``, directly or
  transitively. They may be wrong because ``f`` was, so a repair there is neither credited nor charged.
- **clean turns**: every turn of a clean episode; in a faulted episode, every turn that is neither ``f`` nor
  downstream of it.
- **TP**: a scored fault whose turn was repaired; **FN**: one whose turn was not; **FP** (a false repair): a
  repaired clean turn. Repairs at ``f`` of an unscored fault and at downstream turns count nowhere.
- **episode reward** (validity-grounded, in ``[-1, 1]``): ``(TP - FP) / n_turns``, i.e. +1 for the scored fault
  repaired at its turn and -1 per false repair, divided by the task's number of turns (a clean episode repaired at
  every turn scores -1). ``rewards.score_episode``'s intervention term is not reused: it credits a repair only when
  it names one of the fault's corrupted variables, which the evaluation records do not carry.

Per arm (:func:`arm_metrics`): repair precision ``TP / (TP + FP)``, recall ``TP / (TP + FN)``, F1
``2TP / (2TP + FP + FN)``; the **false-repair rate** ``FP / clean turns``; **turn accuracy** (an unscored turn is
wrong, :func:`harness.evaluation.summary.turn_outcomes`); **DCR** over the turn scores
(:func:`harness.evaluation.stats.dependency_contamination_rate`); the mean **episode reward**. Every interval is a
95 % percentile bootstrap that resamples whole tasks with replacement: pooled means (turn accuracy, false-repair
rate, reward) through :func:`harness.evaluation.stats.cluster_bootstrap_ci`; the ratios (F1, DCR) by recomputing
them from the drawn tasks' counts (:func:`task_ratio_ci`; resamples where the ratio is undefined are left out and
``n_resamples`` says how many were kept).

Paired comparisons ``b - a`` (:func:`compare`) over the episodes both arms played (a model arm may play a subset of
the baselines' tasks): the same five metrics, each with a paired task-clustered bootstrap (the same task draw for both
arms): :func:`harness.evaluation.stats.paired_cluster_bootstrap` for the pooled means, :func:`paired_ratio_ci` for F1
and DCR. The targets of the study are checked by :func:`training.study.study_targets.targets`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.evaluation.stats import (
    CONFIDENCE,
    N_RESAMPLES,
    Unit,
    cluster_bootstrap_ci,
    dependency_contamination_rate,
    paired_cluster_bootstrap,
)
from harness.evaluation.summary import TaskInfo, dcr_units, episode_id, eval_meta, turn_outcomes
from harness.manager.episode import EpisodeRecord

BASELINE = "none"
ORACLE_ARMS = ("gold-specs",)
"""Arms that read an oracle (the gold's specs): upper bounds, labelled so in every table."""
NAMED_COMPARISONS = (("prompt", "sft"), ("read", "sft"), ("gold-specs", "sft"), ("sft", "sft-dapo"))
"""``(a, b)`` pairs reported as ``b - a`` besides every arm against ``none``."""
METRICS = ("repair_f1", "false_repair_rate", "turn_accuracy", "dcr", "episode_reward")


@dataclass(frozen=True)
class EpisodeFacts:
    """What the study needs of one played episode (see the module docstring for the definitions)."""

    key: tuple[str, int]
    task_id: str
    turns: tuple[str, ...]
    fault_turn: str | None
    scored_fault: str | None
    clean_turns: tuple[str, ...]
    repaired: frozenset[str]
    correct: tuple[bool, ...]
    units: tuple[Unit, ...]
    simulated: bool

    @property
    def tp(self) -> int:
        return int(self.scored_fault is not None and self.scored_fault in self.repaired)

    @property
    def fn(self) -> int:
        return int(self.scored_fault is not None and self.scored_fault not in self.repaired)

    @property
    def fp(self) -> int:
        return sum(t in self.repaired for t in self.clean_turns)

    @property
    def reward(self) -> float:
        return (self.tp - self.fp) / max(len(self.turns), 1)


def downstream(turn: str, depends_on: Mapping[str, Sequence[str]]) -> set[str]:
    """The turns that depend on ``turn``, directly or through other turns (``depends_on``: turn -> its upstream)."""
    found: set[str] = set()
    grew = True
    while grew:
        grew = False
        for t, upstream in depends_on.items():
            if t not in found and t != turn and (turn in upstream or found & set(upstream)):
                found.add(t)
                grew = True
    return found


def episode_facts(record: EpisodeRecord, info: TaskInfo) -> EpisodeFacts:
    """The facts of one episode of a multi-turn task (see the module docstring)."""
    meta = eval_meta(record)
    turns = tuple(info.depends_on)
    fault = meta.get("fault_turn")
    fault = None if fault is None else str(fault)
    scored = fault if fault is not None and meta.get("fault_detectable") is True else None
    excluded = set() if fault is None else {fault} | downstream(fault, info.depends_on)
    outcomes = turn_outcomes(record, info)
    return EpisodeFacts(
        key=episode_id(record),
        task_id=record.task_id,
        turns=turns,
        fault_turn=fault,
        scored_fault=scored,
        clean_turns=tuple(t for t in turns if t not in excluded),
        repaired=frozenset(str(r.get("turn_id")) for r in record.repairs),
        correct=tuple(bool(outcomes[t]) for t in turns),
        units=tuple(dcr_units(record, info)),
        simulated=bool(record.simulated),
    )


def arm_facts(records: Iterable[EpisodeRecord], tasks: Mapping[str, TaskInfo]) -> list[EpisodeFacts]:
    """One :class:`EpisodeFacts` per played episode: errored records dropped, the first record of an episode kept."""
    seen: dict[tuple[str, int], EpisodeFacts] = {}
    for record in records:
        if record.error is None and episode_id(record) not in seen:
            seen[episode_id(record)] = episode_facts(record, tasks[record.task_id])
    return [seen[k] for k in sorted(seen)]


# ---------------------------------------------------------------- ratio statistics over task counts
def f1_of(counts: np.ndarray) -> np.ndarray:
    """F1 ``2TP / (2TP + FP + FN)`` of ``(..., 3)`` counts ``[TP, FP, FN]``; NaN where undefined."""
    tp, fp, fn = counts[..., 0], counts[..., 1], counts[..., 2]
    denominator = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, 2 * tp / denominator, np.nan)


def dcr_of(counts: np.ndarray) -> np.ndarray:
    """DCR of ``(..., 4)`` counts ``[clean units, clean errors, contaminated units, contaminated errors]``; NaN where
    either group is empty."""
    with np.errstate(invalid="ignore", divide="ignore"):
        value = counts[..., 3] / counts[..., 2] - counts[..., 1] / counts[..., 0]
    return np.where((counts[..., 0] > 0) & (counts[..., 2] > 0), value, np.nan)


def _interval(values: np.ndarray, confidence: float) -> list[float] | None:
    kept = values[~np.isnan(values)]
    if not kept.size:
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(kept, [tail, 1.0 - tail])
    return [float(low), float(high)]


def task_ratio_ci(
    counts: np.ndarray,
    stat: Callable[[np.ndarray], np.ndarray],
    seed: int,
    n_resamples: int,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """``stat`` of the summed ``(n_tasks, k)`` counts, and its percentile interval over resamples of whole tasks
    (with replacement) whose summed counts ``stat`` recomputes; undefined resamples (NaN) are left out."""
    value = float(stat(counts.sum(0))) if len(counts) else float("nan")
    if np.isnan(value):
        return {"value": None, "ci95": None, "n_resamples": 0}
    draws = np.random.default_rng(seed).integers(0, len(counts), size=(n_resamples, len(counts)))
    resampled = stat(counts[draws].sum(1))  # (n_resamples,)
    return {"value": value, "ci95": _interval(resampled, confidence), "n_resamples": int((~np.isnan(resampled)).sum())}


def paired_ratio_ci(
    a: np.ndarray,
    b: np.ndarray,
    stat: Callable[[np.ndarray], np.ndarray],
    seed: int,
    n_resamples: int,
    confidence: float = CONFIDENCE,
) -> dict[str, Any] | None:
    """``stat(b) - stat(a)`` of two arms' ``(n_tasks, k)`` counts over the same tasks (row ``i`` of both: task
    ``i``), with a percentile interval over resamples that draw the same tasks for both arms and recompute both
    ratios; None when the difference is undefined."""
    va, vb = float(stat(a.sum(0))), float(stat(b.sum(0)))
    if np.isnan(va) or np.isnan(vb):
        return None
    draws = np.random.default_rng(seed).integers(0, len(a), size=(n_resamples, len(a)))
    diffs = stat(b[draws].sum(1)) - stat(a[draws].sum(1))  # (n_resamples,)
    return {"diff": vb - va, "ci95": _interval(diffs, confidence), "a": va, "b": vb,
            "n_resamples": int((~np.isnan(diffs)).sum())}  # fmt: skip


# ---------------------------------------------------------------- per arm
def _by_task(facts: Sequence[EpisodeFacts]) -> dict[str, list[EpisodeFacts]]:
    out: dict[str, list[EpisodeFacts]] = {}
    for f in facts:
        out.setdefault(f.task_id, []).append(f)
    return dict(sorted(out.items()))


def f1_counts(groups: Iterable[Sequence[EpisodeFacts]]) -> np.ndarray:
    """``(n_tasks, 3)`` counts ``[TP, FP, FN]``, one row per group of episodes (a task's)."""
    return np.array([[sum(f.tp for f in g), sum(f.fp for f in g), sum(f.fn for f in g)] for g in groups], float)


def dcr_counts(groups: Iterable[Sequence[EpisodeFacts]]) -> np.ndarray:
    """``(n_tasks, 4)`` counts ``[clean units, clean errors, contaminated units, contaminated errors]`` per group,
    grouped by :func:`~harness.evaluation.stats.dependency_contamination_rate` itself."""
    rows = []
    for group in groups:
        d = dependency_contamination_rate([u for f in group for u in f.units])
        rows.append([d.n_clean, round((d.clean_error or 0.0) * d.n_clean),
                     d.n_contaminated, round((d.contaminated_error or 0.0) * d.n_contaminated)])  # fmt: skip
    return np.array(rows, dtype=float).reshape(-1, 4)


def _false_values(group: Sequence[EpisodeFacts]) -> list[float]:
    """One 0/1 value per clean turn of the group's episodes (1: repaired), in episode then turn order."""
    return [float(t in f.repaired) for f in group for t in f.clean_turns]


def _mean_ci(clusters: Sequence[Sequence[float]], seed: int, n: int) -> dict[str, Any]:
    clusters = [c for c in clusters if len(c)]
    if not clusters:
        return {"value": None, "ci95": None}
    ci = cluster_bootstrap_ci(clusters, seed=seed, n_resamples=n)
    return {"value": ci.estimate, "ci95": [ci.low, ci.high]}


def arm_metrics(facts: Sequence[EpisodeFacts], *, seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """The metrics of one arm's episodes (see the module docstring); a metric is ``{"value", "ci95"}``."""
    groups = list(_by_task(facts).values())
    tp, fp, fn = (int(x) for x in f1_counts(groups).sum(0)) if groups else (0, 0, 0)
    clean_turns = sum(len(f.clean_turns) for f in facts)
    dcr = dependency_contamination_rate([u for f in facts for u in f.units])
    return {
        "episodes": len(facts),
        "tasks": len(groups),
        "faulted_episodes": sum(f.scored_fault is not None for f in facts),
        "clean_episodes": sum(f.fault_turn is None for f in facts),
        "counts": {"true_positive": tp, "false_positive": fp, "false_negative": fn, "clean_turns": clean_turns},
        "repair_precision": tp / (tp + fp) if tp + fp else None,
        "repair_recall": tp / (tp + fn) if tp + fn else None,
        "repair_f1": task_ratio_ci(f1_counts(groups), f1_of, seed, n_resamples),
        "false_repair_rate": _mean_ci([_false_values(g) for g in groups], seed, n_resamples),
        "false_repairs_per_episode": fp / len(facts) if facts else None,
        "turn_accuracy": _mean_ci([[float(c) for f in g for c in f.correct] for g in groups], seed, n_resamples),
        "dcr": task_ratio_ci(dcr_counts(groups), dcr_of, seed, n_resamples),
        "dcr_detail": {k: getattr(dcr, k) for k in ("clean_error", "contaminated_error", "n_clean", "n_contaminated")},
        "episode_reward": _mean_ci([[f.reward for f in g] for g in groups], seed, n_resamples),
        "simulated": bool(facts) and all(f.simulated for f in facts),
    }


# ---------------------------------------------------------------- paired comparisons
def _paired_mean(
    a: Mapping[str, list[float]], b: Mapping[str, list[float]], seed: int, n: int
) -> dict[str, Any] | None:
    keep = [t for t in a if a[t]]
    if not keep:
        return None
    ci = paired_cluster_bootstrap({t: a[t] for t in keep}, {t: b[t] for t in keep}, seed=seed, n_resamples=n)
    va = float(np.mean([v for t in keep for v in a[t]]))
    return {"diff": ci.estimate, "ci95": [ci.low, ci.high], "a": va, "b": va + ci.estimate,
            "p_nonpositive": ci.p_nonpositive}  # fmt: skip


def compare(
    a: Sequence[EpisodeFacts], b: Sequence[EpisodeFacts], *, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> dict[str, Any] | None:
    """``b - a`` over the episodes both played, per metric of :data:`METRICS` (``{"diff", "ci95", "a", "b"}``, None
    where undefined); None when they share no episode."""
    b_by = {f.key: f for f in b}
    common = [f for f in a if f.key in b_by]
    if not common:
        return None
    ga = _by_task(common)
    gb = {task: [b_by[f.key] for f in group] for task, group in ga.items()}

    def values(of: Callable[[Sequence[EpisodeFacts]], list[float]]) -> tuple[dict, dict]:
        return {t: of(g) for t, g in ga.items()}, {t: of(g) for t, g in gb.items()}

    n = n_resamples
    return {
        "episodes": len(common),
        "tasks": len(ga),
        "repair_f1": paired_ratio_ci(f1_counts(ga.values()), f1_counts(gb.values()), f1_of, seed, n),
        "false_repair_rate": _paired_mean(*values(_false_values), seed, n),
        "turn_accuracy": _paired_mean(*values(lambda g: [float(c) for f in g for c in f.correct]), seed, n),
        "dcr": paired_ratio_ci(dcr_counts(ga.values()), dcr_counts(gb.values()), dcr_of, seed, n),
        "episode_reward": _paired_mean(*values(lambda g: [f.reward for f in g]), seed, n),
    }


def comparison_pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """Every arm against :data:`BASELINE`, then :data:`NAMED_COMPARISONS`, among the arms given."""
    pairs = [(BASELINE, arm) for arm in arms if arm != BASELINE and BASELINE in arms]
    return pairs + [(a, b) for a, b in NAMED_COMPARISONS if a in arms and b in arms and (a, b) not in pairs]


def evaluate_arms(
    records: Mapping[str, Iterable[EpisodeRecord]],
    tasks: Mapping[str, TaskInfo],
    *,
    pairs: Sequence[tuple[str, str]] | None = None,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> dict[str, Any]:
    """``{"metrics": {arm: arm_metrics}, "comparisons": [{"a", "b", ...compare}]}`` of every arm's records over the
    suite's ``tasks``; ``pairs`` defaults to :func:`comparison_pairs` (a pair without a shared episode is left out)."""
    facts = {arm: arm_facts(recs, tasks) for arm, recs in records.items()}
    metrics = {arm: arm_metrics(f, seed=seed, n_resamples=n_resamples) for arm, f in facts.items()}
    rows = []
    for a, b in comparison_pairs(list(facts)) if pairs is None else pairs:
        if a in facts and b in facts and (row := compare(facts[a], facts[b], seed=seed, n_resamples=n_resamples)):
            rows.append({"a": a, "b": b, **row})
    return {"metrics": metrics, "comparisons": rows}
