"""Worker-facing hint text: fixed, reference-only wording (the authority boundary: the worker decides).

- A *state hint* is a JSON list of the selected committed states inside an ``<analytical_state_hint>`` block,
  followed by :data:`STATE_HINT_NOTE`. A state that a later state invalidated (relation ``invalidate``) carries
  ``"invalidated_by": "<state id>"`` and the hint then also ends with :data:`INVALIDATED_NOTE`: its result must not
  be reused.
- A *repair hint* is an ``<error_hint>`` block naming the error variable and the faulty reasoning (plus the
  evidence the manager obtained), followed by :data:`REPAIR_HINT_NOTE`.

The manager never solves the task: a repair hint that carries code (a fenced block or a Python statement that
assigns) or is longer than :data:`MAX_REPAIR_HINT_CHARS` is refused with :class:`HintError`, which the runtime
returns to the manager as the action's result.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from typing import Any

from harness.pyast import parse_python

STATE_HINT_NOTE = (
    "The states above were recorded by a supervisor from earlier steps of this analysis. They are observations "
    "for reference only: verify any value against the data or your own results before you build on it."
)
INVALIDATED_NOTE = (
    "A state marked invalidated_by was superseded by the named later state, which revised one of its assumptions: "
    "do not reuse its result; recompute what you need under the revised assumption."
)
REPAIR_HINT_NOTE = (
    "This hint is for reference only and may be wrong: re-check the named variable and the reasoning behind it "
    "yourself, then decide how to proceed."
)
MAX_REPAIR_HINT_CHARS = 800


class HintError(ValueError):
    """A hint the harness refuses to deliver (it would cross the authority boundary)."""


def render_state_hint(states: Sequence[dict[str, Any]]) -> str:
    """The block injected into the worker's prompt; ``""`` when no state is selected. States carrying
    ``invalidated_by`` add :data:`INVALIDATED_NOTE`."""
    if not states:
        return ""
    body = json.dumps(list(states), ensure_ascii=False, sort_keys=True, default=str)
    note = STATE_HINT_NOTE
    if any(state.get("invalidated_by") for state in states):
        note = f"{note} {INVALIDATED_NOTE}"
    return f"<analytical_state_hint>\n{body}\n</analytical_state_hint>\n{note}"


def _carries_code(text: str) -> bool:
    if "```" in text:
        return True
    for line in text.splitlines():
        line = line.strip()
        if "=" not in line or line.startswith(("#", "-", "*")):
            continue
        try:
            tree = parse_python(line)
        except SyntaxError:
            continue
        if any(isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) for node in tree.body):
            return True
    return False


def render_repair_hint(variable: str, faulty_reasoning: str, evidence: str = "") -> str:
    """The ``<error_hint>`` block for the worker. Raises :class:`HintError` for an empty variable, code, or length."""
    if not variable.strip():
        raise HintError("error_hint: name the error variable (the variable whose value is wrong).")
    text = f"{faulty_reasoning}\n{evidence}"
    if _carries_code(text):
        raise HintError(
            "error_hint: a repair hint may name a variable and explain the faulty reasoning, but must not carry code "
            "(no code blocks or assignments); describe the problem in words."
        )
    payload = {"variable": variable.strip(), "faulty_reasoning": faulty_reasoning.strip()}
    if evidence.strip():
        payload["evidence"] = evidence.strip()
    body = json.dumps(payload, ensure_ascii=False)
    if len(body) > MAX_REPAIR_HINT_CHARS:
        raise HintError(f"error_hint: {len(body)} characters; keep it under {MAX_REPAIR_HINT_CHARS}.")
    return f"<error_hint>\n{body}\n</error_hint>\n{REPAIR_HINT_NOTE}"
