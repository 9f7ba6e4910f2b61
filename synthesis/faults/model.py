"""The fault record (:class:`InjectedFault`), the :class:`FaultType` protocol and how a code edit becomes a fault.

A fault type proposes :class:`Edit` s of one turn's reference code (each a complete faulty program plus the words
that explain it); :func:`build_fault` turns the chosen edit into an :class:`InjectedFault`: the corrupted variables
(the names the edited statements assign, plus what the turn derives from them), the gold repair hint
(``error_variable`` + ``faulty_reasoning``) and the evidence — a recomputation probe (``run_probe``, see
:func:`synthesis.faults.code.recomputation_probe`) or, for a step that cannot run, ``check_execution``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harness.worker.faults import Fault
from synthesis.faults.code import code_writes, dependent_writes, recomputation_probe

if TYPE_CHECKING:
    from synthesis.domains.base import TaskSpec, TurnSpec

logger = logging.getLogger(__name__)

EVIDENCE_TOOLS = ("run_probe", "check_execution")


@dataclass(frozen=True)
class InjectedFault:
    """One fault at one turn, with its evidence and gold repair hint (see the package docstring)."""

    task_id: str = field(metadata={"help": "id of the task"})
    turn_id: str = field(metadata={"help": "turn whose reference code the faulty code replaces"})
    fault_type: str = field(metadata={"help": "name in FAULT_TYPES (or the name a replayed file gives)"})
    code: str = field(metadata={"help": "the faulty code of that turn (replaces the reference code)"})
    variables: tuple[str, ...] = field(metadata={"help": "variables the fault corrupts; a hint naming one localizes"})
    violated: str = field(metadata={"help": "the violated constraint or the wrong assumption, in words"})
    evidence_tool: str = field(metadata={"help": "'run_probe' or 'check_execution': the tool call that reveals it"})
    evidence_code: str | None = field(
        metadata={"help": "run_probe: a probe that fails (AssertionError) on the faulty run and passes on the clean"}
    )
    error_variable: str = field(metadata={"help": "gold repair hint: the variable to name"})
    faulty_reasoning: str = field(metadata={"help": "gold repair hint: what went wrong, in words (no code)"})
    benign: bool = field(default=False, metadata={"help": "an equivalent rewrite that must NOT be repaired"})

    def __post_init__(self) -> None:
        if self.evidence_tool not in EVIDENCE_TOOLS:
            raise ValueError(
                f"InjectedFault {self.task_id}/{self.turn_id} ({self.fault_type}): evidence_tool="
                f"{self.evidence_tool!r} is not a known tool; use one of {list(EVIDENCE_TOOLS)}."
            )
        if self.evidence_tool == "run_probe" and not self.evidence_code:
            raise ValueError(
                f"InjectedFault {self.task_id}/{self.turn_id} ({self.fault_type}): evidence_tool='run_probe' needs "
                "evidence_code (the probe to run); pass the probe or use evidence_tool='check_execution'."
            )
        if self.error_variable not in self.variables:
            raise ValueError(
                f"InjectedFault {self.task_id}/{self.turn_id} ({self.fault_type}): error_variable "
                f"{self.error_variable!r} is not among the corrupted variables {list(self.variables)}; the gold hint "
                "would not localize the fault. Name one of the corrupted variables."
            )

    @property
    def key(self) -> tuple[str, str]:
        return (self.task_id, self.turn_id)

    def to_fault(self) -> Fault:
        """The shared ``faults.jsonl`` record the scripted worker plays."""
        return Fault(self.task_id, self.turn_id, self.fault_type, self.code, self.variables)

    def repair_hint(self) -> str:
        """The gold repair hint as plain text (names ``error_variable``; no code)."""
        return f"The variable `{self.error_variable}` looks wrong: {self.faulty_reasoning}"

    def to_dict(self) -> dict[str, Any]:
        row = asdict(self)
        row["variables"] = list(self.variables)
        return row


@dataclass(frozen=True)
class Edit:
    """A faulty program a fault type proposes, with the words that explain it.

    ``roots`` are the names the changed statements assign (the first that is not ``result`` becomes the gold
    ``error_variable``); ``check`` is the public reason a probe's assertion message gives; ``compare`` overrides the
    worker variables the probe compares (default: the error variable and ``result``).
    """

    code: str
    roots: tuple[str, ...]
    violated: str
    check: str
    reasoning: str
    compare: tuple[str, ...] | None = None
    executes: bool = True  # False: the faulty step raises; the evidence is check_execution


@runtime_checkable
class FaultType(Protocol):
    """A named code transform. ``inject`` returns ``None`` when the type does not apply to the turn.

    ``answers`` (``{turn_id: clean answer}``) is optional; only types that need the clean answer (a claimed result)
    use it and return ``None`` without it.
    """

    name: str
    benign: bool

    def inject(
        self,
        task: TaskSpec,
        turn: TurnSpec,
        rng: random.Random,
        answers: Mapping[str, Any] | None = None,
    ) -> InjectedFault | None: ...


def turn_index(task: TaskSpec, turn_id: str) -> int:
    for index, turn in enumerate(task.turns):
        if turn.turn_id == turn_id:
            return index
    raise KeyError(f"task {task.task_id} has no turn {turn_id!r}; turns: {[t.turn_id for t in task.turns]}")


def prefix_codes(task: TaskSpec, turn: TurnSpec) -> list[str]:
    """Reference codes of the turns before ``turn`` and of ``turn`` itself, in order."""
    index = turn_index(task, turn.turn_id)
    return [t.code for t in task.turns[: index + 1]]


def earlier_names(task: TaskSpec, turn: TurnSpec) -> set[str]:
    """Names the turns before ``turn`` assign (their ``writes`` when declared, else from their code)."""
    names: set[str] = set()
    for t in task.turns[: turn_index(task, turn.turn_id)]:
        names |= set(getattr(t, "writes", ()) or ()) | set(code_writes(t.code))
    return names


def pick_error_variable(roots: Sequence[str]) -> str:
    named = [r for r in roots if r != "result"]
    return (named or list(roots))[0]


def build_fault(
    task: TaskSpec, turn: TurnSpec, name: str, edit: Edit, *, benign: bool = False
) -> InjectedFault | None:
    """The :class:`InjectedFault` of ``edit`` (``None`` when it corrupts nothing a hint could name or no probe can
    compare a corrupted variable)."""
    if not edit.roots:
        return None
    error_variable = pick_error_variable(edit.roots)
    try:
        derived = dependent_writes(edit.code, edit.roots)
    except SyntaxError:
        derived = list(edit.roots)
    known = set(edit.roots) | set(code_writes(turn.code))  # not a misspelt name the faulty code introduced
    variables = [name for name in dict.fromkeys(derived) if name in known]
    common = {"task_id": task.task_id, "turn_id": turn.turn_id, "fault_type": name, "code": edit.code}
    hint = {"error_variable": error_variable, "faulty_reasoning": edit.reasoning, "benign": benign}
    if not edit.executes:
        return InjectedFault(
            **common,
            variables=tuple(variables),
            violated=edit.violated,
            evidence_tool="check_execution",
            evidence_code=None,
            **hint,
        )
    compare = edit.compare or (error_variable, "result")
    header = f"Turn {turn.turn_id} asks: {turn.question} Check: {edit.check}"
    probe = recomputation_probe(prefix_codes(task, turn), compare, edit.check, header)
    if probe is None:
        return None
    return InjectedFault(
        **common,
        variables=tuple(variables),
        violated=edit.violated,
        evidence_tool="run_probe",
        evidence_code=probe,
        **hint,
    )


@dataclass(frozen=True)
class AstFaultType:
    """A fault type given by a function that lists every :class:`Edit` of a turn (slot-based edits first when the
    turn's ``slots`` name the site; ``rng`` picks one)."""

    name: str
    propose: Callable[..., list[Edit]] = field(repr=False)  # (task, turn, answers, rng) -> list[Edit]
    benign: bool = False
    description: str = ""

    def inject(
        self,
        task: TaskSpec,
        turn: TurnSpec,
        rng: random.Random,
        answers: Mapping[str, Any] | None = None,
    ) -> InjectedFault | None:
        try:
            edits = self.propose(task, turn, answers, rng)
        except SyntaxError:
            return None  # the reference code itself does not parse: nothing to transform
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # odd slots or tables: skip, say why
            logger.warning(
                "fault type %s skipped task %s turn %s: %s: %s",
                self.name,
                task.task_id,
                turn.turn_id,
                type(exc).__name__,
                exc,
            )
            return None
        while edits:
            edit = edits.pop(rng.randrange(len(edits)))
            fault = build_fault(task, turn, self.name, edit, benign=self.benign)
            if fault is not None:
                return fault
        return None
