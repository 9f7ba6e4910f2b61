"""The study's numbers, report and plots, from episode records, exact-match scores and trainer logs.

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
  share: exact match per sample, legal-action rate and reward per episode, turn correctness per turn.

All worker numbers are SIMULATED: the scripted worker replays reference or faulty programs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.evaluation.report import fmt, interval, markdown_table
from harness.evaluation.stats import cluster_bootstrap_ci, paired_cluster_bootstrap, repair_precision_recall

if TYPE_CHECKING:
    from harness.manager.episode import EpisodeRecord
    from training.study import Study

PLOTS = ("metrics.png", "rewards.png", "training_sft.png", "training_rl.png")
LEGAL_TARGET = 0.95
SFT_ARMS = ("sft-lora", "sft-full")


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


def decision_metrics(rows: Sequence[dict[str, Any]], seed: int, n: int) -> dict[str, Any]:
    """The metrics of one arm's decision points (:mod:`training.study_decisions`): legal-action rate over the arm's
    actions in the point activations, control match (the control action that ended the activation equals the gold
    one), repair precision / recall / F1 against the REPAIR points, the false-repair rate over the COMMIT points,
    and the mean episode reward; each with its task-clustered bootstrap CI."""
    decisions = [(r["task_id"], r["gold"] == "REPAIR", bool(r["repaired"])) for r in rows]
    score = repair_precision_recall(
        [r["key"] for r in rows if r["repaired"]], [r["key"] for r in rows if r["gold"] == "REPAIR"]
    )
    legal = [(r["task_id"], float(a["legal"])) for r in rows for a in r["actions"]]
    f1 = f1_contributions(decisions)
    return {
        "points": len(rows),
        "repair_points": score.faulted,
        "legal_action_rate": _ci(legal, seed, n),
        "control_match": _ci([(r["task_id"], float(r["control"] == r["gold"])) for r in rows], seed, n),
        "repair_precision": score.precision,
        "repair_recall": score.recall,
        "repair_f1": _ci(f1, seed, n),
        "repair_counts": {"true_positive": score.true_positives, "repaired": score.repaired, "faulted": score.faulted},
        "false_repair_rate": _ci([(task, float(did)) for task, should, did in decisions if not should], seed, n),
        "reward_total": _ci([(r["task_id"], r["reward"]) for r in rows], seed, n),
        "controls": dict(sorted(Counter(str(r["control"]) for r in rows).items())),
    }


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
        for name, value in (("decision_reward", lambda r: r["reward"]), ("decision_match", _control_match)):
            point = {
                side: {r["key"]: (r["task_id"], value(r)) for r in (decisions or {}).get(side, [])} for side in (a, b)
            }
            row[name] = paired(point[a], point[b], seed, n)
        rows.append(row)
    return rows


def _control_match(row: dict[str, Any]) -> float:
    return float(row["control"] == row["gold"])


# ---------------------------------------------------------------- collection
def training_figures(folder: Path) -> dict[str, Any]:
    """Loss (and, for RL, reward / clip / filtered-group) curves and the final metrics of one trained arm."""
    state_path, results_path = folder / "trainer_state.json", folder / "all_results.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {}
    logs = state.get("log_history", [])
    results = json.loads(results_path.read_text()) if results_path.is_file() else {}
    results["steps"] = state.get("global_step")
    curves: dict[str, list[list[float]]] = {}
    for entry in logs:
        step = entry.get("step")
        for key, value in entry.items():
            wanted = key in ("loss", "eval_loss", "reward") or key.startswith(("rewards/", "clip", "dapo/"))
            if wanted and isinstance(value, int | float) and step is not None:
                curves.setdefault(key, []).append([step, float(value)])
    return {"curves": curves, "results": results}


def collect(
    study: Study,
    *,
    data: dict[str, Any],
    trained: dict[str, dict[str, Any]],
    exact: dict[str, list[dict[str, Any]]],
    evaluation: dict[str, Any],
    timing: dict[str, float],
    decisions: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The study's results dict (written to ``results.json``)."""
    from harness.evaluation.run import read_variant, variant_file
    from harness.evaluation.suite import resolve_suite
    from harness.tasks import load_task
    from synthesis.faults import BENIGN_TYPES
    from training.study import ARMS

    config = study.config
    seed, n = config.seed, config.n_resamples
    suite = resolve_suite(str(study.eval_suite()), limit=config.eval_limit, fault_limit=config.eval_fault_limit)
    specs = {spec.key: spec for spec in suite.episodes(with_faults=True)}
    turn_ids = {s.task_id: [str(t.turn_id) for t in load_task(s.task_dir).turns] for s in specs.values()}
    facts: dict[str, list[dict[str, Any]]] = {}
    arms: dict[str, Any] = {}
    for arm, summary in evaluation["variants"].items():
        records = [r for r in read_variant(variant_file(study.out / "eval", arm)) if r.config["eval"]["key"] in specs]
        facts[arm] = []
        for record in records:
            spec = specs[record.config["eval"]["key"]]
            benign = spec.fault is not None and spec.fault.fault_type in BENIGN_TYPES
            facts[arm].append(episode_facts(record, turn_ids[spec.task_id], spec.fault, benign))
        metrics = arm_metrics(facts[arm], exact.get(arm, []), seed, n)
        metrics.update(
            turn_accuracy={"value": summary["turn_accuracy"], "ci95": summary["turn_accuracy_ci95"]},
            dcr=summary["dcr"],
            manager=summary["manager"],
            decisions=decision_metrics(decisions[arm], seed, n) if decisions and decisions.get(arm) else None,
        )
        folder = trained.get(arm, {}).get("adapter") or trained.get(arm, {}).get("checkpoint")
        arms[arm] = {
            "description": ARMS[arm].description,
            "metrics": metrics,
            "training": {**training_figures(Path(folder)), "seconds": trained[arm].get("seconds")} if folder else None,
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
            "decision_max_responses": config.decision_max_responses,
        },
        "arms": arms,
        "unavailable": {arm: t["unavailable"] for arm, t in trained.items() if "unavailable" in t},
        "comparisons": comparisons(config.comparisons, facts, exact, seed, n, decisions),
        "timing": {**timing, "total": round(sum(timing.values()), 1)},
    }
    results["targets"] = targets(results)
    return results


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's three targets, each met / missed / n/a (or measured) with the numbers that decide it."""
    arms = results["arms"]

    def value(arm: str, metric: str) -> float | None:
        entry = metric_entry((arms.get(arm) or {}).get("metrics", {}), metric)
        return entry.get("value") if isinstance(entry, dict) else None

    prompt_legal = value("prompt", "legal_action_rate")
    out = []
    for arm in (a for a in SFT_ARMS if a in arms):
        legal = value(arm, "legal_action_rate")
        at_points = value(arm, "decisions.legal_action_rate")
        prompt_at_points = value("prompt", "decisions.legal_action_rate")
        note = f"(at the decision points: {fmt(at_points)}, prompt-only {fmt(prompt_at_points)})"
        out.append(
            {
                "target": f"{arm}: legal-action rate in the episodes >= {LEGAL_TARGET:.0%} (prompt-only: "
                f"{fmt(prompt_legal)})",
                "status": "n/a" if legal is None else "met" if legal >= LEGAL_TARGET else "missed",
                "value": legal,
                "note": "" if at_points is None else note,
            }
        )
        for metric, how in (
            ("repair_f1", "in episodes"),
            ("decisions.repair_f1", "closed loop at decision points"),
            ("repair_f1_exact", "teacher-forced"),
        ):
            f1, prompt_f1 = value(arm, metric), value("prompt", metric)
            decided = f1 is not None and prompt_f1 is not None
            out.append(
                {
                    "target": f"{arm}: repair F1 {how} above prompt-only ({fmt(prompt_f1)})",
                    "status": "met" if decided and f1 > prompt_f1 else "missed" if decided else "n/a",
                    "value": f1,
                }
            )
    dapo = next((c for c in results["comparisons"] if (c["a"], c["b"]) == ("sft-full", "sft-dapo")), None)
    measured = ("reward_total", "turn_accuracy", "legal_action_rate", "exact_match", "decision_reward")
    measured += ("decision_match",)
    effect = None if dapo is None else {k: dapo.get(k) for k in measured}
    out.append(
        {
            "target": "DAPO over SFT-only (sft-dapo - sft-full), measured with its CI",
            "status": "measured" if dapo else "n/a",
            "value": effect,
            "note": results["unavailable"].get("sft-dapo", ""),
        }
    )
    return out


