"""The manager's bookkeeping at turn start and turn end, as deterministic responses: what the gold manager of
synthesis writes and what the hierarchical manager's tier 0 writes, from the same code.

- :func:`open_response`: OPEN_STATE at a turn start: the issue ``Turn N: <question>``, the turn's constraints as the
  caller shows them, the relations the question names in words (:func:`~harness.manager.relations.infer_relations`),
  or the task graph's when the view shows it.
- :func:`update_response`: at a turn end with the state open: ``check_execution`` of the turn's latest step, then
  UPDATE_STATE with the variables that step wrote (as the sandbox reported them) and a conclusion quoting its
  reported result (or its error), the source interval from the first pending step to the latest.

Both take ``text``, a function applied to every natural-language field (the gold manager's optional paraphraser;
identity otherwise). Everything they read is in the :class:`~harness.manager.policy_types.PolicyInput`.
:func:`update_state_call` drafts UPDATE_STATE for them and for the rule policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from harness.manager.policy_types import PolicyInput, call, declared_relations
from harness.manager.relations import infer_relations

RESULT_CHARS = 300
"""Characters of a turn's reported result quoted in a conclusion."""


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (whitespace runs collapsed), cut to ``limit`` characters with ``...``."""
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _same(text: str) -> str:
    return text


def opening_relations(inp: PolicyInput) -> list[dict[str, Any]]:
    """The relations an OPEN_STATE for the turn of ``inp`` states: the task graph's under ``view.oracle_relations``,
    else those the question's words name (:func:`harness.manager.relations.infer_relations`)."""
    turn = inp.turn
    assert turn is not None
    if inp.view.oracle_relations:
        return declared_relations(turn.depends_on, turn.relation, inp.turn_states)
    return infer_relations(turn.question, turn.context or "", inp.turn_states)


def open_response(inp: PolicyInput, constraints: Iterable[dict[str, str]], text: Callable[[str], str] = _same) -> str:
    """OPEN_STATE for the turn of ``inp`` with ``constraints`` (ABSTAIN without a turn)."""
    turn = inp.turn
    if turn is None:
        return call("ABSTAIN")
    relations = opening_relations(inp)
    issue = text(f"Turn {turn.turn_id}: {one_line(turn.question, 300)}")
    return call("OPEN_STATE", {"issue": issue, "constraints": list(constraints), "relations": relations})


def update_response(
    inp: PolicyInput, obs: dict[str, Any], draft: dict[str, Any], text: Callable[[str], str] = _same
) -> str:
    """``check_execution`` of the latest pending step (when not yet called in this activation), then UPDATE_STATE
    from its result."""
    last = obs["pending_end_step"]
    if last is not None and not inp.tool_results:
        return call("check_execution", {"step_id": last})
    checks = [(last, json.loads(inp.tool_results[-1]))] if inp.tool_results else []

    def conclude(step: int, result: dict[str, Any]) -> str | None:
        if result.get("results"):
            reported = json.dumps(result["results"][-1], ensure_ascii=False, sort_keys=True)
            return text(f"Step {step} reported {one_line(reported, RESULT_CHARS)}.")
        if result.get("verdict") == "failed":
            error = f"{result.get('error_type')}: {result.get('error_message')}"
            return text(f"Step {step} did not run: {one_line(error, 200)}.")
        return None

    return update_state_call(draft, obs, checks, conclude, no_result="The turn reported no result.")


def update_state_call(
    draft: dict[str, Any],
    obs: dict[str, Any],
    checks: Iterable[tuple[int, dict[str, Any]]],
    conclude: Callable[[int, dict[str, Any]], str | None],
    *,
    no_result: str,
) -> str:
    """UPDATE_STATE of the open ``draft`` from the ``check_execution`` results of the steps the caller checked
    (``(step id, result)`` pairs, in step order): the variables every successfully checked step wrote (as the sandbox
    reported them), one conclusion per step that ``conclude`` words (None: nothing to say; ``no_result`` when no step
    has one), and the pending interval of ``obs`` as the source interval. The one place UPDATE_STATE is drafted: the
    rule policy checks every pending step, the bookkeeping (gold manager, tier 0) the latest one."""
    names: list[str] = []
    conclusions: list[str] = []
    for step, result in checks:
        if not result.get("ok"):
            continue
        names += [v["name"] for v in result.get("variables", []) if v.get("type") is not None]
        conclusion = conclude(step, result)
        if conclusion is not None:
            conclusions.append(conclusion)
    start, end = obs["pending_start_step"] or 0, obs["pending_end_step"]
    interval = {"start_step": start, "end_step": end if end is not None else start}
    return call(
        "UPDATE_STATE",
        {
            "issue": draft["issue"],
            "source_interval": interval,
            "used_variables": list(dict.fromkeys(names)),
            "conclusions": conclusions or [no_result],
        },
    )
