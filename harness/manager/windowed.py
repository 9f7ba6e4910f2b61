"""The ``windowed`` ablation (issue 3 §4): stateless hints from the last K worker steps; no state store, no tools.

:class:`WindowedPolicy` never answers activations (``respond`` returns ABSTAIN; ``style == "windowed"`` tells the
runtime to skip the manager protocol). Instead the runtime asks :meth:`WindowedPolicy.window_hint` for a hint to put
into the worker's next prompt: a ``<recent_steps>`` block holding a JSON list, one entry per recent step::

    {"step_id": 4, "turn_id": "2", "thought": "...", "code": "...", "outcome": "ok; wrote: total, share"}

``thought`` and ``code`` are shortened to :data:`THOUGHT_CHARS` / :data:`CODE_CHARS` (head and tail kept, the middle
replaced by ``…``); ``outcome`` is ``ok`` or ``error: <type>: <message>`` (``no code`` for a step without a cell),
plus the variables the cell created or changed. The block is followed by :data:`WINDOW_HINT_NOTE`. The same steps
always give the same text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from harness.manager.actions import make_action
from harness.manager.policies import PolicyInput
from harness.manager.wire import render_action
from harness.worker.step import WorkerStep

THOUGHT_CHARS = 160
CODE_CHARS = 240
ERROR_CHARS = 120
WINDOW_HINT_NOTE = (
    "These are your own most recent steps, repeated as a reminder. They were not checked by anyone: treat them as "
    "reference only and re-verify any value before you build on it."
)


def shorten(text: str | None, limit: int) -> str:
    """``text`` stripped; when longer than ``limit`` characters, its head and tail joined by ``…`` (``limit`` long)."""
    text = (text or "").strip()
    if len(text) <= limit:
        return text
    head = (limit - 1) * 2 // 3
    tail = limit - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def step_outcome(step: WorkerStep) -> str:
    """``ok`` / ``error: ...`` / ``no code``, plus ``; wrote: a, b`` for the variables the cell created or changed."""
    result = step.result
    if result is None:
        return "no code"
    if result.ok:
        outcome = "ok"
    else:
        outcome = shorten(f"error: {result.error_type}: {result.error_message}", ERROR_CHARS)
    written = [v.name for v in result.variables if v.kind != "deleted"]
    deleted = [v.name for v in result.variables if v.kind == "deleted"]
    if written:
        outcome += "; wrote: " + ", ".join(written)
    if deleted:
        outcome += "; deleted: " + ", ".join(deleted)
    return outcome


class WindowedPolicy:
    """Stateless hints from the last ``k`` worker steps (see the module docstring)."""

    name = "windowed"
    active = True
    style = "windowed"

    def __init__(self, k: int = 3):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"windowed policy: k={k!r} must be an integer >= 1 (the number of recent steps shown).")
        self.k = k

    def window_hint(self, steps: Sequence[WorkerStep]) -> str:
        """The hint for the worker's next prompt from the last ``k`` of ``steps``; ``""`` when there are none."""
        recent = list(steps)[-self.k :]
        if not recent:
            return ""
        entries = [
            {
                "step_id": step.step_id,
                "turn_id": step.turn_id,
                "thought": shorten(step.thought, THOUGHT_CHARS),
                "code": shorten(step.code, CODE_CHARS),
                "outcome": step_outcome(step),
            }
            for step in recent
        ]
        body = json.dumps(entries, ensure_ascii=False)
        return f"<recent_steps>\n{body}\n</recent_steps>\n{WINDOW_HINT_NOTE}"

    def respond(self, inp: PolicyInput) -> str:
        return render_action(make_action("ABSTAIN", {}))
