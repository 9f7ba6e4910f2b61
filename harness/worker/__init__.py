"""Workers: the agents the state manager watches (../shared/DESIGN.md §4).

- :class:`ScriptedWorker` replays given programs turn by turn, optionally with a fault (SIMULATED, no LLM).
- :class:`ReActWorker` is the model-driven code worker (thought + one cell, or a final answer) over an
  OpenAI-compatible endpoint or an in-process transformers model.
- Faults as data: :mod:`harness.worker.faults` (``faults.jsonl``), shared by run, synthesis, envs and evaluation.
"""

from harness.worker.faults import Fault, FaultFileError, faults_for_task, infer_corrupted_variables, load_faults
from harness.worker.react import ChatReply, OpenAIChatBackend, ReActConfig, ReActWorker, parse_worker_reply
from harness.worker.scripted import ScriptedWorker, hint_localizes
from harness.worker.step import WorkerStep

__all__ = [
    "ChatReply",
    "OpenAIChatBackend",
    "ReActConfig",
    "ReActWorker",
    "parse_worker_reply",
    "Fault",
    "FaultFileError",
    "ScriptedWorker",
    "WorkerStep",
    "faults_for_task",
    "hint_localizes",
    "infer_corrupted_variables",
    "load_faults",
]
