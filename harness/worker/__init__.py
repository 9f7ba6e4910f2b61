"""Workers: the agents the state manager watches.

- :class:`Worker` (:mod:`harness.worker.base`) is the one interface the manager runtime drives: whole turns
  (``run_turn``) or step by step (``begin`` + ``step``), ``repair`` within a reserved budget, ``note``.
- :class:`ScriptedWorker` replays given programs (cells split at ``# %%``), optionally with a fault (SIMULATED,
  no LLM); :func:`load_programs` finds a task's reference programs (``private/solution.py`` for single tasks).
- :class:`ReActWorker` is the model-driven code worker (thought + one cell, or a final answer) over an
  OpenAI-compatible endpoint or an in-process transformers model.
- Faults as data: :mod:`harness.worker.faults` (``faults.jsonl``), shared by run, synthesis, envs and evaluation;
  a fault for a single-question task uses the turn id ``"main"`` (:data:`SINGLE_TURN_ID`).
"""

from harness.llm import ChatReply, HFChatBackend, OpenAIChatBackend
from harness.worker.base import SINGLE_TURN_ID, Worker, split_cells
from harness.worker.faults import Fault, FaultFileError, faults_for_task, infer_corrupted_variables, load_faults
from harness.worker.react import ReActConfig, ReActWorker, parse_worker_reply
from harness.worker.scripted import SOLUTION_FILE, ScriptedWorker, hint_localizes, load_programs
from harness.worker.step import WorkerStep

__all__ = [
    "SINGLE_TURN_ID",
    "SOLUTION_FILE",
    "ChatReply",
    "HFChatBackend",
    "OpenAIChatBackend",
    "ReActConfig",
    "ReActWorker",
    "Worker",
    "parse_worker_reply",
    "Fault",
    "FaultFileError",
    "ScriptedWorker",
    "WorkerStep",
    "faults_for_task",
    "hint_localizes",
    "infer_corrupted_variables",
    "load_faults",
    "load_programs",
    "split_cells",
]
