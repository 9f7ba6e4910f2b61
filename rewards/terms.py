"""The reward terms: pure functions over one episode record.

Each term reads only the :class:`~harness.manager.episode.EpisodeRecord` (as its dict) and, where it grades a
decision, the episode's :class:`~rewards.faults.FaultInfo`; none runs code or calls a model. Each returns a float,
or ``None`` when the term does not apply to the episode (the total then leaves it out).

- :func:`protocol` in [0, 1]: the share of the policy's actions that parsed and were legal in the lifecycle,
  minus ``overrun_penalty`` times the share of activations that overran the budget (a policy activation that spent
  its actions without a legal control action, or a harness fallback activation: the policy ran out of its turn-end
  activations). ``None`` without policy actions (no manager).
- :func:`grounding` in [0, 1]: per committed state, the share of its checkable claims that match runtime evidence,
  averaged over the states. Claims: every variable name the policy's last ``UPDATE_STATE`` of that state named
  (a name the harness dropped because the sandbox never had it counts as ungrounded), and every conclusion holding
  a number. Evidence: the execution summaries of the worker steps in the state's source interval (a variable is
  grounded when a step there reported that name at the bound version with the bound value) and, for conclusions,
  the numbers in those steps' results, output and display, in the legal tool results taken while the state was open,
  plus the interval's step ids. A committed state with no checkable claim records nothing verifiable: 0.
  ``None`` without committed states.
- :func:`intervention`: grades the repairs (``record.repairs``, the ones the harness delivered) against the fault.
  A repair on any turn other than a harmful fault's turn (a clean turn, or a benign fault's turn) costs ``beta_fp``
  each; no repair on a harmful fault's turn costs ``beta_fn``. A repair on the harmful fault's turn earns
  ``repair_localized`` when its variable is one the fault corrupts (else ``repair_unlocalized``), plus
  ``repair_evidence`` when that REPAIR's ``analytical_evidence`` quotes a tool result of the same activation that
  revealed the violation (a failed probe or constraint, or a ``check_execution`` verdict ``failed``), plus
  ``repair_restored`` times the share of turns from the faulted one on graded correct. Why ``beta_fp > beta_fn``:
  a false alarm makes the worker redo a correct turn (a heavy repair even deletes its variables) and teaches the
  manager to distrust good work, while a miss is already paid for by the outcome term; so the intervention term
  charges false alarms more (enforced in :class:`~rewards.config.RewardConfig`).
- :func:`outcome` in [0, 1]: the share of turns from the faulted one on (every turn for a clean episode) that the
  grader marked correct (``record.grade["details"]["turns"]``). An invalid submission scores 0 (invalid is not
  "not applicable" for a reward: the episode produced nothing usable); ``None`` when the record is not graded.
- :func:`economy` in [0, 1]: tool calls beyond what evidence needs. Per policy activation ``min(1, tool_allowance /
  tool calls)``, averaged. The gold policy makes at most 3 tool calls per activation; spamming the budget halves it.
  ``None`` without policy activations. (DAPO's soft overlong punishment is a training-time token-length term, not
  part of the record's reward.)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from rewards.config import RewardConfig
from rewards.faults import FaultInfo

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)")
_TOKEN = re.compile(r"[a-z0-9_]{2,}")
EVIDENCE_TOKENS = 40
"""Tokens of a revealing tool result's error message compared with the repair's analytical evidence."""


# ---------------------------------------------------------------- record helpers
def _name(action: dict[str, Any]) -> str | None:
    parsed = action.get("parsed")
    return parsed.get("name") if isinstance(parsed, dict) else None


def _arguments(action: dict[str, Any]) -> dict[str, Any]:
    parsed = action.get("parsed")
    return (parsed.get("arguments") or {}) if isinstance(parsed, dict) else {}


def policy_activations(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [a for a in record.get("activations", []) if a.get("actor") == "policy"]


def state_context(record: dict[str, Any]) -> list[tuple[dict[str, Any] | None, list[str]]]:
    """Per committed state, in commit order: the arguments of the last legal ``UPDATE_STATE`` before its commit
    (None if there was none) and the legal tool results taken while it was open. Empty when the commits in the
    activations do not line up with ``record.states``."""
    update: dict[str, Any] | None = None
    tools: list[str] = []
    out: list[tuple[dict[str, Any] | None, list[str]]] = []
    for activation in record.get("activations", []):
        for action in activation.get("actions", []):
            if not action.get("legal"):
                continue
            name = _name(action)
            if action.get("kind") == "tool":
                tools.append(str(action.get("result") or ""))
            elif name == "UPDATE_STATE":
                update = _arguments(action)
            elif name in ("OPEN_STATE", "ABANDON_STATE", "COMMIT_STATE"):
                if name == "COMMIT_STATE":
                    out.append((update, tools))
                update, tools = None, []
    return out if len(out) == len(record.get("states", [])) else []


def numbers(text: str) -> list[float]:
    """The numbers written in ``text`` (not the digits inside identifiers such as ``S4`` or ``over_5``)."""
    return [float(m) for m in _NUMBER.findall(text)]


def _close(x: float, pool: Iterable[float]) -> bool:
    return any(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9) for y in pool)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


# ---------------------------------------------------------------- protocol
def protocol(record: dict[str, Any], fault: FaultInfo | None, config: RewardConfig) -> float | None:
    activations = policy_activations(record)
    actions = [a for act in activations for a in act.get("actions", [])]
    if not actions:
        return None
    legal = sum(bool(a.get("legal")) for a in actions) / len(actions)
    overruns = sum(
        not any(a.get("legal") and a.get("kind") == "control" for a in act.get("actions", [])) for act in activations
    )
    overruns += sum(a.get("actor") == "harness" for a in record.get("activations", []))
    share = overruns / max(len(record.get("activations", [])), 1)
    return max(0.0, legal - config.overrun_penalty * share)


# ---------------------------------------------------------------- grounding
def _interval_steps(record: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    start, end = state.get("source_step_start"), state.get("source_step_end")
    if start is None or end is None:
        return []
    return [s for s in record.get("worker_steps", []) if start <= s.get("step_id", -1) <= end]


def state_grounding(
    record: dict[str, Any], state: dict[str, Any], update: dict[str, Any] | None, tools: list[str]
) -> tuple[int, int]:
    """(grounded claims, checkable claims) of one committed state (see the module docstring)."""
    steps = _interval_steps(record, state)
    seen = {
        (v.get("name"), v.get("version"), v.get("summary"))
        for s in steps
        for v in ((s.get("execution") or {}).get("variables") or [])
    }
    bound = {v["name"]: v for v in state.get("used_variables", [])}
    claimed = list(dict.fromkeys(update.get("used_variables", []))) if update else list(bound)
    grounded = sum(
        name in bound and (name, bound[name].get("version"), bound[name].get("value")) in seen for name in claimed
    )
    evidence_text = list(tools)
    for s in steps:
        execution = s.get("execution") or {}
        evidence_text += [json.dumps(execution.get("results"), ensure_ascii=False), str(execution.get("display"))]
        evidence_text += [str(execution.get("stdout_tail") or "")]
    pool = set(numbers("\n".join(evidence_text))) | {float(s["step_id"]) for s in steps}
    checkable = 0
    for conclusion in state.get("conclusions", []):
        values = numbers(conclusion)
        if values:
            checkable += 1
            grounded += all(_close(v, pool) for v in values)
    return grounded, len(claimed) + checkable


def grounding(record: dict[str, Any], fault: FaultInfo | None, config: RewardConfig) -> float | None:
    states = record.get("states", [])
    if not states:
        return None
    context = state_context(record) or [(None, [])] * len(states)
    scores = []
    for state, (update, tools) in zip(states, context, strict=True):
        grounded, checkable = state_grounding(record, state, update, tools)
        scores.append(grounded / checkable if checkable else 0.0)
    return sum(scores) / len(scores)


# ---------------------------------------------------------------- intervention
def revealing(result_text: str) -> dict[str, Any] | None:
    """The parsed tool result when it shows a violation (failed probe or constraint, failed step), else None."""
    try:
        result = json.loads(result_text)
    except (TypeError, ValueError):
        return None
    if not isinstance(result, dict) or not result.get("ok"):
        return None
    if result.get("verdict") == "failed" or result.get("passed") is False or result.get("succeeded") is False:
        return result
    return None


def cites(evidence: str, result: dict[str, Any], overlap: float) -> bool:
    """True when ``evidence`` quotes at least ``overlap`` of the result's error message (or reason) tokens."""
    words = set(_tokens(evidence))
    for text in (result.get("error_message"), result.get("reason")):
        tokens = _tokens(str(text or ""))[:EVIDENCE_TOKENS]
        if tokens and sum(t in words for t in tokens) / len(tokens) >= overlap:
            return True
    return False


