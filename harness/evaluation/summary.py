"""From episode records to the numbers of ``results.json``: accuracy, DCR, repairs, manager and worker statistics.

Inputs are :class:`~harness.manager.episode.EpisodeRecord` s written by the evaluation runner (their
``config["eval"]`` holds the episode ``key``, the ``run`` index and the injected ``fault_turn``) and, per task, a
:class:`TaskInfo` (its kind and, for a multi-turn task, each turn's declared upstream ``depends_on`` and relation).

Definitions (one source of truth; the math lives in :mod:`harness.evaluation.stats`):

- **turn scores** of an episode: a multi-turn task's per-turn 0/1 verdicts (``grade.details.turns[t].correct``, the
  LongDS-style structured comparison); a single task (closed-form, artifact) is one unit ``"main"`` scored
  ``solved``. A turn has **no score** (``None``) when the grade is missing or invalid, when the turn is absent from
  ``grade.details.turns``, or when its ``correct`` is missing or not 0/1 (a bool, or a number equal to 0 or 1).
- **turn outcomes** (for accuracy): the turn scores with an unscored turn counted as wrong.
- **solved** (task accuracy): every turn correct (multi-turn), the official answer fully right (closed-form, e.g.
  DABench: all sub-answers match), a valid submission (artifact; its metric is in ``mean_score``).
- **turn accuracy**: correct units / units, pooled over episodes, with a cluster-bootstrap 95 % CI (clusters =
  tasks).
- **DCR** over the turn scores of all episodes (upstream = the declared ``depends_on`` turns of the same episode).
  Unscored turns are skipped: a turn without a score is in neither group, and an unscored upstream is dropped (not
  an error); a turn whose declared upstream are all unscored is excluded like one without upstream
  (:func:`~harness.evaluation.stats.dependency_contamination_rate`).
- **repairs** against known faults: keys ``(episode, run, turn)``; a repair counts at the turn the record names.
- **DABench official scoring** (``dabench``, for episodes graded by the ``dabench`` grader, else None): accuracy by
  question, by sub-answer and proportional by sub-question (:func:`harness.evaluation.dabench.aggregate`).
- **quantile scores** (``quantile``, for tasks whose metadata holds a ``leaderboard`` of reference scores, else
  None): each episode's score ranked against the leaderboard (a failed submission scores 0), averaged per task, then
  aggregated task -> domain -> overall (:func:`~harness.evaluation.stats.quantile_score`).
- **relation accuracy** (``relation_accuracy``; None when no episode of the variant committed a state): per
  declared relation type of a turn (init, progress, branch, invalidate, combine) and ``overall``, the share of the
  turns of multi-turn episodes with an active manager whose committed state has exactly the gold relation set, with
  ``n`` turns. Gold: the turn's declared relation to the committed states of its ``depends_on`` turns, as
  :func:`harness.manager.policy_types.declared_relations` maps it (``init`` when none of them is committed). The
  manager's: the final relations of the state committed for the turn (after FINALIZE_RELATIONS, normalized by the
  harness); a turn without a committed state counts as wrong. The turn of each state: the i-th legal COMMIT_STATE
  (policy or harness fallback) committed the i-th state of ``states``.
- **manager view** (``manager_view``: ``oracle_relations`` and ``executable_constraints``, each true, false,
  ``"mixed"`` over the episodes, or None for records that predate the switch) and ``rule_constraints``
  (``"executable"``, ``"text-only"`` or ``"mixed"`` for a variant of ``rule`` episodes, else None): what the
  manager was shown.
- **spec scores** (``spec_scores``; None when no task of the suite carries the gold's specs) and **fault detection**
  (``fault_detection``): the manager's ``run_check`` specs against the gold's, per kind, and its repairs of faults and
  false repairs of clean turns (:mod:`harness.evaluation.spec_metrics`).
- **paired comparison** of two variants: the per-turn outcomes of the episodes both ran, differences ``b - a``,
  clustered by task (:func:`~harness.evaluation.stats.paired_cluster_bootstrap`): ``turn_accuracy_diff`` (pooled
  over turns) and its ``ci95``; ``task_macro_diff``, the mean over tasks of each task's mean per-turn difference
  (every task weighs equally); ``p_nonpositive``, the share of bootstrap resamples whose pooled difference is
  ``<= 0`` (a one-sided bootstrap p-value for "b is better than a"); ``task_accuracy_diff``, the difference in the
  share of solved episodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from harness.evaluation.dabench import DABenchScore, aggregate
from harness.evaluation.spec_metrics import fault_detection, gold_specs_of, spec_scores
from harness.evaluation.stats import (
    N_RESAMPLES,
    Unit,
    aggregate_quantile_scores,
    cluster_bootstrap_ci,
    dependency_contamination_rate,
    paired_cluster_bootstrap,
    quantile_score,
    repair_precision_recall,
)
from harness.manager.episode import EpisodeRecord
from harness.manager.policy_types import declared_relations
from harness.manager.records import RELATION_TYPES


@dataclass(frozen=True)
class TaskInfo:
    """What the summary needs of a task: its kind, each turn's declared upstream and an optional leaderboard."""

    kind: str
    depends_on: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    relations: Mapping[str, str] = field(
        default_factory=dict, metadata={"help": "Turn id -> its declared relation (multi-turn; missing: init)."}
    )
    leaderboard: tuple[float, ...] = field(
        default=(), metadata={"help": "Reference scores (task metadata 'leaderboard') for AgentDS-style scoring."}
    )
    domain: str = field(default="", metadata={"help": "Task metadata 'domain': the quantile aggregation level."})
    higher_is_better: bool = True
    gold_specs: Mapping[str, tuple[Any, ...]] | None = field(
        default=None, metadata={"help": "Turn id -> the gold's check specs (synthesized tasks that carry them)."}
    )

    @classmethod
    def of(cls, task: Any) -> TaskInfo:
        metadata = task.config.metadata or {}
        leaderboard = metadata.get("leaderboard", [])
        if not isinstance(leaderboard, list) or not all(isinstance(v, int | float) for v in leaderboard):
            raise ValueError(
                f"{task.root}/config.yaml: metadata.leaderboard must be a list of reference scores, got "
                f"{leaderboard!r}; fix it or remove it."
            )
        direction = task.submission.higher_is_better if task.submission is not None else None
        return cls(
            kind=task.kind,
            depends_on={str(t.turn_id): tuple(str(d) for d in t.depends_on) for t in task.turns},
            relations={str(t.turn_id): t.relation for t in task.turns},
            leaderboard=tuple(float(v) for v in leaderboard),
            domain=str(metadata.get("domain", "")),
            higher_is_better=direction is not False,
            gold_specs=gold_specs_of(task.private_dir) if task.kind == "multi_turn" else None,
        )


