"""The tier-1 prompt of the hierarchical manager (:mod:`harness.manager.hier`): one decision per checked state.

The hierarchical manager's tier 0 (the harness, no model) opens, updates, execution-checks and commits states; the
model (tier 1) is asked one question per state check: does the updated state hold? Its conversation is

1. ``system``: :data:`HIER_SYSTEM`: what it decides, the tools it may call, the two decisions, evidence-gated repair
   and the response format (short: the flat manager's lifecycle, flows and checklist are tier 0's business);
2. ``user``: :func:`render_decision`: the public turn, the draft state (issue, constraint texts, used variables with
   versions, conclusions, source interval, provisional relations), the executions tier 0 checked in this activation
   (verdict, error, reported results or the output tail, variables changed; the worker's code itself is not in any
   tool result, as for every manager), the committed-state index and the legal decisions with the action budget;
3. then its own earlier calls of the activation: the raw reply as an ``assistant`` message and the result as a
   ``user`` ``<tool_response>`` message whose last line is the evidence digest of the activation so far (tier 0's
   checks and tier 1's calls: :func:`~harness.manager.prompts.render_evidence`), the same format as
   :class:`~harness.manager.llm_policy.LLMPolicy`.

The function-tool list (:func:`tier1_tool_schemas`) is :func:`~harness.manager.actions.tool_schemas` filtered to the
read-only tools (:data:`TIER1_TOOLS`) and the two decisions (:data:`DECISIONS`): the same names and argument schemas
as the flat ``llm`` policy, so both speak one decision vocabulary.

When tier 1 writes checks (``HierPolicy(writes="checks")``) its conversation is two messages, once per state:
:data:`CHECKS_SYSTEM` (what a check is, the check kinds one line each as the flat prompt lists them,
:func:`~harness.manager.prompts.check_kind_lines`, and the reply shape of :mod:`harness.manager.hier_checks`) and
:func:`render_checks_request` (the sections of the decision prompt and how many checks will run); no tools.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.manager.actions import tool_schemas
from harness.manager.hier_checks import MAX_CHECKS
from harness.manager.prompts import CHECKS_SECTION, check_kind_lines
from harness.manager.wire import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from harness.untrusted import neutralize

TIER1_TOOLS: tuple[str, ...] = (
    "check_execution",
    "inspect_python",
    "compile_python",
    "run_probe",
    "run_check",
    "load_state",
)
"""The read-only tools tier 1 may call (their results come back to it)."""

DECISIONS: tuple[str, ...] = ("FINALIZE_RELATIONS", "REPAIR")
"""The decisions that end tier 1's part of the activation: the state holds, or a tool result shows an error."""

VALUE_CHARS = 200
"""Characters of one variable summary, output tail or result list shown in the decision prompt."""

HIER_SYSTEM = f"""\
You check one analytical state of a data-analysis session before it is committed. A worker agent answered the
turn's question by running Python cells in a persistent interpreter. The harness has recorded the state (issue,
constraints, variables with versions, conclusions, source steps) and checked that its steps executed. You decide
whether the state holds.

# Tools (read-only; each result comes back to you)
run_check runs a typed check spec (kinds below) in a clean process: passed, or what it found against what is
required. run_probe runs a short Python check over the task data and the worker's current variables (print what you
want to see; the worker's state is not changed). inspect_python and compile_python read a program's structure and
syntax. load_state shows a committed state in full. check_execution shows a worker step's executor record.

{CHECKS_SECTION}

# Decision (exactly one, it ends your part)
- FINALIZE_RELATIONS: the state holds. mode=confirm keeps the provisional relations (give relations as []);
  mode=revise replaces them (for example, the question corrects an earlier state: invalidate), with
  conflict_evidence saying why.
- REPAIR: a tool result shows a concrete error. analytical_evidence quotes that result (copy its numbers or
  message); error_hint names the worker variable that holds the wrong value and the faulty reasoning, in words.
  Never code, never the answer.

# Rules
Judge only by runtime evidence. Each tool result ends with a line "[evidence this activation: ...]" that counts the
failed checks and probes of this activation so far and quotes the first failure. A hunch, a style concern or a
surprising number is not evidence, and a false repair costs more than a missed one: when in doubt, confirm. A
REPAIR whose evidence quotes no check or probe result, any other action, a malformed reply or a tool call that leaves
no action for the decision is discarded and the state is confirmed. Use at most the actions the user message allows;
keep the last one for the decision.

# Response format
Optionally a short <think>...</think> block, then exactly one
{TOOL_CALL_OPEN}{{"name": <name>, "arguments": {{...}}}}{TOOL_CALL_CLOSE}
and nothing else."""


