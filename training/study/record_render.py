"""The study's ``report.md`` (:func:`render_report`) and plots (:func:`write_plots`) from its results dict
(:func:`training.study.record.build_results`). Every table shows the baselines beside the models, the oracle arm
labelled; every worker number is SIMULATED."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.evaluation.report import fmt, interval, markdown_table

COUNTS = ("true_positive", "false_positive", "false_negative")
PLOTS = ("repair_f1.png", "false_repairs.png", "dcr.png")
KIND_COLORS = {"baseline": "tab:gray", "oracle": "tab:orange", "model": "tab:blue"}
PLOTTED = (("repair_f1", "episode repair F1"), ("false_repair_rate", "false repairs per clean turn"), ("dcr", "DCR"))


def _ci(entry: Mapping[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "n/a"
    return f"{entry['value']:.3f} {interval(entry.get('ci95'))}"


def _metric(name: str) -> Callable[[tuple[str, dict]], str]:
    return lambda row: _ci(row[1]["metrics"].get(name))


def _episodes(metrics: Mapping[str, Any]) -> str:
    return f"{metrics['episodes']} ({metrics['faulted_episodes']} / {metrics['clean_episodes']})"


ARM_COLUMNS = [
    ("arm", lambda r: r[1].get("label", r[0])),
    ("kind", lambda r: r[1].get("kind")),
    ("episodes (faulted / clean)", lambda r: _episodes(r[1]["metrics"])),
    ("repair P", lambda r: r[1]["metrics"]["repair_precision"]),
    ("repair R", lambda r: r[1]["metrics"]["repair_recall"]),
    ("repair F1 [95% CI]", _metric("repair_f1")),
    ("TP / FP / FN", lambda r: " / ".join(str(r[1]["metrics"]["counts"][k]) for k in COUNTS)),
    ("false repairs per clean turn [95% CI]", _metric("false_repair_rate")),
    ("turn acc [95% CI]", _metric("turn_accuracy")),
    ("DCR [95% CI]", _metric("dcr")),
    ("episode reward [95% CI]", _metric("episode_reward")),
]  # fmt: skip


def _diff(name: str) -> Callable[[dict[str, Any]], str]:
    def get(row: dict[str, Any]) -> str:
        entry = row.get(name)
        if entry is None:
            return "n/a"
        return f"{entry['diff']:+.3f} {interval(entry.get('ci95'))}"

    return get


def _label(arms: Mapping[str, Any], arm: str) -> str:
    return (arms.get(arm) or {}).get("label", arm)


def comparison_columns(arms: Mapping[str, Any]) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    return [
        ("b - a", lambda c: f"{_label(arms, c['b'])} - {_label(arms, c['a'])}"),
        ("episodes (tasks)", lambda c: f"{c['episodes']} ({c['tasks']})"),
        ("repair F1", _diff("repair_f1")),
        ("false repairs per clean turn", _diff("false_repair_rate")),
        ("turn acc", _diff("turn_accuracy")),
        ("DCR", _diff("dcr")),
        ("episode reward", _diff("episode_reward")),
    ]


def _target_value(value: Any) -> str:
    if not isinstance(value, Mapping):
        return fmt(value)
    if "diff" in value:
        return f"{value['diff']:+.3f} {interval(value.get('ci95'))} ({fmt(value.get('b'))} vs {fmt(value.get('a'))})"
    return _ci(value)


DECISION_COLUMNS = [
    ("arm", lambda r: r[0]),
    ("points (REPAIR)", lambda r: f"{r[1]['points']} ({r[1]['repair_points']})"),
    ("control = gold [95% CI]", lambda r: _ci(r[1].get("control_match"))),
    ("repair F1 [95% CI]", lambda r: _ci(r[1].get("repair_f1"))),
    ("false-repair rate [95% CI]", lambda r: _ci(r[1].get("false_repair_rate"))),
    ("decided [95% CI]", lambda r: _ci(r[1].get("decided"))),
]


def _settings_line(arm: str, entry: Mapping[str, Any]) -> str:
    settings = entry.get("settings") or {}
    served = settings.get("manager.json")
    shown = "no manager.json" if served is None else f"manager.json `{json.dumps(served, sort_keys=True)}`"
    extra = {k: v for k, v in settings.items() if k not in ("manager", "checkpoint", "manager.json")}
    tail = f"; {json.dumps(extra, sort_keys=True)}" if extra else ""
    return f"- {entry.get('label', arm)}: `--manager {settings.get('manager', '?')}`; {shown}{tail}"


def testset_lines(testset: Mapping[str, Any]) -> list[str]:
    """The frozen test set: what it is, its size, and how many editions have seen it."""
    named = ("id", "sha256", "domain", "question_writer", "seed", "path")
    known = ", ".join(f"{k}: `{testset[k]}`" for k in named if testset.get(k) is not None)
    seen = testset.get("editions_seen")
    return [
        "## Frozen test set\n",
        f"{known or '(no id recorded)'}. {testset.get('tasks', 0)} task(s), {testset.get('episodes', 0)} "
        f"episode(s): {testset.get('faulted_episodes', 0)} faulted (each fault detectable) and "
        f"{testset.get('clean_episodes', 0)} clean, full-length tasks. Editions that have seen it (this one "
        f"included): {'not recorded' if seen is None else seen}. No recipe choice was made on it.\n",
    ]


def render_report(results: Mapping[str, Any]) -> str:
    """``report.md`` of the study's results."""
    arms = results["arms"]
    rows = list(arms.items())
    oracle = [entry["label"] for entry in arms.values() if entry.get("kind") == "oracle"]
    boot = results.get("bootstrap") or {}
    lines = [
        "# The study: whole held-out episodes on a frozen test set (SIMULATED worker)\n",
        *(
            [
                "**INTERIM RECORD**: written while the study runs; not played yet: "
                f"{', '.join(results['unavailable'])}. The targets that need them are n/a here.\n"
            ]
            if results.get("interim")
            else []
        ),
        f"**Question.** {results.get('question', '')}\n",
        "**Design.** Each arm plays whole held-out episodes (every turn of each task; per task one clean episode and "
        "faulted ones, each fault detectable by checks) through `stateguard evaluate`, a model arm served from its "
        "checkpoint with the settings saved beside it (`manager.json`), no per-arm calibration. Primary metrics: "
        "episode repair F1 (a detectable fault repaired at its turn is a hit; a repair of a clean turn a false "
        "repair; turns downstream of the fault count neither way), false repairs per clean turn, turn accuracy, "
        "DCR and an episode reward ((hits - false repairs) / turns), each per arm and as paired differences with a "
        f"task-clustered bootstrap 95% CI ({boot.get('n_resamples', '?')} resamples). Worker: "
        f"{results.get('worker', 'scripted')}; turn accuracy, DCR and rewards are SIMULATED. Definitions: "
        "`training/study/episode_metrics.py`.\n",
        *testset_lines(results.get("testset") or {}),
        "## Results per arm (baselines beside models)\n",
        markdown_table(ARM_COLUMNS, rows),
        "",
        f"{', '.join(oracle)}: reads the gold's check specs, an oracle no deployed manager has: an upper bound, "
        "not a competitor.\n"
        if oracle
        else "",
        "![repair F1](repair_f1.png) ![false repairs](false_repairs.png) ![DCR](dcr.png)\n",
        "## Paired comparisons (b - a on the episodes both played; task-clustered bootstrap 95% CI)\n",
        markdown_table(comparison_columns(arms), results["comparisons"]) if results["comparisons"] else "(none)",
        "\n## Targets\n",
        *(
            f"- **{t['status']}**: {t['target']}: {_target_value(t.get('value'))}"
            + (f"; {t['reason']}" if t.get("reason") else "")
            + (f" ({t['note']})" if t.get("note") else "")
            for t in results.get("targets", [])
        ),
        "",
        *decision_lines(results),
        "## Settings per arm (what each was served with)\n",
        *(_settings_line(arm, entry) for arm, entry in rows),
        "\n## Arms not run\n",
        "\n".join(f"- {arm}: {why}" for arm, why in results.get("unavailable", {}).items()) or "(every arm ran)",
        "\n## Time per stage (s)\n",
        markdown_table([("stage", lambda r: r[0]), ("seconds", lambda r: r[1])], list(results["timing"].items())),
        "",
    ]
    return "\n".join(lines)