def eval_meta(record: EpisodeRecord) -> dict[str, Any]:
    """The evaluation's own part of a record's config (``key``, ``run``, ``fault_turn`` ...)."""
    meta = record.config.get("eval")
    if not isinstance(meta, dict) or "key" not in meta:
        raise ValueError(
            f"episode {record.episode_id} of task {record.task_id} has no config.eval.key: it was not written by "
            "stateguard evaluate. Fix: evaluate into a fresh --out folder."
        )
    return meta


def episode_id(record: EpisodeRecord) -> tuple[str, int]:
    meta = eval_meta(record)
    return str(meta["key"]), int(meta.get("run", 0))


def _zero_one(value: Any) -> bool | None:
    """``value`` as a 0/1 score, or None when it is not one (missing, None, a string, 0.5 ...)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    return None


def turn_scores(record: EpisodeRecord, info: TaskInfo) -> dict[str, bool | None]:
    """Turn id -> 0/1 score, None for a turn without one (see the module docstring)."""
    grade = record.grade or {}
    if not grade.get("valid"):
        return dict.fromkeys(info.depends_on if info.kind == "multi_turn" else ("main",))
    if info.kind == "multi_turn":
        verdicts = (grade.get("details") or {}).get("turns") or {}
        return {t: _zero_one((verdicts.get(t) or {}).get("correct")) for t in info.depends_on}
    return {"main": solved(record, info)}


def turn_outcomes(record: EpisodeRecord, info: TaskInfo) -> dict[str, bool]:
    """Turn id -> correct, an unscored turn counting as wrong (see the module docstring)."""
    return {t: score is True for t, score in turn_scores(record, info).items()}


def solved(record: EpisodeRecord, info: TaskInfo) -> bool:
    grade = record.grade or {}
    if not grade.get("valid"):
        return False
    if info.kind == "artifact":
        return True
    return float(grade.get("score") or 0.0) >= 1.0


def dcr_units(record: EpisodeRecord, info: TaskInfo) -> list[Unit]:
    """One DCR unit per turn: its score and its declared upstream's scores (None: unscored, skipped by the DCR)."""
    scores = turn_scores(record, info)
    return [Unit(scores[t], tuple(scores[d] for d in info.depends_on.get(t, ()) if d in scores)) for t in scores]


