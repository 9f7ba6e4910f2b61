"""Workers: the agents the state manager watches (../shared/DESIGN.md §4).

- :class:`ScriptedWorker` replays given programs turn by turn, optionally with a fault (SIMULATED, no LLM).
- Faults as data: :mod:`harness.worker.faults` (``faults.jsonl``), shared by run, synthesis, envs and evaluation.
"""

from harness.worker.faults import Fault, FaultFileError, faults_for_task, infer_corrupted_variables, load_faults
from harness.worker.scripted import ScriptedWorker, WorkerStep, hint_localizes

__all__ = [
    "Fault",
    "FaultFileError",
    "ScriptedWorker",
    "WorkerStep",
    "faults_for_task",
    "hint_localizes",
    "infer_corrupted_variables",
    "load_faults",
]