def decision_lines(results: Mapping[str, Any]) -> list[str]:
    """The decision-point diagnostic (when played): the digest rule beside the arms."""
    decisions = results.get("decisions") or {}
    if not decisions:
        return []
    return [
        "## Diagnostic: decision points (not the primary result)\n",
        "At held-out check activations the gold manager runs its checks, then the arm decides: repair or confirm "
        "(`training/study/decisions.py`). `digest-rule` repairs iff the evidence digest line reports a failed check "
        "(no model, `training/study/digest_rule.py`): a score it matches measures reading the digest, not writing "
        "checks.\n",
        markdown_table(DECISION_COLUMNS, list(decisions.items())),
        "",
    ]


def write_plots(out: Path, results: Mapping[str, Any]) -> list[Path]:
    """One bar chart per metric of :data:`PLOTTED` (value and 95% CI per arm, coloured by kind:
    baseline, oracle, model; ``n/a`` where undefined): :data:`PLOTS`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from harness.evaluation.report import save_figure

    arms = results["arms"]
    names = list(arms)
    paths = []
    for (metric, title), file in zip(PLOTTED, PLOTS, strict=True):
        entries = [arms[a]["metrics"].get(metric) or {} for a in names]
        values = [e.get("value") or 0.0 for e in entries]
        cis = [e.get("ci95") or [v, v] for v, e in zip(values, entries, strict=True)]
        errors = [[max(v - c[0], 0.0) for v, c in zip(values, cis, strict=True)],
                  [max(c[1] - v, 0.0) for v, c in zip(values, cis, strict=True)]]  # fmt: skip
        fig, ax = plt.subplots(figsize=(1.2 * len(names) + 3, 3.4))
        colors = [KIND_COLORS.get(arms[a].get("kind"), "tab:blue") for a in names]
        ax.bar(range(len(names)), values, yerr=errors, capsize=3, color=colors)
        for i, entry in enumerate(entries):
            if entry.get("value") is None:
                ax.text(i, 0, "n/a", ha="center", va="bottom", fontsize=8)
        shown = dict.fromkeys(arms[a].get("kind") for a in names)
        ax.legend(handles=[Patch(color=KIND_COLORS.get(k, "tab:blue"), label=str(k)) for k in shown], fontsize=7)
        labels = [arms[a].get("label", a).replace(" (", "\n(") for a in names]
        ax.set(xticks=range(len(names)), title=f"{title} per arm, 95% CI (SIMULATED worker)")
        ax.set_xticklabels(labels, fontsize=7)
        ax.axhline(0, color="black", linewidth=0.8)
        paths.append(save_figure(fig, out / file))
    return paths