def dabench_scores(records: Sequence[EpisodeRecord]) -> dict[str, float | int] | None:
    """The official DABench numbers over the records graded by the ``dabench`` grader; None when there are none."""
    scores = []
    for record in records:
        details = (record.grade or {}).get("details") or {}
        if "per_answer" in details:
            scores.append(
                DABenchScore(
                    correct=float((record.grade or {}).get("score") or 0.0) >= 1.0,
                    n_correct=int(details["n_correct"]),
                    n_total=int(details["n_total"]),
                    per_answer=dict(details["per_answer"]),
                )
            )
    return aggregate(scores) if scores else None


def quantile_scores(records: Sequence[EpisodeRecord], tasks: Mapping[str, TaskInfo]) -> dict[str, Any] | None:
    """AgentDS-style scores of the records of tasks with a leaderboard; None when no task has one."""
    by_task: dict[tuple[str, str], list[float]] = {}
    for record in records:
        info = tasks[record.task_id]
        if not info.leaderboard:
            continue
        grade = record.grade or {}
        score = float(grade["score"]) if grade.get("valid") and grade.get("score") is not None else None
        value = quantile_score(score, info.leaderboard, higher_is_better=info.higher_is_better)
        by_task.setdefault((info.domain, record.task_id), []).append(value)
    if not by_task:
        return None
    return aggregate_quantile_scores({key: float(np.mean(values)) for key, values in by_task.items()})


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def manager_statistics(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """States per episode, relation mix, hints, tool calls by name, repairs, rollbacks, activations and latency."""
    relations: Counter[str] = Counter()
    hints: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    controls: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    latencies: list[float] = []
    rollbacks = illegal = 0
    for record in records:
        relations.update(r.get("type", "?") for s in record.states for r in s.get("relations", []))
        hints.update(h.get("kind", "?") for h in record.hints)
        repairs.update(r.get("mode", "?") for r in record.repairs)
        rollbacks += sum(c.get("op") == "restore" for c in record.checkpoints)
        for activation in record.activations:
            if activation.get("actor") != "policy":
                continue
            latencies.append(float(activation.get("latency_s") or 0.0))
            for action in activation.get("actions", []):
                name = (action.get("parsed") or {}).get("name") or "(unparsed)"
                (tools if action.get("kind") == "tool" else controls)[name] += 1
                illegal += not action.get("legal")
    n = max(len(records), 1)
    return {
        "episodes": len(records),
        "states_per_episode": sum(len(r.states) for r in records) / n,
        "relation_mix": dict(sorted(relations.items())),
        "hints": {"state": 0, "repair": 0, **dict(sorted(hints.items()))},
        "tool_calls": dict(sorted(tools.items())),
        "control_actions": dict(sorted(controls.items())),
        "illegal_actions": illegal,
        "repairs": {"light": repairs.get("light", 0), "heavy": repairs.get("heavy", 0)},
        "rollbacks": rollbacks,
        "abandoned_states": controls.get("ABANDON_STATE", 0),
        "activations": len(latencies),
        "activations_per_episode": len(latencies) / n,
        "latency_s": {
            "mean": _mean(latencies),
            "p50": float(np.quantile(latencies, 0.5)) if latencies else None,
            "p95": float(np.quantile(latencies, 0.95)) if latencies else None,
        },
        "manager_tokens": {
            k: sum(int(eval_meta(r).get("manager_tokens", {}).get(k, 0)) for r in records)
            for k in ("prompt", "completion")
        },
    }


def state_turns(record: EpisodeRecord) -> dict[str, str]:
    """State id -> the turn it was committed for: the i-th legal COMMIT_STATE (in activation order, the harness's
    fallback included) committed the i-th state of ``record.states``."""
    turns = [
        str(activation["turn_id"])
        for activation in record.activations
        for action in activation.get("actions", [])
        if action.get("legal") and (action.get("parsed") or {}).get("name") == "COMMIT_STATE"
    ]
    return {state["id"]: turn for state, turn in zip(record.states, turns, strict=False)}


def relation_accuracy(records: Sequence[EpisodeRecord], tasks: Mapping[str, TaskInfo]) -> dict[str, Any] | None:
    """Per declared relation type and ``overall``: ``{"accuracy", "n"}`` (see the module docstring); None when no
    record holds a committed state."""
    if not any(record.states for record in records):
        return None
    hits: dict[str, list[bool]] = {kind: [] for kind in (*RELATION_TYPES, "overall")}
    for record in records:
        info = tasks[record.task_id]
        if info.kind != "multi_turn" or not any(a.get("actor") == "policy" for a in record.activations):
            continue
        by_turn = {turn: state_id for state_id, turn in state_turns(record).items()}
        states = {state["id"]: state for state in record.states}
        for turn, depends_on in info.depends_on.items():
            kind = info.relations.get(turn, "init")
            gold = {(r["type"], r.get("related_state_id")) for r in declared_relations(depends_on, kind, by_turn)}
            state = states.get(by_turn.get(turn, ""))
            made = None if state is None else {(r["type"], r.get("related_state_id")) for r in state["relations"]}
            hits.setdefault(kind, []).append(made == gold)
            hits["overall"].append(made == gold)
    return {kind: {"accuracy": _mean([float(h) for h in flags]), "n": len(flags)} for kind, flags in hits.items()}


def _agreement(values: Sequence[Any]) -> Any:
    """The one value all of ``values`` share, ``"mixed"`` when they differ, None when there are none."""
    distinct = list(dict.fromkeys(values))
    return distinct[0] if len(distinct) == 1 else "mixed" if distinct else None


def view_summary(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """``manager_view`` and ``rule_constraints`` of a variant (see the module docstring)."""
    views = [record.config.get("manager_view") or {} for record in records]
    shown = {
        key: _agreement([view.get(key) for view in views]) for key in ("oracle_relations", "executable_constraints")
    }
    rule = [view.get("executable_constraints") for record, view in zip(records, views, strict=True)
            if record.config.get("manager") == "rule"]  # fmt: skip
    rule_constraints = None
    if rule and len(rule) == len(records):
        agreed = _agreement(rule)
        rule_constraints = {True: "executable", False: "text-only", "mixed": "mixed"}.get(agreed)
    return {"manager_view": shown, "rule_constraints": rule_constraints}


def worker_statistics(records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    steps = [len(r.worker_steps) for r in records]
    return {
        "steps": int(sum(steps)),
        "steps_per_episode": _mean(steps),
        "prompt_tokens": int(sum(s.get("prompt_tokens") or 0 for r in records for s in r.worker_steps)),
        "completion_tokens": int(sum(s.get("completion_tokens") or 0 for r in records for s in r.worker_steps)),
    }


def summarize_variant(
    records: Sequence[EpisodeRecord], tasks: Mapping[str, TaskInfo], *, seed: int = 0, n_resamples: int = N_RESAMPLES
) -> dict[str, Any]:
    """The ``results.json`` entry of one variant (``task_accuracy``, ``turn_accuracy``, ``dcr`` ... see the module
    docstring). Accuracies are None for a variant without episodes."""
    by_task: dict[str, list[float]] = {}
    units: list[Unit] = []
    faulted: set[tuple[str, int, str]] = set()
    repaired: set[tuple[str, int, str]] = set()
    solved_flags, scores = [], []
    for record in records:
        info = tasks[record.task_id]
        outcomes = turn_outcomes(record, info)
        by_task.setdefault(record.task_id, []).extend(float(v) for v in outcomes.values())
        units += dcr_units(record, info)
        solved_flags.append(float(solved(record, info)))
        scores.append(float((record.grade or {}).get("score") or 0.0))
        key, run = episode_id(record)
        fault_turn = eval_meta(record).get("fault_turn")
        if fault_turn is not None:
            faulted.add((key, run, str(fault_turn)))
        repaired.update((key, run, str(r.get("turn_id"))) for r in record.repairs)
    dcr = dependency_contamination_rate(units)
    repair = repair_precision_recall(repaired, faulted)
    ci = cluster_bootstrap_ci(list(by_task.values()), seed=seed, n_resamples=n_resamples) if by_task else None
    return {
        "task_accuracy": _mean(solved_flags),
        "turn_accuracy": None if ci is None else ci.estimate,
        "turn_accuracy_ci95": None if ci is None else [ci.low, ci.high],
        "dcr": dcr.value,
        "dcr_detail": asdict(dcr),
        "repair_precision": repair.precision,
        "repair_recall": repair.recall,
        "repair_detail": asdict(repair),
        "simulated": bool(records) and all(r.simulated for r in records),
        "mean_score": _mean(scores),
        "dabench": dabench_scores(records),
        "quantile": quantile_scores(records, tasks),
        "n_episodes": len(records),
        "n_tasks": len(by_task),
        "n_turns": sum(len(v) for v in by_task.values()),
        "relation_accuracy": relation_accuracy(records, tasks),
        "spec_scores": spec_scores(records, {task_id: info.gold_specs for task_id, info in tasks.items()}),
        "fault_detection": fault_detection(
            records,
            lambda record: eval_meta(record).get("fault_turn"),
            lambda record: eval_meta(record).get("fault_detectable"),
        ),
        **view_summary(records),
        "manager": manager_statistics(records),
        "worker": worker_statistics(records),
    }


def compare_variants(
    a: Iterable[EpisodeRecord],
    b: Iterable[EpisodeRecord],
    tasks: Mapping[str, TaskInfo],
    *,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> dict[str, Any] | None:
    """Paired comparison ``b - a`` over the episodes both ran; None when they share none."""
    a_by_id = {episode_id(r): r for r in a}
    b_by_id = {episode_id(r): r for r in b}
    common = sorted(set(a_by_id) & set(b_by_id))
    if not common:
        return None
    turns_a: dict[str, list[float]] = {}
    turns_b: dict[str, list[float]] = {}
    solved_diff = []
    for eid in common:
        ra, rb = a_by_id[eid], b_by_id[eid]
        info = tasks[ra.task_id]
        oa, ob = turn_outcomes(ra, info), turn_outcomes(rb, info)
        turns_a.setdefault(ra.task_id, []).extend(float(oa[t]) for t in oa)
        turns_b.setdefault(ra.task_id, []).extend(float(ob[t]) for t in oa)
        solved_diff.append(float(solved(rb, info)) - float(solved(ra, info)))
    ci = paired_cluster_bootstrap(turns_a, turns_b, seed=seed, n_resamples=n_resamples)
    return {
        "turn_accuracy_diff": ci.estimate,
        "ci95": [ci.low, ci.high],
        "task_macro_diff": ci.task_macro_diff,
        "p_nonpositive": ci.p_nonpositive,
        "task_accuracy_diff": float(np.mean(solved_diff)),
        "n_episodes": len(common),
        "n_tasks": ci.n_clusters,
        "n_turns": ci.n_values,
        "n_resamples": ci.n_resamples,
        "seed": ci.seed,
    }
