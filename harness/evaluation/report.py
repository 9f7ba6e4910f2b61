"""``report.md`` of an evaluation: tables and plots (matplotlib, Agg backend) from ``results.json``.

Sections: the suite and config; per variant task/turn accuracy with the turn-accuracy 95 % CI, DCR (``n/a`` when
undefined) and its n (the turns of its clean and contaminated groups) and repair precision/recall; the paired
comparisons (turn-accuracy difference and its CI, the share of non-positive bootstrap resamples, the task-macro
difference, the task-accuracy difference); manager statistics
(states, relation mix, hints, tool calls, repairs, rollbacks, activations and latency), what the manager was shown
(task graph, constraint code, the rule verifier's constraints) with the relation accuracy per declared relation type,
and worker steps/tokens. A WARNING line under the title says when oracles were on for a held-out suite. Plots
(PNG next to the report): ``accuracy.png`` (turn accuracy with CI per variant), ``dcr.png``, ``relation_mix.png``,
``repairs.png``. Simulated results (scripted worker) are labelled SIMULATED in the title, the tables and every plot.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOTS = ("accuracy.png", "dcr.png", "relation_mix.png", "repairs.png")
REPORT_FILE = "report.md"


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown_table(columns: list[tuple[str, Any]], rows: list[Any]) -> str:
    """A markdown table: ``columns`` are ``(header, row -> value)``."""
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(get(row)) for _, get in columns) + " |" for row in rows]
    return "\n".join(lines)


def interval(ci: list[float] | None) -> str:
    return "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


VARIANT_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("simulated", lambda r: r[1]["simulated"]),
    ("episodes", lambda r: r[1]["n_episodes"]),
    ("errored", lambda r: r[1].get("n_errored", 0)),
    ("task acc", lambda r: r[1]["task_accuracy"]),
    ("turn acc", lambda r: r[1]["turn_accuracy"]),
    ("turn acc 95% CI", lambda r: interval(r[1]["turn_accuracy_ci95"])),
    ("DCR", lambda r: r[1]["dcr"]),
    ("DCR n", lambda r: dcr_n(r[1])),
    ("repair precision", lambda r: r[1]["repair_precision"]),
    ("repair recall", lambda r: r[1]["repair_recall"]),
]
COMPARISON_COLUMNS = [
    ("a", lambda c: c["a"]),
    ("b", lambda c: c["b"]),
    ("turn acc diff", lambda c: c["turn_accuracy_diff"]),
    ("95% CI", lambda c: interval(c["ci95"])),
    ("P(diff <= 0)", lambda c: c.get("p_nonpositive")),
    ("task-macro diff", lambda c: c.get("task_macro_diff")),
    ("task acc diff", lambda c: c["task_accuracy_diff"]),
    ("episodes", lambda c: c["n_episodes"]),
    ("tasks", lambda c: c["n_tasks"]),
]
COMPARISON_NOTE = (
    "\n\nP(diff <= 0): share of bootstrap resamples whose turn-accuracy difference is <= 0 (one-sided p-value for b "
    "better than a); task-macro diff: mean over tasks of each task's turn-accuracy difference."
)
MANAGER_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("states/episode", lambda r: r[1]["states_per_episode"]),
    ("activations/episode", lambda r: r[1]["activations_per_episode"]),
    ("latency mean s", lambda r: r[1]["latency_s"]["mean"]),
    ("latency p95 s", lambda r: r[1]["latency_s"]["p95"]),
    ("state hints", lambda r: r[1]["hints"]["state"]),
    ("repair hints", lambda r: r[1]["hints"]["repair"]),
    ("light repairs", lambda r: r[1]["repairs"]["light"]),
    ("heavy repairs", lambda r: r[1]["repairs"]["heavy"]),
    ("rollbacks", lambda r: r[1]["rollbacks"]),
    ("abandoned", lambda r: r[1]["abandoned_states"]),
    ("illegal actions", lambda r: r[1]["illegal_actions"]),
]
MIX_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("relations", lambda r: _counts(r[1]["relation_mix"])),
    ("tool calls", lambda r: _counts(r[1]["tool_calls"])),
    ("manager tokens (prompt/completion)", lambda r: "{prompt}/{completion}".format(**r[1]["manager_tokens"])),
]
BENCHMARK_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("DABench accuracy", lambda r: (r[1]["dabench"] or {}).get("accuracy")),
    ("DABench sub-answer accuracy", lambda r: (r[1]["dabench"] or {}).get("sub_accuracy")),
    ("DABench proportional", lambda r: (r[1]["dabench"] or {}).get("sub_accuracy_proportional")),
    ("quantile score", lambda r: (r[1]["quantile"] or {}).get("overall")),
]
RELATION_KINDS = ("init", "progress", "branch", "invalidate", "combine", "overall")
VIEW_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("task graph shown", lambda r: (r[1].get("manager_view") or {}).get("oracle_relations")),
    ("constraint code shown", lambda r: (r[1].get("manager_view") or {}).get("executable_constraints")),
    ("rule constraints", lambda r: r[1].get("rule_constraints")),
    *(
        (f"{kind} rel acc (n)", lambda r, kind=kind: relation_cell((r[1].get("relation_accuracy") or {}).get(kind)))
        for kind in RELATION_KINDS
    ),
]
VIEW_NOTE = (
    "\nRelation accuracy: per declared relation type of a turn, the share of turns whose committed state has exactly "
    "the task graph's relations (type and related states); a turn without a committed state counts as wrong. Rule "
    "constraints text-only: the rule verifier had no constraint code to probe.\n"
)
CHECK_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("faults detected", lambda r: (r[1].get("fault_detection") or {}).get("detection_rate")),
    ("faults", lambda r: (r[1].get("fault_detection") or {}).get("faults")),
    (
        "detectable faults detected",
        lambda r: (((r[1].get("fault_detection") or {}).get("detectable")) or {}).get("detection_rate"),
    ),
    ("false repairs / clean turn", lambda r: (r[1].get("fault_detection") or {}).get("false_repair_rate")),
    ("clean turns", lambda r: (r[1].get("fault_detection") or {}).get("clean_turns")),
    ("spec recall", lambda r: (r[1].get("spec_scores") or {}).get("recall")),
    ("spec precision", lambda r: (r[1].get("spec_scores") or {}).get("precision")),
]
CHECK_NOTE = (
    "\nFaults detected: faulted episodes whose fault turn the manager repaired (detectable: of the faults the suite "
    "marks detectable by the gold's checks; n/a when none is marked); false repairs: repaired turns of "
    "clean episodes. Spec recall/precision: the manager's run_check specs against the gold's (per kind in "
    "results.json); n/a when the suite's tasks carry no gold specs.\n"
)
WORKER_COLUMNS = [
    ("variant", lambda r: r[0]),
    ("steps", lambda r: r[1]["steps"]),
    ("steps/episode", lambda r: r[1]["steps_per_episode"]),
    ("prompt tokens", lambda r: r[1]["prompt_tokens"]),
    ("completion tokens", lambda r: r[1]["completion_tokens"]),
]


def render_report(results: dict[str, Any]) -> str:
    variants: dict[str, dict[str, Any]] = results["variants"]
    tag = " (SIMULATED: scripted worker)" if results.get("simulated") else ""
    suite, config = results["suite"], results["config"]
    managers = [(name, v["manager"]) for name, v in variants.items()]
    comparisons = results["comparisons"]
    parts = [
        f"# Evaluation{tag}\n",
        *oracle_lines(results.get("oracles")),
        *errored_lines(results.get("errored")),
        f"Suite **{suite['name']}**: {suite['source']}; {suite['tasks']} tasks, {suite['faults']} faults. "
        f"Worker `{config['worker']}`, runs {config['runs']}, bootstrap {config['n_resamples']} resamples "
        f"(seed {config['seed']}), clusters = tasks.\n",
        "## Accuracy, DCR, repairs\n",
        markdown_table(VARIANT_COLUMNS, list(variants.items())),
        "\nDCR = error rate of turns with at least one wrong declared upstream turn minus that of turns whose "
        "upstream are all right; turns without a 0/1 score are skipped; n/a when either group is empty. DCR n: the "
        "turns in those two groups.\n",
        "![accuracy](accuracy.png) ![dcr](dcr.png)\n",
        *(
            ["Official benchmark scoring:\n", markdown_table(BENCHMARK_COLUMNS, list(variants.items())) + "\n"]
            if any(v["dabench"] or v["quantile"] for v in variants.values())
            else []
        ),
        "## Paired comparisons (b - a)\n",
        markdown_table(COMPARISON_COLUMNS, comparisons) + COMPARISON_NOTE
        if comparisons
        else "(a single variant: nothing to compare)",
        "\n## Manager statistics\n",
        markdown_table(MANAGER_COLUMNS, managers),
        "\nRelation mix and tool calls:\n",
        markdown_table(MIX_COLUMNS, managers),
        "\n![relation mix](relation_mix.png) ![repairs](repairs.png)\n",
        "Manager view and relation accuracy:\n",
        markdown_table(VIEW_COLUMNS, list(variants.items())) + VIEW_NOTE,
        "Checks: fault detection and specs:\n",
        markdown_table(CHECK_COLUMNS, list(variants.items())) + CHECK_NOTE,
        "## Worker\n",
        markdown_table(WORKER_COLUMNS, [(name, v["worker"]) for name, v in variants.items()]),
        "\nVersions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + "\n",
    ]
    return "\n".join(parts)


def oracle_lines(oracles: dict[str, Any] | None) -> list[str]:
    """The report's lines on what the manager saw: a WARNING when oracles were on for a held-out suite."""
    if oracles is None:
        return []
    shown = [what for key, what in (("oracle_relations", "the task graph"), ("executable_constraints",
             "the constraint code")) if oracles.get(key)]  # fmt: skip
    lines = []
    if oracles.get("warning"):
        lines.append(f"> **WARNING: {oracles['warning']}**\n")
    view = f"ORACLES ON: {' and '.join(shown)}" if shown else "no oracles (relations inferred, constraint texts only)"
    public = oracles.get("constraint_code_public_tasks") or 0
    lines.append(f"Manager view: {view}; {public} task(s) declare their constraint code public.\n")
    return lines


