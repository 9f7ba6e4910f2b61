"""Parts (b)-(d) of the leakage audit: visible evidence of REPAIR samples, the gold checks on a faulted turn against
its clean twin's, and a classifier over the checks alone; see :mod:`synthesis.audit`."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from harness.manager.prompts import tool_response_body
from synthesis.audit.markers import EXAMPLES

logger = logging.getLogger(__name__)

CHECK_CONTROLS = ("REPAIR", "FINALIZE_RELATIONS")
"""The control actions that end a turn-end check activation."""


# ---------------------------------------------------------------- tool calls and results of a sample
def parse_call(content: str) -> tuple[str, dict[str, Any]]:
    """``(name, arguments)`` of one assistant message holding one ``<tool_call>`` JSON object."""
    start, end = content.find("<tool_call>"), content.rfind("</tool_call>")
    try:
        call = json.loads(content[start + len("<tool_call>") : end] if start >= 0 and end > start else content)
        return str(call["name"]), dict(call.get("arguments") or {})
    except (ValueError, KeyError, TypeError, AttributeError):
        return "(unparseable)", {"text": content[:200]}


def pre_decision_calls(messages: Sequence[Mapping[str, str]]) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of a sample before its final assistant message (its decision)."""
    assistant = [m["content"] for m in messages if m["role"] == "assistant"]
    return [parse_call(content) for content in assistant[:-1]]


