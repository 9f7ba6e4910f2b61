"""The windowed policies: stateless hints from the last K worker steps; no state records, no committed-state index,
no verification tools.

Both have ``style == "windowed"``: the runtime never activates them (``respond`` returns ABSTAIN); at each turn start
(turn flow) or pause (segment flow) it asks ``window_hint(steps, turn)`` for a text to give the worker, where
``steps`` are all the worker's steps so far and ``turn`` the public turn (the task itself in the segment flow).

- :class:`WindowedModelPolicy` (``windowed:K:URL``, ``windowed-hf:K:PATH``) is the "w/o state validity maintenance"
  ablation: a chat model sees :data:`~harness.manager.prompts.WINDOWED_SYSTEM` and one user message
  (:func:`~harness.manager.prompts.render_window`: the turn's public context, question and constraint texts, and the
  last K steps as :func:`step_entry` entries with their output), and answers ``<hint>...</hint>`` or ``<silent/>``
  (:func:`parse_window_reply`). A hint reaches the worker wrapped by :func:`render_window_hint`; silence, an
  unreadable reply or a failed backend call (logged as a warning and counted in ``failures``) give no text. With no
  steps yet the model is not asked.
- :class:`WindowRulePolicy` (``window-rule[:K]``) asks no model: it repeats the last K steps to the worker as a
  ``<recent_steps>`` block holding a JSON list, one entry per step::

      {"step_id": 4, "turn_id": "2", "thought": "...", "code": "...", "outcome": "ok; wrote: total, share"}

  followed by :data:`WINDOW_HINT_NOTE`. The same steps always give the same text.

In an entry ``thought`` and ``code`` are shortened to :data:`THOUGHT_CHARS` / :data:`CODE_CHARS` (head and tail kept,
the middle replaced by ``…``); ``outcome`` is ``ok`` or ``error: <type>: <message>`` (``no code`` for a step without a
cell), plus the variables the cell created or changed; the model's entries add ``output`` (printed text, display and
reported results, :data:`OUTPUT_CHARS` at most).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Any

from harness.llm import ChatBackend, HFChatBackend, Message, OpenAIChatBackend
from harness.manager.actions import make_action
from harness.manager.policy_registry import register_policy
from harness.manager.policy_types import Policy, PolicyInput
from harness.manager.prompts import WINDOWED_SYSTEM, render_window
from harness.manager.wire import THINK_CLOSE, render_action
from harness.specs import ManagerSpec
from harness.tasks import Turn
from harness.worker.step import WorkerStep

logger = logging.getLogger(__name__)

THOUGHT_CHARS = 160
CODE_CHARS = 240
ERROR_CHARS = 120
OUTPUT_CHARS = 300
HINT_CHARS = 600
WINDOW_HINT_NOTE = (
    "These are your own most recent steps, repeated as a reminder. They were not checked by anyone: treat them as "
    "reference only and re-verify any value before you build on it."
)
MODEL_HINT_TAG = "observer_hint"
MODEL_HINT_NOTE = (
    "An observer that saw only your last {k} steps wrote this hint. It was not verified: treat it as reference only "
    "and check it against your own results before you act on it."
)
_HINT = re.compile(r"<hint>(.*?)</hint>", re.DOTALL)


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


def step_output(step: WorkerStep) -> str:
    """What the step's cell showed: its printed text, its display and its reported results, shortened."""
    result = step.result
    if result is None:
        return ""
    parts = [result.stdout.strip(), (result.display or "").strip()]
    parts += [json.dumps(r, ensure_ascii=False, default=str) for r in result.results]
    return shorten("\n".join(p for p in parts if p), OUTPUT_CHARS)


def step_entry(step: WorkerStep, with_output: bool = False) -> dict[str, Any]:
    """One step as the windowed policies show it (``output`` added when ``with_output``)."""
    entry: dict[str, Any] = {
        "step_id": step.step_id,
        "turn_id": step.turn_id,
        "thought": shorten(step.thought, THOUGHT_CHARS),
        "code": shorten(step.code, CODE_CHARS),
        "outcome": step_outcome(step),
    }
    if with_output:
        entry["output"] = step_output(step)
    return entry


def _check_k(k: object, policy: str) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{policy} policy: k={k!r} must be an integer >= 1 (the number of recent steps shown).")
    return k


