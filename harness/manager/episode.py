"""The episode record: one JSON line per episode holding everything needed to replay, reward and report it.

Synthesis, the envs, the rewards and evaluation consume only this record. The schema is versioned
(:data:`SCHEMA_VERSION`); a reader refuses a record of another major version with the fix, and a record missing
a required field names it. Sections:

- ``task_id``, ``episode_id``, ``config`` (worker, ``worker_repair_steps``, manager, ``manager_style``, ``flow``:
  turn|segment, faults, the runtime settings such as ``segment_steps`` and the oracle switches ``oracle_relations``
  and ``executable_constraints``, the task's ``constraint_code_public``, and ``manager_view``: what the manager was
  shown, ``{oracle_relations, executable_constraints}``), ``simulated`` (scripted worker);
- ``worker_steps``: ``step_id, turn_id, prompt_sha256`` (of the last text delivered to the worker), ``thought, code,
  execution`` (:func:`execution_summary`), ``answer, prompt_tokens, completion_tokens, duration_s, meta``;
- ``activations``: ``index, event_type`` (turn_start|turn_end|segment_pause|task_end), ``turn_id, actor``
  (policy|harness), ``observation`` (the rendered :class:`ManagerObservation` dict), ``actions`` (each ``raw, parsed,
  kind, legal, result``), ``latency_s``;
- ``states`` (committed states), ``hints`` (``kind: state|repair|window, turn_id, step_id, text``), ``repairs``
  (``state_id, turn_id, attempt, mode: light|heavy, variable, removed, steps, worker_reaction``), ``checkpoints``
  (``state_id, turn_id, checkpoint_id, op``: ``turn_start`` at each turn start, ``take`` at a commit, ``restore`` on
  a rollback, ``release`` when the harness frees one), ``transitions`` (the lifecycle history);
- ``final_answers`` (turn id -> answer; ``"main"`` for a single task) and ``grade`` (the
  :class:`~harness.evaluation.result.GradeResult` dict), ``duration_s``;
- ``error``: ``{"type", "message"}`` when the episode could not be played or graded as the manager's own (an
  exception, or a manager backend that failed during it); such an episode counts in no metric and is played again on
  resume. ``None`` otherwise.

The segment flow's event types, ``window`` hints, turn-start checkpoints, checkpoint ``turn_id`` and the repair
``steps`` are additive within schema 1.0 (a reader keyed on the older fields reads them unchanged).

Text is kept as written, except that a lone surrogate (a model that writes the JSON escape ``\\udc00`` in a tool
call) is recorded as its escape text ``\\udc00`` (:mod:`harness.jsonl`): every record encodes as UTF-8 and reads back
as written. A manager reply longer than ``RuntimeConfig.max_reply_chars`` is recorded cut, its action marked
``raw_cut: true`` with ``raw_chars`` (the reply's full length).

The grade and the reference answers are written *after* the episode; nothing in this record is ever shown to the
manager or the worker during it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from harness.jsonl import append_jsonl, drop_torn_tail, dumps, iter_jsonl
from harness.sandbox import ExecutionResult

SCHEMA_VERSION = "1.0"
STDOUT_TAIL_CHARS = 2000


def _json_default(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


class EpisodeRecordError(ValueError):
    """A record that cannot be read; the message names the file, line and field, and the fix."""


def prompt_sha256(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


def execution_summary(result: ExecutionResult | None) -> dict[str, Any] | None:
    """The compact form of an :class:`ExecutionResult` kept in the record (output tails, no full tracebacks)."""
    if result is None:
        return None
    return {
        "ok": result.ok,
        "stdout_tail": result.stdout[-STDOUT_TAIL_CHARS:],
        "stderr_tail": result.stderr[-STDOUT_TAIL_CHARS:],
        "display": result.display,
        "error_type": result.error_type,
        "error_message": result.error_message,
        "timed_out": result.timed_out,
        "memory_exceeded": result.memory_exceeded,
        "restarted": result.restarted,
        "duration_s": result.duration_s,
        "variables": [v.to_dict() for v in result.variables],
        "files": [f.to_dict() for f in result.files],
        "results": result.results,
    }


@dataclass
class EpisodeRecord:
    task_id: str
    episode_id: str
    config: dict[str, Any]
    simulated: bool
    worker_steps: list[dict[str, Any]] = field(default_factory=list)
    activations: list[dict[str, Any]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    hints: list[dict[str, Any]] = field(default_factory=list)
    repairs: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    transitions: list[dict[str, Any]] = field(default_factory=list)
    final_answers: dict[str, Any] = field(default_factory=dict)
    grade: dict[str, Any] | None = None
    duration_s: float = 0.0
    schema_version: str = SCHEMA_VERSION
    error: dict[str, Any] | None = None

    def to_json(self) -> str:
        # Shallow: the sections are plain JSON values already; a nested dataclass (if any) is converted on the way
        # (``asdict`` of the whole record deep-copies every dict first, ~5x slower on large records).
        top = {f.name: getattr(self, f.name) for f in fields(self)}
        return dumps(top, default=_json_default)  # a lone surrogate (a model's "\\udc00") as its escape text

    @classmethod
    def from_dict(cls, data: Any, where: str = "record") -> EpisodeRecord:
        if not isinstance(data, dict):
            raise EpisodeRecordError(f"{where}: expected a JSON object, got {type(data).__name__}.")
        version = str(data.get("schema_version", ""))
        if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
            raise EpisodeRecordError(
                f"{where}: schema_version {version or '(missing)'} is not readable by this version "
                f"({SCHEMA_VERSION}); re-run the episodes with this version of stateguard."
            )
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        missing = sorted(required - set(data))
        if missing:
            raise EpisodeRecordError(f"{where}: missing field(s) {missing}; the record is incomplete, re-run it.")
        unknown = sorted(set(data) - names)
        if unknown:
            raise EpisodeRecordError(f"{where}: unknown field(s) {unknown} for schema {SCHEMA_VERSION}.")
        return cls(**data)


def append_episode(path: str | Path, record: EpisodeRecord) -> None:
    """Append one episode as one JSON line, durably (:func:`harness.jsonl.append_jsonl`; the file is created when
    missing)."""
    append_jsonl(path, record.to_json())


def read_episodes(path: str | Path, *, resume: bool = False) -> Iterator[EpisodeRecord]:
    """The episodes of a JSON-lines file; ``resume``: first drop a torn last line left by an interrupted run (with
    a warning), as a run that appends to the file again does."""
    if resume:
        drop_torn_tail(path)
    for where, data in iter_jsonl(path, error=EpisodeRecordError):
        yield EpisodeRecord.from_dict(data, where)