def row_calls(row: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The checks a sample runs before its decision: :func:`pre_decision_calls`; for a ``hier_checks`` sample (its
    target is the checks tier 1 writes, tier 0 decides from their results) each spec of its reply as a
    ``run_check`` call."""
    if row.get("format") != "hier_checks":
        return pre_decision_calls(row["messages"])
    reply = [m["content"] for m in row["messages"] if m["role"] == "assistant"][-1:]
    try:
        specs = json.loads(reply[0])["checks"] if reply else []
    except (ValueError, KeyError, TypeError):
        return [("(unparseable)", {"text": reply[0][:200]})]
    return [("run_check", {"spec": spec}) for spec in specs]


def tool_results(messages: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """The JSON tool results (``<tool_response>`` messages) before the final assistant message."""
    last = max((k for k, m in enumerate(messages) if m["role"] == "assistant"), default=len(messages))
    out = []
    for message in messages[:last]:
        body = tool_response_body(message.get("content") or "")
        if message["role"] in ("user", "tool") and body is not None:
            try:
                value = json.loads(body)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append(value)
    return out


def shows_violation(result: Mapping[str, Any]) -> bool:
    """A tool result that shows a violation: a ``run_check`` that ran and did not pass (``passed`` false), a probe
    that ran and failed with an ``AssertionError``, or a ``check_execution`` verdict ``failed``."""
    if not result.get("ok"):
        return False
    if "passed" in result:
        return result["passed"] is False
    if "verdict" in result:
        return result["verdict"] == "failed"
    return result.get("succeeded") is False and result.get("error_type") == "AssertionError"


# ---------------------------------------------------------------- (b) evidence
def evidence_section(rows: Sequence[Mapping[str, Any]], examples: int = EXAMPLES) -> dict[str, Any]:
    """Part (b): of the samples ending in ``REPAIR``, how many hold a tool result showing the violation."""
    repairs = [(k, r) for k, r in enumerate(rows) if r.get("control") == "REPAIR" and r.get("format") != "hier_checks"]
    missing = [(k, r) for k, r in repairs if not any(shows_violation(t) for t in tool_results(r["messages"]))]
    with_evidence = len(repairs) - len(missing)
    return {
        "repair_samples": len(repairs),
        "repair_with_visible_evidence": with_evidence,
        "share": with_evidence / len(repairs) if repairs else None,
        "examples_without": [
            {"sample": k, "task_id": r["task_id"], "turn_id": r.get("turn_id"), "fault_id": r.get("fault_id")}
            for k, r in missing[:examples]
        ],
    }


# ---------------------------------------------------------------- (c) twins
def _checks(rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [r for r in rows if r.get("kind", "atomic") == "atomic" and r.get("control") in CHECK_CONTROLS]


def _show(call: tuple[str, dict[str, Any]] | None, limit: int = 200) -> str:
    if call is None:
        return "(no call)"
    text = f"{call[0]}({json.dumps(call[1], ensure_ascii=False, sort_keys=True)})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """The first index where two call lists differ (a missing call counts), or None when equal."""
    for k in range(max(len(a), len(b))):
        if k >= len(a) or k >= len(b) or a[k] != b[k]:
            return k
    return None


def twins_section(rows: Sequence[Mapping[str, Any]], examples: int = EXAMPLES) -> dict[str, Any]:
    """Part (c): the faulted first decisions and their clean twins (see the module docstring): ``pairs``,
    ``identical`` (same names and arguments, in order), ``same_tool_names``, ``unpaired`` (no clean twin in the
    rows), the same for the post-repair re-checks, and up to ``examples`` ``differences`` with the first one."""
    checks = _checks(rows)
    clean: dict[tuple[str, str, str], Mapping[str, Any]] = {}  # (task, turn, format): a twin in the same format
    for row in checks:
        if not row.get("fault_id") and row["control"] == "FINALIZE_RELATIONS":
            clean.setdefault((row["task_id"], row.get("turn_id", ""), row.get("format", "flat")), row)
    counts: Counter[str] = Counter()
    differences: list[dict[str, Any]] = []
    for row in checks:
        label = row.get("label")
        if not row.get("fault_id") or label not in ("repair", "benign", "undetectable", "post_repair"):
            continue
        prefix = "post_repair_" if label == "post_repair" else ""
        twin = clean.get((row["task_id"], row.get("turn_id", ""), row.get("format", "flat")))
        if twin is None:
            counts[prefix + "unpaired"] += 1
            continue
        faulted, reference = row_calls(row), row_calls(twin)
        counts[prefix + "pairs"] += 1
        counts[prefix + "identical"] += faulted == reference
        counts[prefix + "same_tool_names"] += [c[0] for c in faulted] == [c[0] for c in reference]
        where = first_difference(faulted, reference)
        if where is not None and not prefix and len(differences) < examples:
            differences.append(
                {
                    "task_id": row["task_id"], "turn_id": row.get("turn_id"), "fault_id": row["fault_id"],
                    "fault_type": row.get("fault_type"), "control": row["control"], "call": where,
                    "faulted": _show(faulted[where] if where < len(faulted) else None),
                    "clean": _show(reference[where] if where < len(reference) else None),
                }
            )  # fmt: skip
    pairs, post = counts["pairs"], counts["post_repair_pairs"]
    return {
        "pairs": pairs,
        "identical": counts["identical"],
        "identical_share": counts["identical"] / pairs if pairs else None,
        "same_tool_names": counts["same_tool_names"],
        "unpaired": counts["unpaired"],
        "post_repair_pairs": post,
        "post_repair_identical": counts["post_repair_identical"],
        "post_repair_identical_share": counts["post_repair_identical"] / post if post else None,
        "differences": differences,
    }


# ---------------------------------------------------------------- (d) classifier
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
MAX_VOCABULARY = 1000


def call_tokens(calls: Sequence[tuple[str, dict[str, Any]]]) -> set[str]:
    """The bag of words of tool calls: their names and the words and numbers of their argument JSON, lowercased."""
    text = " ".join(f"{name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}" for name, args in calls)
    return {word.lower() for word in _WORD.findall(text)} | {f"call:{name}" for name, _ in calls}


def fit_logistic(x: np.ndarray, y: np.ndarray, steps: int = 200, lr: float = 1.0, l2: float = 1e-4) -> np.ndarray:
    """Weights (bias last) of an L2 logistic regression by full-batch gradient descent. ``x``: (n, d), ``y``: (n,)."""
    xb = np.hstack([x, np.ones((len(x), 1), dtype=x.dtype)])
    w = np.zeros(xb.shape[1], dtype=x.dtype)
    y = y.astype(x.dtype)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -30, 30)))
        w -= lr * (xb.T @ (p - y) / len(y) + l2 * w)
    return w


def predict_logistic(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Boolean predictions (probability > 0.5) of :func:`fit_logistic` weights. ``x``: (n, d)."""
    return x @ w[:-1] + w[-1] > 0


def classifier_section(rows: Sequence[Mapping[str, Any]], seed: int = 0, folds: int = 5) -> dict[str, Any]:
    """Part (d): grouped k-fold (by task, ``min(folds, tasks)`` folds, tasks shuffled by ``seed``) accuracy of the
    bag-of-words classifier against the majority-class share; ``gap_points`` = 100 x (accuracy - majority)."""
    instances = [r for r in _checks(rows) if r.get("label") != "post_repair"]
    y = np.array([r["control"] == "REPAIR" for r in instances], dtype=float)
    tasks = sorted({r["task_id"] for r in instances})
    result: dict[str, Any] = {"instances": len(instances), "repair": int(y.sum()), "tasks": len(tasks)}
    majority = float(max(y.mean(), 1 - y.mean())) if len(y) else None
    result.update(accuracy=None, majority_accuracy=majority, gap_points=None, folds=0)
    if len(tasks) < 2:
        result["reason"] = "fewer than two tasks with check activations"
        return result
    bags = [call_tokens(row_calls(r)) for r in instances]
    order = [tasks[k] for k in np.random.default_rng(seed).permutation(len(tasks))]
    k = min(folds, len(tasks))
    fold_of = {task: i % k for i, task in enumerate(order)}
    groups = np.array([fold_of[r["task_id"]] for r in instances])
    correct = np.zeros(len(instances), dtype=bool)
    for fold in range(k):
        train, test = np.flatnonzero(groups != fold), np.flatnonzero(groups == fold)
        counts = Counter(word for i in train for word in bags[i])
        vocabulary = {
            w: j for j, (w, _) in enumerate(sorted(counts.items(), key=lambda c: (-c[1], c[0]))[:MAX_VOCABULARY])
        }
        x = np.zeros((len(instances), len(vocabulary)), dtype=np.float32)
        for i in np.concatenate([train, test]):
            x[i, [vocabulary[w] for w in bags[i] if w in vocabulary]] = 1.0
        w = fit_logistic(x[train], y[train])
        correct[test] = predict_logistic(w, x[test]) == (y[test] > 0.5)
    accuracy = float(correct.mean())
    result.update(accuracy=accuracy, gap_points=100 * (accuracy - majority), folds=k)
    return result