# ---------------------------------------------------------------- outputs
def write_outputs(out: Path, results: dict[str, Any]) -> None:
    """``results.json``, ``report.md`` and the plots into ``out``."""
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    write_plots(out, results)
    (out / "report.md").write_text(render_report(results), encoding="utf-8")


def _metric(name: str, digits: int = 3) -> Callable[[tuple[str, dict]], str]:
    def get(row: tuple[str, dict]) -> str:
        entry = metric_entry(row[1]["metrics"], name)
        if not isinstance(entry, dict):
            return fmt(entry, digits)
        ci = f" {interval(entry['ci95'])}" if entry.get("ci95") else ""
        return fmt(entry["value"], digits) + ci

    return get


RESULT_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("legal-action rate [95% CI]", _metric("legal_action_rate")),
    ("exact match [95% CI]", _metric("exact_match")),
    ("repair P", lambda r: r[1]["metrics"]["repair_precision"]),
    ("repair R", lambda r: r[1]["metrics"]["repair_recall"]),
    ("repair F1 [95% CI]", _metric("repair_f1")),
    ("repair F1, teacher-forced [95% CI]", _metric("repair_f1_exact")),
    ("false-repair rate [95% CI]", _metric("false_repair_rate")),
    ("turn acc [95% CI]", _metric("turn_accuracy")),
    ("downstream turn acc", lambda r: r[1]["metrics"]["downstream_turn_accuracy"]["value"]),
    ("DCR", lambda r: r[1]["metrics"]["dcr"]),
    ("reward [95% CI]", _metric("reward_total")),
]


