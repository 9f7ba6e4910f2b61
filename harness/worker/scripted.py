"""The scripted worker: executes given programs turn by turn. Everything it produces is SIMULATED.

It plays a task's reference code (read from the task's private reference, which only the harness sees), or, for a
turn with a :class:`~harness.worker.faults.Fault`, the faulty code. When it receives a repair hint that *localizes*
the fault (names one of the variables the fault corrupts) it re-runs the correct code on its next attempt;
otherwise it keeps its answer. This makes synthesis, RL replay and offline evaluation deterministic and free of LLM
calls (../shared/DESIGN.md §4).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from harness.sandbox import Kernel
from harness.worker.faults import Fault
from harness.worker.step import WorkerStep


def hint_localizes(hint: str, variables: tuple[str, ...]) -> bool:
    """True when ``hint`` names one of ``variables`` as a whole word."""
    return any(re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", hint) for name in variables)


class ScriptedWorker:
    """Replays reference programs (or faulty ones) in a sandbox kernel; labelled simulated everywhere.

    Args:
        kernel: the episode's sandbox kernel (one namespace across turns).
        programs: ``{turn_id: reference code}`` (e.g. from ``task.load_answers()``).
        faults: ``{turn_id: Fault}`` for this task (see :func:`~harness.worker.faults.faults_for_task`).
    """

    simulated = True

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

    def fault_active(self, turn_id: str) -> bool:
        return turn_id in self.faults and turn_id not in self.repaired

    def corrupted_variables(self, turn_id: str) -> tuple[str, ...]:
        fault = self.faults.get(turn_id)
        return fault.corrupted_variables(self.programs[turn_id]) if fault else ()

    def run_turn(self, turn_id: str, hint: str | None = None) -> WorkerStep:
        """Execute the turn's program (the faulty one while its fault is active). ``hint`` is recorded only: the
        scripted worker follows its script (a state hint cannot change a replayed program)."""
        if turn_id not in self.programs:
            raise KeyError(f"no program for turn {turn_id!r}; known turns: {sorted(self.programs)}")
        faulty = self.fault_active(turn_id)
        code = self.faults[turn_id].code if faulty else self.programs[turn_id]
        thought = f"(simulated) run the {'faulty' if faulty else 'reference'} program of turn {turn_id}"
        return self._execute(turn_id, code, thought, meta={"faulty": faulty, "hint_received": hint is not None})

    def repair(self, turn_id: str, hint: str) -> WorkerStep:
        """React to a repair hint for ``turn_id``.

        A hint that localizes an active fault makes the worker re-run the correct program (the fault is repaired);
        any other hint leaves the worker's answer as it was (a step with no code is recorded).
        """
        if self.fault_active(turn_id) and hint_localizes(hint, self.corrupted_variables(turn_id)):
            self.repaired.add(turn_id)
            return self._execute(
                turn_id,
                self.programs[turn_id],
                f"(simulated) the hint names a corrupted variable; re-run the correct program of turn {turn_id}",
                meta={"faulty": False, "repair": "localized"},
            )
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
        return step

    def _execute(self, turn_id: str, code: str, thought: str, meta: dict[str, Any]) -> WorkerStep:
        t0 = time.perf_counter()
        result = self.kernel.execute(code)
        answer = result.results[-1] if result.results else None
        self.answers[turn_id] = answer
        step = WorkerStep(
            step_id=len(self.steps),
            turn_id=turn_id,
            thought=thought,
            code=code,
            result=result,
            answer=answer,
            duration_s=time.perf_counter() - t0,
            meta=meta,
        )
        self.steps.append(step)
        return step
