"""The one worker interface the manager runtime drives.

Both :class:`~harness.worker.scripted.ScriptedWorker` and :class:`~harness.worker.react.ReActWorker` implement
:class:`Worker`, so the runtime accepts either. Two ways to drive a worker:

- *whole turns*: ``run_turn(turn_id, prompt, hint)`` works on one question until the worker answers or its step
  budget is spent and returns the steps it took;
- *step by step* (how the runtime drives it in both flows, so every step is seen as it happens):
  ``begin(turn_id, prompt, hint=None)`` starts the question, then each ``step()`` takes one step and returns it, or
  ``None`` once the worker has finished (``finished`` is then True). In the segment-induced flow the harness pauses
  the worker between steps; ``note(text)`` adds a text (e.g. a windowed hint) to the worker's conversation, read
  with its next step.

``repair(turn_id, hint)`` re-analyses after a manager's repair hint. It runs within the worker's **reserved repair
budget** (``repair_steps``: :attr:`ReActConfig.repair_steps <harness.worker.react.ReActConfig.repair_steps>` for
the ReAct worker, one re-run for the scripted worker), never within the worker's own step budget; manager actions
never consume worker steps. In the segment flow the worker carries on with its own steps after a repair.

A worker whose model replies come from outside (a :class:`~harness.worker.react.ReActWorker` built without a chat
backend, as in :class:`envs.WorkerEnv`) also offers ``step_requests()`` and ``repair_requests(turn_id, hint)``:
generators that yield the chat message list each time the model must reply and receive the reply (text or
:class:`~harness.llm.ChatReply`), returning what ``step``/``repair`` return. The runtime advances workers through
:func:`step_requests` and :func:`repair_requests` (which fall back to ``step``/``repair``), so those requests become
the episode's own (:mod:`harness.manager.episode_loop`); :func:`answered` runs such a generator when every reply is
available without asking (a worker with its own backend), the blocking ``step``/``repair``.

Every step is a :class:`~harness.worker.step.WorkerStep` with its tokens and time; ``steps`` lists all of them in
order (``step_id`` is the index), ``answers`` maps a turn id to the worker's current answer. A single-question task
(closed_form, artifact) is one turn with the id :data:`SINGLE_TURN_ID` (``"main"``); a fault for it uses that id.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Generator
from typing import Any, Protocol, TypeVar, runtime_checkable

from harness.worker.step import WorkerStep

SINGLE_TURN_ID = "main"
"""The turn id of a single-question task (closed_form, artifact): its answer key, program key and fault turn id."""

CELL_MARKER = re.compile(r"^#\s*%%.*$", re.MULTILINE)
"""A line starting with ``# %%`` (the Jupytext / VS Code cell marker) separates cells of a scripted program."""

T = TypeVar("T")

Requests = Generator[list[dict[str, Any]], Any, T]
"""A worker's step or repair as a generator: yields the chat messages its model must reply to, receives the reply,
returns the step (or the repair's steps)."""


def _has_code(cell: str) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in cell.splitlines())


def split_cells(code: str) -> list[str]:
    """The cells of ``code`` split at ``# %%`` marker lines (markers dropped; cells of only comments and blank lines
    skipped; order kept). A program without markers is one cell (so a multi-turn reference turn stays one step)."""
    cells = [cell.strip("\n") for cell in CELL_MARKER.split(code)]
    return [cell for cell in cells if _has_code(cell)] or ([code] if code.strip() else [])


@runtime_checkable
class Worker(Protocol):
    """What the manager runtime needs from a worker (see the module docstring)."""

    steps: list[WorkerStep]
    answers: dict[str, Any]
    simulated: bool
    repair_steps: int
    """At most this many steps per :meth:`repair` call (the reserved re-analysis budget)."""

    @property
    def finished(self) -> bool:
        """True once the question started by :meth:`begin` needs no further :meth:`step`."""
        ...

    def run_turn(self, turn_id: str, prompt: str, hint: str | None = None) -> list[WorkerStep]:
        """Work on one question (``hint``, a state hint, is appended to ``prompt``); the steps it took."""
        ...

    def repair(self, turn_id: str, hint: str) -> list[WorkerStep]:
        """Re-analyse ``turn_id`` after a repair hint, within the reserved repair budget; the steps it took."""
        ...

    def begin(self, turn_id: str, prompt: str, hint: str | None = None) -> None:
        """Start a question (``hint`` appended to ``prompt``) that the harness then drives with :meth:`step`."""
        ...

    def step(self) -> WorkerStep | None:
        """Take one step of the current question; ``None`` when the worker has finished it."""
        ...

    def note(self, text: str) -> None:
        """Add ``text`` (a supervisor's note) to the worker's conversation, read with its next step."""
        ...


class StepwiseWorker(ABC):
    """The whole-turn loop every worker shares: :meth:`run_turn` is :meth:`begin`, then :meth:`step` until the
    worker has finished the question. Subclasses implement ``begin`` and ``step`` (see :class:`Worker`)."""

    @abstractmethod
    def begin(self, turn_id: str, prompt: str, hint: str | None = None) -> None:
        """Start a question (``hint`` appended to ``prompt``)."""

    @abstractmethod
    def step(self) -> WorkerStep | None:
        """Take one step of the current question; ``None`` when the worker has finished it."""

    def run_turn(self, turn_id: str, prompt: str = "", hint: str | None = None) -> list[WorkerStep]:
        """Work on one question (``hint``, a state hint, is appended to ``prompt``); the steps it took."""
        self.begin(turn_id, prompt, hint)
        produced = []
        while (step := self.step()) is not None:
            produced.append(step)
        return produced


def answered(requests: Requests[T]) -> T:
    """Run ``requests`` to its end when it asks for nothing (its worker has its own chat backend); its result.
    A request means the worker's replies come from outside: a ``RuntimeError`` naming the fix."""
    try:
        next(requests)
    except StopIteration as stop:
        return stop.value
    requests.close()
    raise RuntimeError(
        "the worker has no chat backend: its model replies come from outside. Advance it through the episode "
        "(ManagerRuntime.start(), next_request() / answer()) or give it a backend."
    )


def step_requests(worker: Worker) -> Requests[WorkerStep | None]:
    """``worker``'s next step, with the chat requests of a worker that offers ``step_requests()``; else ``step()``."""
    steps = getattr(worker, "step_requests", None)
    if steps is None:
        return worker.step()
    return (yield from steps())


def repair_requests(worker: Worker, turn_id: str, hint: str) -> Requests[list[WorkerStep]]:
    """``worker``'s repair, with the chat requests of a worker that offers ``repair_requests()``; else ``repair()``."""
    repair = getattr(worker, "repair_requests", None)
    if repair is None:
        return worker.repair(turn_id, hint)
    return (yield from repair(turn_id, hint))