def _abstain() -> str:
    return render_action(make_action("ABSTAIN", {}))


class WindowRulePolicy:
    """The model-free reminder of the last ``k`` worker steps (see the module docstring)."""

    name = "window-rule"
    active = True
    style = "windowed"

    def __init__(self, k: int = 3):
        self.k = _check_k(k, "window-rule")

    def window_hint(self, steps: Sequence[WorkerStep], turn: Turn | None = None) -> str:
        """The hint for the worker's next prompt from the last ``k`` of ``steps``; ``""`` when there are none."""
        recent = list(steps)[-self.k :]
        if not recent:
            return ""
        body = json.dumps([step_entry(step) for step in recent], ensure_ascii=False)
        return f"<recent_steps>\n{body}\n</recent_steps>\n{WINDOW_HINT_NOTE}"

    def respond(self, inp: PolicyInput) -> str:
        return _abstain()  # never asked: a windowed policy gets no activations


def parse_window_reply(text: str) -> str:
    """The hint in a windowed model's reply, ``""`` for silence.

    Only the text after the last ``</think>`` counts; its last non-empty ``<hint>...</hint>`` is the hint (whitespace
    stripped); a reply without one (``<silent/>``, prose, an unclosed tag) is silence."""
    text = text.rsplit(THINK_CLOSE, 1)[-1]
    hints = [h.strip() for h in _HINT.findall(text) if h.strip()]
    return hints[-1] if hints else ""


def render_window_hint(hint: str, k: int) -> str:
    """The fixed worker-facing text around a model's hint (shortened to :data:`HINT_CHARS`; tag text removed)."""
    for tag in (f"<{MODEL_HINT_TAG}>", f"</{MODEL_HINT_TAG}>"):
        hint = hint.replace(tag, "")
    body = shorten(hint, HINT_CHARS)
    return f"<{MODEL_HINT_TAG}>\n{body}\n</{MODEL_HINT_TAG}>\n{MODEL_HINT_NOTE.format(k=k)}"


class WindowedModelPolicy:
    """Stateless hints from a chat model that sees the public turn and the last ``k`` steps (module docstring)."""

    active = True
    style = "windowed"

    def __init__(self, backend: ChatBackend, k: int = 3, *, name: str = "windowed", system: str = WINDOWED_SYSTEM):
        self.backend, self.k, self.name, self.system = backend, _check_k(k, name), name, system
        self.calls = 0
        self.failures = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def messages(self, steps: Sequence[WorkerStep], turn: Turn | None) -> list[Message]:
        """The chat conversation for one hint decision: system prompt, then the window."""
        steps = list(steps)
        entries = [step_entry(step, with_output=True) for step in steps[-self.k :]]
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": render_window(turn, entries, len(steps))},
        ]

    def window_hint(self, steps: Sequence[WorkerStep], turn: Turn | None = None) -> str:
        """The worker-facing hint text, or ``""`` (no steps yet, silence, unreadable reply, failed backend call)."""
        if not steps:
            return ""
        try:
            reply = self.backend.chat(self.messages(steps, turn))
        except Exception as exc:  # a failed call is silence: the episode goes on without this hint
            self.failures += 1
            logger.warning("%s: the backend failed (%s: %s); no hint this time", self.name, type(exc).__name__, exc)
            return ""
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        hint = parse_window_reply(reply.text)
        logger.debug("%s: reply %d: %s", self.name, self.calls, "hint" if hint else "silent")
        return render_window_hint(hint, self.k) if hint else ""

    def respond(self, inp: PolicyInput) -> str:
        return _abstain()  # never asked: a windowed policy gets no activations


@register_policy("window-rule")
def _window_rule(spec: ManagerSpec) -> Policy:
    return WindowRulePolicy() if spec.k is None else WindowRulePolicy(spec.k)


@register_policy("windowed")
def _windowed(spec: ManagerSpec) -> Policy:
    assert spec.k is not None and spec.model is not None  # parse_manager_spec requires both
    return WindowedModelPolicy(OpenAIChatBackend(spec.model), spec.k, name="windowed")


@register_policy("windowed-hf")
def _windowed_hf(spec: ManagerSpec) -> Policy:
    assert spec.k is not None and spec.model is not None  # parse_manager_spec requires both
    return WindowedModelPolicy(HFChatBackend(spec.model), spec.k, name="windowed-hf")
