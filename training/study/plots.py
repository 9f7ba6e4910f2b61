"""The study's plots: rates with their CIs per arm, reward by term, and the SFT / DAPO training curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.study.metrics import metric_entry

PLOTS = ("metrics.png", "rewards.png", "training_sft.png", "training_rl.png")


def write_plots(out: Path, results: dict[str, Any]) -> list[Path]:
    """``metrics.png`` (rates with CIs per arm), ``rewards.png`` (reward by term), ``training_sft.png`` (loss per
    step of every SFT arm and, when logged, the action-name tokens' own loss) and, when a DAPO arm trained,
    ``training_rl.png`` (reward, illegal-action rate, repair precision and recall per step)."""
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
    sft = {a: c for a, c in trained.items() if a not in ("sft-dapo", "rl-only")}
    decision = any(c.get("action_name_nll") for c in sft.values())  # the SFT logs the action names' own loss
    fig, axes = plt.subplots(1, 2 if decision else 1, figsize=(11 if decision else 6, 3.6), squeeze=False)
    for arm, curves in sft.items():
        for key, style in (("loss", "-"), ("eval_loss", "o--")):
            if curves.get(key):
                steps, values = zip(*curves[key], strict=True)
                axes[0][0].plot(steps, values, style, label=f"{arm} {key}")
        if decision and curves.get("action_name_nll"):
            steps, values = zip(*curves["action_name_nll"], strict=True)
            axes[0][1].plot(steps, values, ".", alpha=0.6, label=arm)
    axes[0][0].set(xlabel="step", ylabel="loss", title="SFT loss (trained tokens)")
    axes[0][0].legend(fontsize=7)
    if decision:
        axes[0][1].set(xlabel="step", ylabel="nats", title="loss of the action-name tokens (the decision)")
        axes[0][1].legend(fontsize=7)
    paths.append(save_figure(fig, out / PLOTS[2]))

    rl = {arm: trained[arm] for arm in ("sft-dapo", "rl-only") if trained.get(arm)}
    if rl:
        panels = [
            ("reward", "reward (mean of the batch)"),
            ("manager/illegal_action_rate", "illegal-action rate"),
            ("manager/repair_precision", "repair precision"),
            ("manager/repair_recall", "repair recall"),
        ]
        fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.4))
        for ax, (key, title) in zip(axes, panels, strict=True):
            for arm, curves in rl.items():
                if curves.get(key):
                    steps, values = zip(*curves[key], strict=True)
                    ax.plot(steps, values, "o-", label=arm)
            ax.set(xlabel="step", title=title)
            ax.legend(fontsize=7)
        fig.suptitle("DAPO on the training split's decision points")
        paths.append(save_figure(fig, out / PLOTS[3]))
    return paths