def _evidence_cited(record: dict[str, Any], fault: FaultInfo, config: RewardConfig) -> bool:
    """A localized REPAIR on the fault's turn quotes a revealing tool result of its own activation."""
    for activation in record.get("activations", []):
        if activation.get("actor") != "policy" or activation.get("turn_id") != fault.turn_id:
            continue
        revealed = []
        for action in activation.get("actions", []):
            if not action.get("legal"):
                continue
            if action.get("kind") == "tool" and (result := revealing(str(action.get("result") or ""))):
                revealed.append(result)
            elif _name(action) == "REPAIR":
                args = _arguments(action)
                variable = (args.get("error_hint") or {}).get("error_variable")
                evidence = str(args.get("analytical_evidence") or "")
                if variable in fault.variables and any(cites(evidence, r, config.evidence_overlap) for r in revealed):
                    return True
    return False


def _correct_share(record: dict[str, Any], start_turn: str | None) -> float | None:
    grade = record.get("grade")
    if not grade:
        return None
    if not grade.get("valid", True):
        return 0.0
    turns = (grade.get("details") or {}).get("turns") or {}
    order = list(turns)
    if not order:
        return float(grade.get("score") or 0.0)
    if start_turn in order:
        order = order[order.index(start_turn) :]
    return sum(bool(turns[t].get("correct")) for t in order) / len(order)


