"""The live view of an episode: what ``stateguard run`` shows while the worker and the manager work.

:class:`EpisodeView` consumes the runtime's events (``on_event(name, payload)`` of
:class:`~harness.manager.runtime.ManagerRuntime`) and keeps a small picture of the episode: the current turn, the
last worker steps, the last manager activations, the committed states and the hints delivered. It renders that
picture two ways:

- :meth:`EpisodeView.render`: a rich renderable (tables and panels) for :class:`rich.live.Live` on a terminal;
- :meth:`EpisodeView.line`: one plain line per event, for logs and non-terminal output (CI, pipes).

The view never changes the episode: it only reads the payloads, and the runtime shields the episode from any
exception raised here.
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

KEEP = 8  # rows kept per table
SHORT = 60  # characters of code / text shown per cell


def short(text: Any, limit: int = SHORT) -> str:
    """First line of ``text``, cut to ``limit`` characters with an ellipsis."""
    s = "" if text is None else str(text).strip()
    first = s.splitlines()[0] if s else ""
    more = len(s.splitlines()) > 1
    if len(first) > limit:
        return first[: limit - 1] + "…"
    return first + (" …" if more else "")


def _action_label(action: dict[str, Any]) -> str:
    parsed = action.get("parsed") or {}
    name = parsed.get("name") or "(unparsed)"
    return f"{name}{'' if action.get('legal') else '✗'}"


def _step_outcome(step: dict[str, Any]) -> str:
    execution = step.get("execution")
    if execution is None:
        return "answer" if step.get("answer") is not None else "-"
    if execution.get("ok"):
        return "ok"
    return f"{execution.get('error_type') or 'error'}"


class EpisodeView:
    """Accumulates runtime events; renders them as a rich live view or as log lines."""

    def __init__(self, title: str, *, simulated: bool = False):
        self.title = title
        self.simulated = simulated
        self.turn: dict[str, Any] | None = None
        self.steps: deque[dict[str, Any]] = deque(maxlen=KEEP)
        self.activations: deque[dict[str, Any]] = deque(maxlen=KEEP)
        self.states: list[dict[str, Any]] = []
        self.hints: deque[dict[str, Any]] = deque(maxlen=3)
        self.counts = {"steps": 0, "activations": 0, "actions": 0, "illegal": 0, "repairs": 0, "abandoned": 0}
        self.grade: dict[str, Any] | None = None

    # ------------------------------------------------------------------ events
    def on_event(self, name: str, payload: dict[str, Any]) -> None:
        handler = getattr(self, f"_on_{name}", None)
        if handler is not None:
            handler(payload)

    def _on_turn_start(self, payload: dict[str, Any]) -> None:
        self.turn = payload

    def _on_worker_step(self, payload: dict[str, Any]) -> None:
        self.steps.append(payload)
        self.counts["steps"] += 1

    def _on_activation(self, payload: dict[str, Any]) -> None:
        self.activations.append(payload)
        self.counts["activations"] += 1
        actions = payload.get("actions", [])
        self.counts["actions"] += len(actions)
        self.counts["illegal"] += sum(1 for a in actions if not a.get("legal"))

    def _on_hint(self, payload: dict[str, Any]) -> None:
        self.hints.append(payload)

    def _on_repair(self, payload: dict[str, Any]) -> None:
        self.counts["repairs"] += 1

    def _on_commit(self, payload: dict[str, Any]) -> None:
        self.states.append(payload)

    def _on_abandon(self, payload: dict[str, Any]) -> None:
        self.counts["abandoned"] += 1

    def _on_episode_end(self, payload: dict[str, Any]) -> None:
        self.grade = payload.get("grade")

    # ------------------------------------------------------------------ plain lines
    def line(self, name: str, payload: dict[str, Any]) -> str | None:
        """One log line for an event (None for events not worth a line)."""
        if name == "turn_start":
            return f"── turn {payload.get('turn_id')}: {short(payload.get('question'), 100)}"
        if name == "worker_step":
            code = short(payload.get("code"), 70) or short(payload.get("thought"), 70)
            return f"  worker step {payload.get('step_id')} [{_step_outcome(payload)}] {code}"
        if name == "activation":
            actions = " → ".join(_action_label(a) for a in payload.get("actions", []))
            actor = "" if payload.get("actor", "policy") == "policy" else f" ({payload['actor']})"
            return f"  manager #{payload.get('index')} {payload.get('event_type')}{actor}: {actions or '-'}"
        if name == "hint":
            return f"  hint ({payload.get('kind')}) → worker: {short(payload.get('text'), 90)}"
        if name == "repair":
            return (
                f"  repair attempt {payload.get('attempt')} ({payload.get('mode')}) on "
                f"{payload.get('variable')}; worker: {payload.get('worker_reaction') or '-'}"
            )
        if name == "commit":
            relations = ", ".join(_relation(r) for r in payload.get("relations", []))
            return f"  committed {payload.get('id')}: {short(payload.get('issue'), 60)} [{relations}]"
        if name == "abandon":
            return f"  abandoned {payload.get('state_id')} (turn {payload.get('turn_id')})"
        if name == "episode_end":
            grade = payload.get("grade") or {}
            return f"── episode end: score {grade.get('score')} (valid={grade.get('valid')})"
        return None

    # ------------------------------------------------------------------ rich
    def render(self) -> Group:
        header = Text(self.title, style="bold")
        if self.simulated:
            header.append("  SIMULATED (scripted worker)", style="yellow")
        if self.turn:
            header.append(f"\nturn {self.turn.get('turn_id')}: {short(self.turn.get('question'), 100)}")

        steps = Table(title="worker steps", expand=True, title_justify="left")
        for col in ("#", "turn", "code", "outcome", "variables"):
            steps.add_column(col, overflow="fold")
        for s in self.steps:
            changed = ", ".join(
                f"{v['name']}@v{v['version']}" for v in (s.get("execution") or {}).get("variables", [])
            )
            steps.add_row(str(s.get("step_id")), str(s.get("turn_id")), short(s.get("code")), _step_outcome(s),
                          short(changed, 40))  # fmt: skip

        manager = Table(title="manager activations", expand=True, title_justify="left")
        for col in ("#", "event", "turn", "actions"):
            manager.add_column(col, overflow="fold")
        for a in self.activations:
            manager.add_row(str(a.get("index")), str(a.get("event_type")), str(a.get("turn_id")),
                            " → ".join(_action_label(x) for x in a.get("actions", [])))  # fmt: skip

        states = Table(title="committed states", expand=True, title_justify="left")
        for col in ("id", "issue", "relations", "variables"):
            states.add_column(col, overflow="fold")
        for s in self.states[-KEEP:]:
            variables = ", ".join(f"{v['name']}@v{v['version']}" for v in s.get("used_variables", []))
            states.add_row(str(s.get("id")), short(s.get("issue"), 50),
                           ", ".join(_relation(r) for r in s.get("relations", [])), short(variables, 40))  # fmt: skip

        hints = Text("\n".join(f"[{h.get('kind')}] {short(h.get('text'), 110)}" for h in self.hints) or "-")
        c = self.counts
        footer = Text(
            f"steps {c['steps']} · activations {c['activations']} · actions {c['actions']} "
            f"(illegal {c['illegal']}) · repairs {c['repairs']} · abandoned {c['abandoned']}"
        )
        if self.grade is not None:
            footer.append(f" · score {self.grade.get('score')}", style="bold")
        return Group(header, steps, manager, states, Panel(hints, title="hints to the worker"), footer)


def _relation(relation: dict[str, Any]) -> str:
    target = relation.get("related_state_id")
    return relation.get("type", "?") + (f"→{target}" if target else "")


def grade_rows(grade: dict[str, Any] | None) -> list[tuple[str, str]]:
    """``(turn id, correct)`` rows of a multi-turn grade's details, or one ``("score", ...)`` row."""
    if not grade:
        return []
    turns = (grade.get("details") or {}).get("turns")
    if isinstance(turns, dict):
        return [(str(t), json.dumps(d.get("correct"))) for t, d in turns.items()]
    return [("score", json.dumps(grade.get("score")))]