def _diff(name: str) -> Callable[[dict[str, Any]], str]:
    def get(row: dict[str, Any]) -> str:
        entry = row.get(name)
        return "n/a" if entry is None else f"{entry['diff']:+.3f} {interval(entry['ci95'])}"

    return get


COMPARISON_COLUMNS = [
    ("a", lambda c: c["a"]),
    ("b", lambda c: c["b"]),
    ("exact match b-a", _diff("exact_match")),
    ("legal rate b-a (per episode)", _diff("legal_action_rate")),
    ("turn acc b-a", _diff("turn_accuracy")),
    ("reward b-a", _diff("reward_total")),
    ("decision control=gold b-a", _diff("decision_match")),
    ("decision reward b-a", _diff("decision_reward")),
]


def _target_value(value: Any) -> str:
    """A target's number, or a measured effect's paired differences (``{metric: {diff, ci95}}``) one by one."""
    if not isinstance(value, dict):
        return fmt(value)
    shown = [f"{name} {d['diff']:+.3f} {interval(d['ci95'])}" for name, d in value.items() if d is not None]
    return "; ".join(shown) or "n/a (nothing both arms share)"


def render_report(results: dict[str, Any]) -> str:
    arms = results["arms"]
    terms = sorted({t for a in arms.values() for t in a["metrics"]["reward"]} - {"total"})
    reward_columns = [("arm", lambda r: r[0])] + [
        (term, lambda r, t=term: r[1]["metrics"]["reward"].get(t)) for term in [*terms, "total"]
    ]
    held = results["heldout"]
    fault_limit = results.get("config", {}).get("eval_fault_limit")
    played = "clean + one per fault" if fault_limit is None else f"clean + the first {fault_limit} faulted"
    if (turns := results.get("config", {}).get("eval_turns")) is not None:
        played += f"; each task cut to its first {turns} turns"
    lines = [
        "# Small-model study: SmolLM2-135M-Instruct as the manager (SIMULATED worker)\n",
        f"Held-out split: the held-out domain; fault types never in training: "
        f"{', '.join(held['fault_types_unseen_in_training'])}. Episodes: {held['tasks']} task(s), "
        f"{held['episodes']} episode(s) ({played}). "
        f"Exact match on {held['exact_match_samples']} held-out atomic samples per model arm. Training data: "
        f"{results['data']['train']['samples']} samples. Worker: scripted (replays reference or faulty programs), "
        "so turn accuracy, DCR and rewards are SIMULATED.\n",
        "## Results\n",
        markdown_table(RESULT_COLUMNS, list(arms.items())),
        "\n![metrics](metrics.png)\n",
        *decision_section(results),
        "## Reward by term (mean over episodes)\n",
        markdown_table(reward_columns, list(arms.items())),
        "\n![rewards](rewards.png)\n",
        "## Paired comparisons (b - a, task-clustered bootstrap 95% CI)\n",
        markdown_table(COMPARISON_COLUMNS, results["comparisons"]) if results["comparisons"] else "(none)",
        "\n## Targets\n",
        *(
            f"- **{t['status']}**: {t['target']}: {_target_value(t['value'])}"
            + (f" {t.get('note')}" if t.get("note") else "")
            for t in results["targets"]
        ),  # fmt: skip
        "",
        *scale_notes(results),
        "## Training curves\n",
        "![SFT loss](training_sft.png)" + (" ![RL](training_rl.png)" if "sft-dapo" in arms else "") + "\n",
        markdown_table(TRAINING_COLUMNS, [(a, v) for a, v in arms.items() if v["training"]]),
        "\n## Arms not run\n",
        "\n".join(f"- {arm}: {reason}" for arm, reason in results["unavailable"].items()) or "(every arm ran)",
        "\n## Time per stage (s; summed over the invocations that ran it, a training stage is its launch's)\n",
        markdown_table([("stage", lambda r: r[0]), ("seconds", lambda r: r[1])], list(results["timing"].items())),
        "",
    ]
    return "\n".join(lines)


