"""The types the manager runtime and its parts share: :class:`RuntimeConfig` (the runtime's settings) and
:class:`Runtime`, what the flows (:mod:`harness.manager.flows`) and the actions' effects
(:mod:`harness.manager.controls`) use of the :class:`~harness.manager.runtime.ManagerRuntime` that calls them.

``ManagerRuntime`` is the one implementation of :class:`Runtime`; the protocol lets the flows and the controls be
written against it without importing the runtime that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.llm import DEFAULT_MAX_REPLY_CHARS
from harness.manager import tools
from harness.manager.episode import EpisodeRecord
from harness.manager.episode_loop import Steps
from harness.manager.lifecycle import Lifecycle
from harness.manager.policy_types import Policy
from harness.manager.records import AnalyticalState
from harness.sandbox import Kernel
from harness.tasks import Task, Turn
from harness.worker.base import Worker
from harness.worker.step import WorkerStep

FLOW_NAMES = ("turn", "segment")
"""The review cadences (:data:`harness.manager.flows.FLOWS` plays each)."""


@dataclass
class RuntimeConfig:
    flow: str | None = field(
        default=None,
        metadata={
            "help": "Review cadence: 'turn' (multi_turn tasks) or 'segment' (closed_form, artifact). None: by the "
            "task's kind; the other flow is an error."
        },
    )
    segment_steps: int = field(
        default=3, metadata={"help": "Segment flow: pause the worker for review every N of its own steps."}
    )
    max_actions: int = field(default=8, metadata={"help": "Actions (tool or control) per manager activation."})
    max_repairs: int = field(default=3, metadata={"help": "REPAIR attempts per state (1 light, then heavy)."})
    max_turn_end_activations: int = field(
        default=8,
        metadata={
            "help": "Review activations at a turn end (turn flow), at one pause or at the task end (segment flow); "
            "then the harness commits a finalized state or abandons an open one (a pause just resumes the worker)."
        },
    )
    probe_timeout_s: float = field(default=5.0, metadata={"help": "Time limit of one run_probe / constraint check."})
    strict_wire: bool = field(default=True, metadata={"help": "Reject text outside the wire-format tags."})
    max_reply_chars: int = field(
        default=DEFAULT_MAX_REPLY_CHARS,
        metadata={
            "help": "Characters of one manager reply kept: a longer reply is cut to this many before it is parsed, "
            "recorded and replayed, and its action records raw_cut: true and raw_chars (its full length). The "
            "token cap is the backend's (--manager-max-tokens)."
        },
    )
    oracle_relations: bool = field(
        default=False,
        metadata={
            "help": "Show the manager the task's dependency graph (each turn's depends_on and declared relation, and "
            "the committed states of those turns), and let model-free policies open states with it. False: the "
            "manager infers relations from the question's words (a real benchmark gives no graph)."
        },
    )
    executable_constraints: bool = field(
        default=False,
        metadata={
            "help": "Show the manager each constraint's executable code (the rule policy probes it). False: "
            "constraint texts only, unless the task's metadata sets constraint_code_public: true."
        },
    )
    oracle_checks: bool = field(
        default=False,
        metadata={
            "help": "Give the manager the gold's check specs of each turn (an oracle: synthesis wrote them from the "
            "turn's private slots into private/synthesis.json); only the oracle arm hier-checks:gold reads them. "
            "False: a manager writes its own checks."
        },
    )
    restorable_checkpoints: bool = field(
        default=True,
        metadata={
            "help": "Fork a restorable kernel snapshot at every checkpoint (what ABANDON_STATE rolls a repaired state "
            "back to). False: checkpoints are recorded with the same ids but nothing is forked (a fork plus the "
            "copy-on-write faults after it cost ~20 ms here), and abandoning a repaired state is an error. For "
            "policies that never abandon (synthesis with its gold policy)."
        },
    )

    def __post_init__(self) -> None:
        if self.flow is not None and self.flow not in FLOW_NAMES:
            raise ValueError(f"flow={self.flow!r} is unknown; use one of {sorted(FLOW_NAMES)} or None (by task kind).")
        if self.segment_steps < 1:
            raise ValueError(
                f"segment_steps={self.segment_steps}: the worker must take at least one step between pauses; use >= 1."
            )
        if self.max_turn_end_activations < 1:
            raise ValueError(
                f"max_turn_end_activations={self.max_turn_end_activations}: the turn end needs at least one "
                "activation; use >= 1."
            )
        chars = self.max_reply_chars
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
            raise ValueError(
                f"max_reply_chars={self.max_reply_chars!r} is not a positive number of characters; use e.g. "
                f"{DEFAULT_MAX_REPLY_CHARS} (the default)."
            )
        if not 0 < self.probe_timeout_s <= tools.MAX_PROBE_TIMEOUT_S:
            raise ValueError(
                f"probe_timeout_s={self.probe_timeout_s} is out of range; use a value in "
                f"(0, {tools.MAX_PROBE_TIMEOUT_S:g}] seconds."
            )


class Runtime(Protocol):
    """What the flows and the controls read, change and call of the runtime playing the episode (see
    :class:`~harness.manager.runtime.ManagerRuntime` for what each member holds)."""

    config: RuntimeConfig
    flow: str
    task: Task
    kernel: Kernel
    worker: Worker
    policy: Policy
    windowed: bool
    reviews: bool
    lifecycle: Lifecycle
    committed: dict[str, AnalyticalState]
    turn_states: dict[str, str]
    executor_log: dict[int, tools.ExecutedStep]
    draft: AnalyticalState | None
    draft_repairs: int
    boundary: int
    last_checkpoint: str | None
    last_prompt: str
    transcript: list[tuple[str, str]]
    record: EpisodeRecord

    def emit(self, name: str, payload: dict[str, Any]) -> None: ...

    def begin_turn(self, turn: Turn) -> None: ...

    def start_worker(self, turn_id: str, prompt: str, hint: str | None) -> None: ...

    def worker_step(self) -> Steps: ...

    def note(self, text: str) -> None: ...

    def pending_steps(self) -> int: ...

    def window_hint(self, turn: Turn) -> str: ...

    def state_hint(self, turn: Turn) -> str: ...

    def fallback(self, event_type: str, turn: Turn) -> None: ...

    def activation(self, event_type: str, turn: Turn, last: bool) -> Steps: ...

    def next_state_id(self) -> str: ...

    def record_hint(self, kind: str, turn_id: str, step_id: int, text: str) -> None: ...

    def log_step(self, step: WorkerStep) -> None: ...
