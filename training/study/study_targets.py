"""The study's targets, checked mechanically on its results: each met, missed or n/a, with the measured values.

Targets (``b - a`` differences and their task-clustered 95 % CIs from :mod:`training.study.episode_metrics`):

1. ``sft - prompt`` episode repair F1: the CI lies above 0;
2. ``sft - read`` episode repair F1: the CI lies above 0;
3. ``sft``'s false-repair rate on clean turns at most :data:`FALSE_REPAIR_TARGET`;
4. ``sft``'s DCR below ``none``'s: the CI of ``sft - none`` DCR lies below 0;
5. ``sft`` within :data:`F1_GAP_TARGET` F1 of ``gold-specs`` (the oracle upper bound): ``F1(gold-specs) - F1(sft)``
   at most that, on the episodes both played;
6. ``sft-dapo - sft`` episode reward: the CI lies above 0 (a CI below 0 is missed too: DAPO lowered it).

A target whose arms did not run, or whose difference is undefined (no shared episode, no fault and no repair), is
``n/a`` with the reason. A missed target carries its measured values; a ``note`` given for it (``notes``: target id
-> text, e.g. the measured reason DAPO did not move the reward) is kept beside them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FALSE_REPAIR_TARGET = 0.05
F1_GAP_TARGET = 0.1


def _comparison(results: Mapping[str, Any], a: str, b: str, metric: str) -> dict[str, Any] | None:
    for row in results.get("comparisons", []):
        if (row["a"], row["b"]) == (a, b):
            return row.get(metric)
        if (row["a"], row["b"]) == (b, a) and row.get(metric) is not None:
            found = row[metric]
            ci = found.get("ci95")
            return {**found, "diff": -found["diff"], "a": found.get("b"), "b": found.get("a"),
                    "ci95": None if ci is None else [-ci[1], -ci[0]]}  # fmt: skip
    return None


def _missing(results: Mapping[str, Any], *arms: str) -> str | None:
    absent = [a for a in arms if a not in results.get("arms", {})]
    if not absent:
        return None
    reasons = results.get("unavailable", {})
    return "; ".join(f"arm {a} did not run" + (f" ({reasons[a]})" if a in reasons else "") for a in absent)


def _ci_target(
    results: Mapping[str, Any], tid: str, text: str, a: str, b: str, metric: str, above: bool = True
) -> dict[str, Any]:
    """Met when the CI of ``b - a`` ``metric`` lies above 0 (``above``), else below 0."""
    row = {"id": tid, "target": text}
    if reason := _missing(results, a, b):
        return {**row, "status": "n/a", "value": None, "reason": reason}
    diff = _comparison(results, a, b, metric)
    if diff is None or diff.get("ci95") is None:
        return {**row, "status": "n/a", "value": diff, "reason": f"{b} - {a} {metric} is undefined on their episodes"}
    low, high = diff["ci95"]
    wrong_side = high < 0 if above else low > 0
    status = "met" if (low > 0 if above else high < 0) else "missed"
    side = "below" if above else "above"
    reason = None if status == "met" else f"the CI lies {side} 0" if wrong_side else "the CI includes 0"
    return {**row, "status": status, "value": diff, "reason": reason}


def targets(results: Mapping[str, Any], notes: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """Every target of the module docstring on ``results`` (its ``arms``: arm -> ``{"metrics"}``, ``comparisons``
    and ``unavailable``): ``{"id", "target", "status": met|missed|n/a, "value", "reason"}`` (+ ``note``)."""
    arms = results.get("arms", {})
    out = [
        _ci_target(results, "f1-sft-prompt", "sft - prompt episode repair F1: 95% CI above 0", "prompt", "sft",
                    "repair_f1"),
        _ci_target(results, "f1-sft-read", "sft - read episode repair F1: 95% CI above 0", "read", "sft",
                    "repair_f1"),
    ]  # fmt: skip
    row = {"id": "false-repairs-sft", "target": f"sft false repairs of clean turns <= {FALSE_REPAIR_TARGET:.0%}"}
    rate = ((arms.get("sft") or {}).get("metrics") or {}).get("false_repair_rate") or {}
    if reason := _missing(results, "sft"):
        out.append({**row, "status": "n/a", "value": None, "reason": reason})
    elif rate.get("value") is None:
        out.append({**row, "status": "n/a", "value": rate, "reason": "sft's episodes hold no clean turn"})
    else:
        met = rate["value"] <= FALSE_REPAIR_TARGET
        out.append({**row, "status": "met" if met else "missed", "value": rate,
                    "reason": None if met else f"{rate['value']:.3f} > {FALSE_REPAIR_TARGET}"})  # fmt: skip
    out.append(
        _ci_target(results, "dcr-sft-none", "sft DCR below none's: 95% CI of sft - none DCR below 0", "none", "sft",
                   "dcr", above=False)
    )  # fmt: skip
    row = {"id": "f1-sft-gold", "target": f"sft within {F1_GAP_TARGET} repair F1 of gold-specs (oracle upper bound)"}
    gap = _comparison(results, "gold-specs", "sft", "repair_f1")
    if reason := _missing(results, "sft", "gold-specs"):
        out.append({**row, "status": "n/a", "value": None, "reason": reason})
    elif gap is None:
        out.append({**row, "status": "n/a", "value": None, "reason": "F1 undefined on their shared episodes"})
    else:
        met = -gap["diff"] <= F1_GAP_TARGET + 1e-12
        reason = None if met else f"gold-specs - sft F1 = {-gap['diff']:.3f} > {F1_GAP_TARGET}"
        out.append({**row, "status": "met" if met else "missed", "value": gap, "reason": reason})
    out.append(
        _ci_target(results, "reward-dapo-sft", "sft-dapo - sft episode reward: 95% CI above 0", "sft", "sft-dapo",
                    "episode_reward")
    )  # fmt: skip
    for row in out:
        if notes and row["id"] in notes:
            row["note"] = notes[row["id"]]
    return out