DECISION_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("points (REPAIR)", lambda r: "{points} ({repair_points})".format(**r[1]["metrics"]["decisions"])),
    ("legal-action rate [95% CI]", _metric("decisions.legal_action_rate")),
    ("control = gold [95% CI]", _metric("decisions.control_match")),
    ("repair P", _metric("decisions.repair_precision")),
    ("repair R", _metric("decisions.repair_recall")),
    ("repair F1 [95% CI]", _metric("decisions.repair_f1")),
    ("false-repair rate [95% CI]", _metric("decisions.false_repair_rate")),
    ("reward [95% CI]", _metric("decisions.reward_total")),
    ("controls taken", lambda r: ", ".join(f"{k} {v}" for k, v in r[1]["metrics"]["decisions"]["controls"].items())),
]


def decision_section(results: dict[str, Any]) -> list[str]:
    """The decision-point table (closed loop at the commit-or-repair activations), when any arm played them."""
    rows = [(arm, a) for arm, a in results["arms"].items() if a["metrics"].get("decisions")]
    if not rows:
        return []
    held = results["heldout"]
    return [
        "## Decision points: commit or repair, closed loop\n",
        f"{held['decision_points']} held-out turn-end activations where the gold manager repairs (a harmful fault) "
        "or commits (repairing there is a false repair). The gold manager plays the episode up to the point and "
        f"after it; the arm plays the point's activation in the real manager env (tool calls run in the sandbox, "
        f"at most {held['decision_max_responses']} responses). The reward is the whole episode's (SIMULATED "
        "worker): an activation that ends without a control action leaves the turn end to the gold manager's next "
        "activation, which may still repair, so a missed repair there costs less reward than finalizing the faulty "
        "state. Module: `training/study_decisions.py`.\n",
        markdown_table(DECISION_COLUMNS, rows),
        "",
    ]


def scale_notes(results: dict[str, Any]) -> list[str]:
    """Why a missed target may be missed at this scale: the numbers that bound it, stated plainly."""
    missed = [t for t in results["targets"] if t["status"] == "missed"]
    if not missed:
        return []
    train = results["data"]["train"]["samples"]
    steps = {
        arm: (a["training"] or {}).get("results", {}).get("steps")
        for arm, a in results["arms"].items()
        if a["training"]
    }
    steps_text = ", ".join(f"{arm} {n}" for arm, n in steps.items()) or "no"
    return [
        f"Missed at this scale ({len(missed)} target(s)): the model has 135 M parameters; SFT had {train} "
        f"synthesized samples to draw from and ran {steps_text} optimizer steps (batch 1) on CPU; whole-episode "
        "samples exceed the 8,192-token context and are dropped; the episodes cap the manager's actions and reply "
        "length (see the config). Nothing was tuned on the held-out split.\n"
    ]


TRAINING_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("train samples", lambda r: r[1]["training"]["results"].get("data/train_samples")),
    ("of which by control action", lambda r: _strata(r[1]["training"]["results"], "data/train_control/")),
    ("steps", lambda r: r[1]["training"]["results"].get("steps")),
    ("first loss", lambda r: (r[1]["training"]["curves"].get("loss") or [[None, None]])[0][1]),
    ("last loss", lambda r: (r[1]["training"]["curves"].get("loss") or [[None, None]])[-1][1]),
    ("eval loss", lambda r: r[1]["training"]["results"].get("eval/loss")),
    ("seconds", lambda r: r[1]["training"].get("seconds")),
]