def errored_lines(errored: dict[str, int] | None) -> list[str]:
    """A warning under the title when episodes errored: they are left out of every number below."""
    counts = {name: n for name, n in (errored or {}).items() if n}
    if not counts:
        return []
    shown = ", ".join(f"{name}: {n}" for name, n in counts.items())
    return [
        f"**ERRORED EPISODES ({shown})**: they could not be played or graded as the manager's own (an exception, "
        "or a manager backend that failed); every number below leaves them out, and a re-run with the same --out "
        "plays them again.\n"
    ]


def relation_cell(entry: dict[str, Any] | None) -> str:
    return "n/a" if not entry or not entry.get("n") else f"{fmt(entry['accuracy'])} ({entry['n']})"


def dcr_n(variant: dict[str, Any]) -> int | None:
    """The turns the DCR compares: those of its clean and of its contaminated group."""
    detail = variant.get("dcr_detail")
    return None if detail is None else detail["n_clean"] + detail["n_contaminated"]


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def write_plots(out: Path, results: dict[str, Any]) -> list[Path]:
    """The four plots of the report into ``out``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants: dict[str, dict[str, Any]] = results["variants"]
    names = list(variants)
    tag = " (SIMULATED)" if results.get("simulated") else ""
    x = list(range(len(names)))
    paths = []

    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.2))
    acc = [v["turn_accuracy"] or 0.0 for v in variants.values()]
    err = [
        [a - (v["turn_accuracy_ci95"] or [a, a])[0] for a, v in zip(acc, variants.values(), strict=True)],
        [(v["turn_accuracy_ci95"] or [a, a])[1] - a for a, v in zip(acc, variants.values(), strict=True)],
    ]
    ax.bar(x, acc, yerr=err, capsize=4, color="tab:blue")
    ax.set(xticks=x, xticklabels=names, ylim=(0, 1.05), ylabel="turn accuracy", title=f"turn accuracy, 95% CI{tag}")
    paths.append(save_figure(fig, out / PLOTS[0]))

    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.2))
    dcr = [v["dcr"] for v in variants.values()]
    ax.bar(x, [d or 0.0 for d in dcr], color="tab:red")
    for i, d in enumerate(dcr):
        ax.annotate("n/a" if d is None else f"{d:.2f}", (i, d or 0.0), ha="center", va="bottom")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.margins(y=0.2)
    ax.set(xticks=x, xticklabels=names, ylabel="DCR", title=f"Dependency Contamination Rate{tag}")
    paths.append(save_figure(fig, out / PLOTS[1]))

    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.2))
    kinds = sorted({k for v in variants.values() for k in v["manager"]["relation_mix"]})
    bottom = [0.0] * len(names)
    for kind in kinds:
        counts = [v["manager"]["relation_mix"].get(kind, 0) for v in variants.values()]
        ax.bar(x, counts, bottom=bottom, label=kind)
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    if kinds:
        ax.legend(fontsize=8)
    ax.set(xticks=x, xticklabels=names, ylabel="relations of committed states", title=f"relation mix{tag}")
    paths.append(save_figure(fig, out / PLOTS[2]))

    fig, ax = plt.subplots(figsize=(1.6 * len(names) + 2, 3.2))
    light = [v["manager"]["repairs"]["light"] for v in variants.values()]
    heavy = [v["manager"]["repairs"]["heavy"] for v in variants.values()]
    ax.bar(x, light, label="light")
    ax.bar(x, heavy, bottom=light, label="heavy")
    for i, v in enumerate(variants.values()):
        text = f"P {fmt(v['repair_precision'], 2)} / R {fmt(v['repair_recall'], 2)}"
        ax.annotate(text, (i, light[i] + heavy[i]), ha="center", va="bottom", fontsize=8)
    ax.legend(fontsize=8)
    ax.margins(y=0.2)
    ax.set(xticks=x, xticklabels=names, ylabel="repairs", title=f"repairs (precision / recall){tag}")
    paths.append(save_figure(fig, out / PLOTS[3]))
    return paths


def save_figure(fig: Any, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(out: str | Path, results: dict[str, Any]) -> Path:
    """``out/report.md`` and its plots; returns the report's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_plots(out, results)
    path = out / REPORT_FILE
    path.write_text(render_report(results), encoding="utf-8", errors="backslashreplace")  # a lone surrogate as text
    return path