def intervention(record: dict[str, Any], fault: FaultInfo | None, config: RewardConfig) -> float | None:
    harmful = fault is not None and not fault.benign
    repaired_turns = list(dict.fromkeys(r.get("turn_id") for r in record.get("repairs", [])))
    score = 0.0 - config.beta_fp * sum(not (harmful and t == fault.turn_id) for t in repaired_turns)
    if not harmful:
        return score
    on_fault = [r for r in record.get("repairs", []) if r.get("turn_id") == fault.turn_id]
    if not on_fault:
        return score - config.beta_fn
    if not any(r.get("variable") in fault.variables or r.get("variable") == fault.error_variable for r in on_fault):
        return score + config.repair_unlocalized
    score += config.repair_localized
    if _evidence_cited(record, fault, config):
        score += config.repair_evidence
    return score + config.repair_restored * (_correct_share(record, fault.turn_id) or 0.0)


# ---------------------------------------------------------------- outcome and economy
def outcome(record: dict[str, Any], fault: FaultInfo | None, config: RewardConfig) -> float | None:
    return _correct_share(record, None if fault is None else fault.turn_id)


def economy(record: dict[str, Any], fault: FaultInfo | None, config: RewardConfig) -> float | None:
    activations = policy_activations(record)
    if not activations:
        return None
    scores = []
    for activation in activations:
        calls = sum(a.get("kind") == "tool" for a in activation.get("actions", []))
        scores.append(min(1.0, config.tool_allowance / calls) if calls else 1.0)
    return sum(scores) / len(scores)