def _strata(results: dict[str, Any], prefix: str) -> str | None:
    """``"COMMIT_STATE 12, REPAIR 11, ..."``: an SFT's stratified subset counts (None: not stratified)."""
    parts = [f"{key.removeprefix(prefix)} {n}" for key, n in results.items() if key.startswith(prefix)]
    return ", ".join(parts) or None


# ---------------------------------------------------------------- plots
def write_plots(out: Path, results: dict[str, Any]) -> list[Path]:
    """``metrics.png`` (rates with CIs per arm), ``rewards.png`` (reward by term), ``training_sft.png`` (loss per
    step of every SFT arm) and, when the RL arm trained, ``training_rl.png`` (reward, clip, filtered-group curves)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from harness.evaluation.report import save_figure

    arms = results["arms"]
    names = list(arms)
    paths = []
    metrics = ["legal_action_rate", "exact_match", "repair_f1", "false_repair_rate", "turn_accuracy"]
    if any(arms[a]["metrics"].get("decisions") for a in names):
        metrics += ["decisions.control_match", "decisions.repair_f1"]

    def entry(arm: str, metric: str) -> dict[str, Any]:
        found = metric_entry(arms[arm]["metrics"], metric) or {}
        return {"value": found.get("value"), "ci95": found.get("ci95")}

    fig, ax = plt.subplots(figsize=(1.4 * len(names) + 4, 3.6))
    width = 0.8 / len(metrics)
    for i, metric in enumerate(metrics):
        entries = [entry(a, metric) for a in names]
        values = [e["value"] or 0.0 for e in entries]
        errors = [
            [v - (e["ci95"] or [v, v])[0] for v, e in zip(values, entries, strict=True)],
            [(e["ci95"] or [v, v])[1] - v for v, e in zip(values, entries, strict=True)],
        ]
        x = [j + (i - len(metrics) / 2 + 0.5) * width for j in range(len(names))]
        ax.bar(x, values, width, yerr=errors, capsize=2, label=metric.replace("_", " ").replace(".", ": "))
    ax.set(xticks=range(len(names)), xticklabels=names, ylim=(0, 1.05), title="per arm, 95% CI (SIMULATED worker)")
    ax.legend(fontsize=7, ncol=3)
    paths.append(save_figure(fig, out / PLOTS[0]))

    terms = sorted({t for a in arms.values() for t in a["metrics"]["reward"]})
    fig, ax = plt.subplots(figsize=(1.4 * len(names) + 4, 3.6))
    width = 0.8 / max(len(terms), 1)
    for i, term in enumerate(terms):
        x = [j + (i - len(terms) / 2 + 0.5) * width for j in range(len(names))]
        ax.bar(x, [arms[a]["metrics"]["reward"].get(term) or 0.0 for a in names], width, label=term)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set(xticks=range(len(names)), xticklabels=names, title="mean reward by term (SIMULATED worker)")
    ax.legend(fontsize=7, ncol=3)
    paths.append(save_figure(fig, out / PLOTS[1]))

    trained = {a: v["training"]["curves"] for a, v in arms.items() if v["training"]}
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for arm, curves in trained.items():
        for key, style in (("loss", "-"), ("eval_loss", "o--")):
            if curves.get(key):
                steps, values = zip(*curves[key], strict=True)
                ax.plot(steps, values, style, label=f"{arm} {key}")
    ax.set(xlabel="step", ylabel="loss", title="SFT loss (assistant tokens)")
    ax.legend(fontsize=7)
    paths.append(save_figure(fig, out / PLOTS[2]))

    rl = {k: v for k, v in (trained.get("sft-dapo") or {}).items() if k != "loss"}
    if rl:
        fig, ax = plt.subplots(figsize=(7, 3.6))
        for key, points in sorted(rl.items()):
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, label=key)
        ax.set(xlabel="step", title="DAPO: reward by term, clip fractions, filtered groups")
        ax.legend(fontsize=6)
        paths.append(save_figure(fig, out / PLOTS[3]))
    return paths