def tier1_tool_schemas() -> list[dict[str, Any]]:
    """The function tools tier 1 gets: :data:`TIER1_TOOLS` and :data:`DECISIONS`, in declaration order."""
    allowed = set(TIER1_TOOLS) | set(DECISIONS)
    return [tool for tool in tool_schemas() if tool["function"]["name"] in allowed]


def _cap(value: Any, limit: int = VALUE_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _value(value: Any, limit: int) -> Any:
    """``value`` as is when its JSON fits in ``limit`` characters, else its JSON capped (a string)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else _cap(text, limit)


def step_view(result: Mapping[str, Any]) -> dict[str, Any]:
    """One ``check_execution`` result as the decision prompt shows it: step id, verdict, error, the reported results
    (else the output tail) and the variables the step changed, by name, version and kind (their values are in the
    draft's used variables). Words and numbers are verbatim, long values capped."""
    if not result.get("ok"):
        return {"error": _cap(result.get("error", "the check could not run"))}
    shown: dict[str, Any] = {"step_id": result.get("step_id"), "verdict": result.get("verdict")}
    if result.get("error_type") or result.get("timed_out"):
        shown["error"] = _cap(f"{result.get('error_type')}: {result.get('error_message')}")
    if result.get("diff"):
        shown["diff"] = result["diff"]
    if result.get("results"):
        shown["results"] = _value(result["results"], 2 * VALUE_CHARS)
    elif result.get("stdout_tail"):
        shown["stdout_tail"] = _cap(result["stdout_tail"])
    variables = [v for v in result.get("variables", []) if isinstance(v, Mapping)]
    shown["variables"] = [f"{v.get('name')} v{v.get('version')} {v.get('kind')}" for v in variables]
    return shown


def draft_lines(draft: Mapping[str, Any]) -> list[str]:
    """The draft state as the decision prompt shows it, one field per line (its constraints are shown with the
    public turn)."""
    relations = [{k: v for k, v in r.items() if v is not None} for r in draft.get("relations", [])]
    lines = [
        f"issue: {draft.get('issue')}",
        f"source steps: {draft.get('source_step_start')}-{draft.get('source_step_end')}",
        f"provisional relations: {json.dumps(relations)}",
        "used variables:",
        *(f"- {v['name']} v{v['version']}: {_cap(v.get('value', ''))}" for v in draft.get("used_variables", [])),
        "conclusions:",
        *(f"- {c}" for c in draft.get("conclusions", [])),
    ]
    return lines


def render_decision(
    *,
    event_type: str,
    turn: Mapping[str, Any] | None,
    draft: Mapping[str, Any],
    checks: Sequence[Mapping[str, Any]],
    unchecked: tuple[int, int] | None,
    index: Sequence[Mapping[str, Any]],
    decisions: Sequence[str],
    repair_attempts: int,
    max_repairs: int,
    budget: int,
) -> str:
    """The user message that asks tier 1 for one decision (see the module docstring).

    ``turn``: the public turn (:func:`~harness.manager.policy_types.turn_view`); ``checks``: the ``check_execution``
    results tier 0 gathered in this activation; ``unchecked``: the inclusive range of the state's earlier steps that
    were not re-checked (None: all were); ``decisions``: the legal ones of :data:`DECISIONS`; ``budget``: the actions
    tier 1 may still take in this activation, the decision included. The turn, the draft, the checks and the index
    are untrusted text, so the whole message passes through :func:`harness.untrusted.neutralize` (the headings hold no
    token string)."""
    parts = [f"# Check state {draft.get('id')} ({event_type})", *_state_parts(turn, draft, checks, index, unchecked)]
    shown = []
    for name in decisions:
        if name == "REPAIR":
            mode = "light: a hint only" if repair_attempts == 0 else "heavy: the named variable is deleted first"
            shown.append(f"REPAIR (attempt {repair_attempts + 1} of {max_repairs}, {mode})")
        else:
            shown.append(f"{name} (confirm or revise)")
    parts += [
        "## Decide",
        f"Legal decisions: {'; '.join(shown)}.",
        f"You may take {budget} action(s) in all: up to {budget - 1} tool call(s), then the decision.",
    ]
    return neutralize("\n".join(parts))


def _state_parts(
    turn: Mapping[str, Any] | None,
    draft: Mapping[str, Any],
    checks: Sequence[Mapping[str, Any]],
    index: Sequence[Mapping[str, Any]],
    unchecked: tuple[int, int] | None = None,
) -> list[str]:
    """The sections both tier-1 prompts show: the public turn, the draft state, the executions tier 0 checked (and
    the state's steps it did not re-check) and the committed-state index."""
    parts = ["## Public turn", json.dumps(dict(turn), ensure_ascii=False)] if turn is not None else []
    parts += ["## Draft state", *draft_lines(draft)]
    parts += ["## Executions checked by the harness"]
    parts += [json.dumps(step_view(c), ensure_ascii=False) for c in checks] or ["(no executed step)"]
    if unchecked is not None:
        parts.append(f"Steps {unchecked[0]}-{unchecked[1]} of the state were not re-checked (use check_execution).")
    rows = [json.dumps(dict(row), ensure_ascii=False) for row in index]
    return [*parts, "## Committed states", *(rows or ["(none)"])]


# ---------------------------------------------------------------- tier 1 as a check writer
CHECKS_SYSTEM = f"""\
You write the checks a turn of a data-analysis session requires. A worker agent answered the turn's question by
running Python cells in a persistent interpreter; the harness recorded its state (issue, variables with their
values, conclusions) and checked that its steps executed. Read what the question asks for (a filter rule, a
rounding, the top N, an order, a join, a revised value, ...) and write each requirement as a check on the worker
variable that holds it. The harness runs every check in a clean process: when one fails it repairs the state and
quotes the failure to the worker; when all pass it confirms the state.

# Check kinds: kind(fields): what passes
`variable` is the worker variable checked; `source`, `left`, `right` and `join_right` name the worker variables it is
recomputed from; `column`, `by`, `on`, `columns` name columns. A field marked ? may be left out.
{chr(10).join(check_kind_lines())}

# Rules
Write only what the question and its context state, on the worker variables the draft state lists. A check the
question does not ask for can fail on a correct answer, and a false repair costs more than a missed one.

# Reply
Exactly one JSON object and nothing else: {{"checks": [{{"kind": ..., ...}}, ...]}}, at most {MAX_CHECKS} checks;
{{"checks": []}} when the question states nothing a kind covers."""


def render_checks_request(
    *,
    event_type: str,
    turn: Mapping[str, Any] | None,
    draft: Mapping[str, Any],
    checks: Sequence[Mapping[str, Any]],
    index: Sequence[Mapping[str, Any]],
    room: int,
) -> str:
    """The user message that asks tier 1 for the turn's checks: the sections of :func:`render_decision` (the public
    turn, the draft, tier 0's execution checks, the committed states) and the number of checks that will run
    (``room``). Untrusted text, so the whole message passes through :func:`harness.untrusted.neutralize`."""
    parts = [f"# Checks for state {draft.get('id')} ({event_type})", *_state_parts(turn, draft, checks, index)]
    parts += ["## Write the checks", f'Reply {{"checks": [...]}} with at most {room} check(s) this turn requires.']
    return neutralize("\n".join(parts))
