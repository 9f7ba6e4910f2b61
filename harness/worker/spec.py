"""The worker spec every command and config takes (``scripted | openai:URL | hf:PATH``), parsed in one place.

- ``scripted``: :class:`~harness.worker.scripted.ScriptedWorker`, replaying the task's reference programs
  (SIMULATED, no LLM); the only worker that can replay faults;
- ``openai:URL``: a :class:`~harness.worker.react.ReActWorker` over an OpenAI-compatible endpoint;
- ``hf:PATH``: the same worker over an in-process transformers checkpoint folder.

:func:`parse_worker_spec` checks a spec before any work starts (one ``ValueError`` naming the flag, the spec and the
fix), and refuses faults to replay with a model worker (``faults=True``); :func:`build_worker` makes the worker for
one kernel; :func:`task_contract` is a model worker's first prompt. :mod:`harness.specs` re-exports the parser next to
those of the manager and suite specs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

WORKER_GRAMMAR = "scripted | openai:URL | hf:PATH"
"""The worker specs, as help texts show them."""


@dataclass(frozen=True)
class WorkerSpec:
    """A parsed worker spec: ``kind`` (scripted, openai, hf) and its ``argument`` (the URL or folder)."""

    kind: str
    argument: str = ""

    @property
    def scripted(self) -> bool:
        return self.kind == "scripted"

    def __str__(self) -> str:
        return f"{self.kind}:{self.argument}" if self.argument else self.kind


def parse_worker_spec(
    spec: str | WorkerSpec,
    *,
    flag: str = "--worker",
    faults: bool = False,
    faults_flag: str = "--faults",
    also: str = "",
) -> WorkerSpec:
    """``spec`` parsed; ``flag`` names the option in messages (``--worker``, or ``worker=`` for a config field);
    ``faults``: faults (given as ``faults_flag``) are to be replayed, which only the scripted worker can do; ``also``:
    the caller's other accepted values, for the message. Raises ``ValueError`` with the fix."""

    def named(value: object) -> str:
        return f"{flag}{value!r}" if flag.endswith("=") else f"{flag} {value}"

    if isinstance(spec, WorkerSpec):
        parsed = spec
    else:
        kind, _, argument = str(spec).partition(":")
        if not ((kind == "scripted" and not argument) or (kind in ("openai", "hf") and argument)):
            shown = f"{flag}{spec!r}" if flag.endswith("=") else f"{flag} {spec!r}"
            raise ValueError(f"{shown} is not understood; use one of: {WORKER_GRAMMAR}{also}.")
        parsed = WorkerSpec(kind, argument)
    if parsed.kind == "hf" and not Path(parsed.argument).is_dir():
        raise ValueError(
            f"{named(parsed)}: {parsed.argument} is not a checkpoint folder; build one with `stateguard model tiny`."
        )
    if faults and not parsed.scripted:
        raise ValueError(
            f"{faults_flag} replays faulty code through the scripted worker; drop it or use {named('scripted')} "
            f"(got {named(parsed)})."
        )
    return parsed


def build_worker(spec: str | WorkerSpec, kernel: Any, task: Any, faults: dict[str, Any] | None = None) -> Any:
    """The worker of ``spec`` for one episode in ``kernel``; ``faults`` (turn id -> fault) for the scripted one."""
    parsed = parse_worker_spec(spec, faults=bool(faults))
    if parsed.scripted:
        from harness.worker.scripted import ScriptedWorker

        return ScriptedWorker.for_task(task, kernel, faults or {})
    from harness.worker.react import ReActWorker

    contract = task_contract(task)
    if parsed.kind == "openai":
        from harness.llm import OpenAIChatBackend

        return ReActWorker(OpenAIChatBackend(parsed.argument), kernel, contract=contract)
    from harness.llm import HFChatBackend

    return ReActWorker(HFChatBackend(parsed.argument), kernel, contract=contract)


def task_contract(task: Any) -> str:
    """A model worker's first prompt: the task contract (objective, sandbox, data profile, question, output rules)."""
    from harness.tasks.contract import render_contract
    from harness.tasks.profile import profile_directory

    return render_contract(task, profile_directory(task.public_dir))
