"""The clean twin of a faulted turn: the state the turn would have without its fault, to run the same checks on.

Synthesis writes each task clean and with each kept fault; a faulted episode replays the task with the scripted
worker carrying one fault on one turn, every earlier turn clean. So the clean twin's state at the end of the faulted
turn is the task's reference programs of every turn up to and including that one, run in order in a fresh kernel on
the task's public folder (cell by cell, as :class:`~harness.worker.scripted.ScriptedWorker` runs them).
:meth:`CleanTwins.verdicts` runs check specs there with :func:`harness.manager.tools.run_check` (the clean verifier,
as in the episode).

Cost: one kernel and the programs of the turns so far per (task, turn); the twin is kept while the same (task, turn)
is asked again (a group of rollouts replays one episode), so a group pays it once. The twin's kernel comes from the
env's sandbox (a second live kernel beside the episode's) and is closed with the env.

Limit: the twin is the state at the end of the turn. A check activation inside a turn (the segment flow's pauses)
sees a partial turn; its twin is still the whole turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envs.common import SandboxHolder
from harness.sandbox import Kernel, Sandbox
from harness.tasks import Task

logger = logging.getLogger(__name__)


class CleanTwins:
    """The clean twin states of one env (see the module docstring): one twin kernel at a time, from ``sandbox``."""

    def __init__(self, sandbox: Sandbox):
        self.holder = SandboxHolder(None, sandbox)
        self._key: tuple[Path, str] | None = None
        self.built = 0  # twins built (a measure of the cost)

    def verdicts(self, task: Task, turn_id: str, specs: Sequence[Any], timeout_s: float = 5.0) -> list[bool | None]:
        """The ``passed`` verdict of each of ``specs`` (check specs, as ``run_check`` takes them) on the clean twin's
        state of ``turn_id`` in ``task``: True, False, or None when the check could not run."""
        from harness.manager.tools import run_check

        kernel = self._twin(task, turn_id)
        out: list[bool | None] = []
        for spec in specs:
            out.append(verdict(run_check(kernel, spec, timeout_s=timeout_s).render()))
        return out

    def _twin(self, task: Task, turn_id: str) -> Kernel:
        from harness.worker.base import split_cells
        from harness.worker.scripted import load_programs

        key = (Path(task.public_dir).resolve(), str(turn_id))
        kernel = self.holder.kernel
        if self._key == key and kernel is not None and not kernel.closed:
            return kernel
        self._key = None
        programs = load_programs(task)
        order = [t.turn_id for t in task.turns] if task.kind == "multi_turn" else list(programs)
        if turn_id not in order:
            raise ValueError(f"turn {turn_id!r} is not a turn of task {task.id} (turns: {', '.join(order)})")
        kernel = self.holder.new_kernel(task.public_dir)
        for turn in order[: order.index(turn_id) + 1]:
            for cell in split_cells(programs[turn]):
                kernel.execute(cell)
        self._key, self.built = key, self.built + 1
        return kernel

    def close(self) -> None:
        self._key = None
        self.holder.close()


def verdict(result_text: str) -> bool | None:
    """The verdict of a ``run_check`` result (its rendered JSON): ``passed`` of a call that ran, else None (a refused
    call, a check that could not run, text that is not the result object)."""
    try:
        result = json.loads(result_text)
    except (TypeError, ValueError):
        return None
    if not isinstance(result, dict) or result.get("ok") is not True:
        return None
    passed = result.get("passed")
    return passed if isinstance(passed, bool) else None
