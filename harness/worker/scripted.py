"""The scripted worker: executes given programs turn by turn. Everything it produces is SIMULATED.

It plays a task's reference code (read from the task's private folder, which only the harness sees), or, for a
turn with a :class:`~harness.worker.faults.Fault`, the faulty code. When it receives a repair hint that *localizes*
the fault (names one of the variables the fault corrupts) it re-runs the correct code on its next attempt;
otherwise it keeps its answer. This makes synthesis, RL replay and offline evaluation deterministic and free of LLM
calls. It implements :class:`~harness.worker.base.Worker`.

Programs (:func:`load_programs`):

- multi_turn: ``private/reference.json``, one program per turn;
- closed_form / artifact: ``private/solution.py`` (:data:`SOLUTION_FILE`), the reference solution of the single
  question, keyed by the turn id ``"main"`` (:data:`~harness.worker.base.SINGLE_TURN_ID`). A fault for a single task
  uses ``turn_id: main`` and its ``code`` replaces the whole program.

Each program is split into cells at ``# %%`` marker lines (:func:`~harness.worker.base.split_cells`); one cell is
one step. A program without markers is one step. A turn's answer is the last ``print_result`` value of its cells.
A localized repair re-runs, as one step, the correct cells up to where the worker was (the whole correct program
when the turn was finished) and the worker then carries on with the correct program.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.sandbox import Kernel
from harness.worker.base import SINGLE_TURN_ID, StepwiseWorker, split_cells
from harness.worker.faults import Fault
from harness.worker.step import WorkerStep

if TYPE_CHECKING:
    from harness.tasks import Task

SOLUTION_FILE = "solution.py"
"""closed_form / artifact: the reference solution the scripted worker plays, ``private/solution.py``."""


def hint_localizes(hint: str, variables: tuple[str, ...]) -> bool:
    """True when ``hint`` names one of ``variables`` as a whole word."""
    return any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", hint) for name in variables)


def load_programs(task: Task) -> dict[str, str]:
    """``{turn_id: reference program}`` of ``task`` (see the module docstring); raises ``ValueError`` with the fix
    when a single task has no ``private/solution.py``."""
    if task.kind == "multi_turn":
        return {turn_id: ref.code for turn_id, ref in task.load_answers().items()}  # type: ignore[union-attr]
    path = task.private_dir / SOLUTION_FILE
    if not path.is_file():
        raise ValueError(
            f"task {task.id} ({task.kind}) has no reference solution at {path}; the scripted worker plays it. "
            f"Write the solution program there (cells separated by '# %%' lines) or use a model worker."
        )
    return {SINGLE_TURN_ID: path.read_text(encoding="utf-8")}


class ScriptedWorker(StepwiseWorker):
    """Replays reference programs (or faulty ones) in a sandbox kernel; labelled simulated everywhere.

    Args:
        kernel: the episode's sandbox kernel (one namespace across turns).
        programs: ``{turn_id: reference code}`` (e.g. from :func:`load_programs`).
        faults: ``{turn_id: Fault}`` for this task (see :func:`~harness.worker.faults.faults_for_task`).
    """

    simulated = True
    repair_steps = 1  # a localized repair re-runs the correct program as one step

    def __init__(self, kernel: Kernel, programs: Mapping[str, str], faults: Mapping[str, Fault] | None = None):
        self.kernel = kernel
        self.programs = dict(programs)
        self.faults = dict(faults or {})
        unknown = sorted(set(self.faults) - set(self.programs))
        if unknown:
            raise ValueError(f"faults name turns {unknown} that have no program; known turns: {sorted(self.programs)}")
        self.repaired: set[str] = set()
        self.steps: list[WorkerStep] = []
        self.answers: dict[str, Any] = {}
        self.notes: list[str] = []  # texts the harness added to the conversation (recorded only)
        self._turn: str | None = None
        self._cells: list[str] = []
        self._cursor = 0
        self._faulty = False
        self._hinted = False

    @classmethod
    def for_task(cls, task: Task, kernel: Kernel, faults: Mapping[str, Fault] | None = None) -> ScriptedWorker:
        """The scripted worker of ``task``: its reference programs (:func:`load_programs`) and ``faults``."""
        return cls(kernel, load_programs(task), faults)

    def fault_active(self, turn_id: str) -> bool:
        return turn_id in self.faults and turn_id not in self.repaired

    def corrupted_variables(self, turn_id: str) -> tuple[str, ...]:
        fault = self.faults.get(turn_id)
        return fault.corrupted_variables(self.programs[turn_id]) if fault else ()

    # ---------------------------------------------------------------- step by step
    @property
    def finished(self) -> bool:
        return self._cursor >= len(self._cells)

    def begin(self, turn_id: str, prompt: str = "", hint: str | None = None) -> None:
        """Start ``turn_id``: its program (the faulty one while its fault is active) split into cells. ``prompt`` and
        ``hint`` are recorded only: the scripted worker follows its script."""
        if turn_id not in self.programs:
            raise KeyError(f"no program for turn {turn_id!r}; known turns: {sorted(self.programs)}")
        self._turn, self._faulty, self._hinted = turn_id, self.fault_active(turn_id), hint is not None
        self._cells = split_cells(self.faults[turn_id].code if self._faulty else self.programs[turn_id])
        self._cursor = 0

    def step(self) -> WorkerStep | None:
        if self._turn is None or self.finished:
            return None
        index, kind = self._cursor, "faulty" if self._faulty else "reference"
        self._cursor += 1
        return self._execute(
            self._turn,
            self._cells[index],
            f"(simulated) run cell {index + 1}/{len(self._cells)} of the {kind} program of turn {self._turn}",
            meta={"faulty": self._faulty, "hint_received": self._hinted, "cell": index, "cells": len(self._cells)},
        )

    def note(self, text: str) -> None:
        self.notes.append(text)

    # ---------------------------------------------------------------- whole turns
    def repair(self, turn_id: str, hint: str) -> list[WorkerStep]:
        """React to a repair hint for ``turn_id``.

        A hint that localizes an active fault makes the worker re-run the correct program so far (the fault is
        repaired) and carry on with it; any other hint leaves the worker's answer as it was (a step with no code).
        """
        if self.fault_active(turn_id) and hint_localizes(hint, self.corrupted_variables(turn_id)):
            self.repaired.add(turn_id)
            cells = split_cells(self.programs[turn_id])
            current = turn_id == self._turn
            done = len(cells) if not current or self.finished else min(self._cursor, len(cells))
            if current:
                self._cells, self._cursor, self._faulty = cells, done, False
            step = self._execute(
                turn_id,
                "\n\n".join(cells[:done]),
                f"(simulated) the hint names a corrupted variable; re-run the correct program of turn {turn_id}"
                + ("" if done == len(cells) else f" up to cell {done}"),
                meta={"faulty": False, "repair": "localized"},
            )
            return [step]
        step = WorkerStep(
            step_id=len(self.steps),
            turn_id=turn_id,
            thought="(simulated) the hint does not point at anything I changed; keep the answer",
            code=None,
            result=None,
            answer=self.answers.get(turn_id),
            meta={"repair": "ignored"},
        )
        self.steps.append(step)
        return [step]

    def _execute(self, turn_id: str, code: str, thought: str, meta: dict[str, Any]) -> WorkerStep:
        t0 = time.perf_counter()
        result = self.kernel.execute(code)
        if result.results:
            self.answers[turn_id] = result.results[-1]
        else:
            self.answers.setdefault(turn_id, None)
        step = WorkerStep(
            step_id=len(self.steps),
            turn_id=turn_id,
            thought=thought,
            code=code,
            result=result,
            answer=self.answers[turn_id],
            duration_s=time.perf_counter() - t0,
            meta=meta,
        )
        self.steps.append(step)
        return step
