"""The manager's records: analytical states, their parts, and the observation the manager model sees.

All records are frozen dataclasses with a lossless JSON round trip: ``Record.from_dict(r.to_dict()) == r`` and
``to_dict()`` holds only JSON types (sequences become lists). ``from_dict`` rejects bad input with one
``ValueError`` naming the record, the field path, what was expected and what was found.

Types chosen here (the harness owns the bookkeeping, so ids are harness-made strings such as ``"S3"``):

- ``Constraint(text: str, code: str | None, check: dict | None)`` — ``code`` is an optional standalone executable
  check, ``check`` an optional typed check spec (:mod:`harness.checks`) as its canonical dict.
- ``VariableRef(name: str, version: int, value: str)`` — ``(name, version)`` identifies one value in the sandbox
  (``harness.sandbox.result.VariableInfo``); ``value`` is the sandbox's short summary of it.
- ``Relation(type: str, related_state_id: str | None)`` — ``type`` in :data:`RELATION_TYPES`; ``init`` has no
  related state (None), every other type names one.
- ``AnalyticalState`` — sequences are tuples; ``source_step_start``/``source_step_end`` are inclusive worker step
  ids, both None until the state is bound to its source steps; ``checkpoint_id`` is the sandbox checkpoint taken
  at commit (None before).
- ``StateSummary(id, issue, source_step_start, source_step_end, relations)`` — one compact row of the committed-state
  index.
- ``ManagerObservation`` — see its docstring; :meth:`ManagerObservation.render` is the text the model sees.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from harness.checks import CheckSpecError, parse_spec
from harness.manager.actions import RELATION_TYPES

__all__ = [
    "EVENT_TYPES",
    "RELATION_TYPES",
    "AnalyticalState",
    "Constraint",
    "ManagerObservation",
    "Relation",
    "StateSummary",
    "VariableRef",
]

EVENT_TYPES: tuple[str, ...] = ("turn_start", "turn_end", "segment_pause", "task_end")
"""Why the manager is activated: a multi-turn task's turn starts or ends, the harness paused a long single task
after N steps (a pause is not a state boundary), or the worker gave its final answer (``terminal_pending_review``)."""

R = TypeVar("R")


# ---------------------------------------------------------------- field readers for from_dict


def _fields_of(data: object, record: str, names: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    """``data`` as a dict holding every name in ``names`` (those in ``optional`` may be missing) and nothing else."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{record}: expected a JSON object, got {type(data).__name__}. Pass the output of to_dict().")
    missing = [name for name in names if name not in data and name not in optional]
    if missing:
        raise ValueError(f"{record}: missing field(s) {', '.join(missing)}. Required: {', '.join(names)}.")
    extra = sorted(repr(key) for key in data if key not in names)
    if extra:
        raise ValueError(f"{record}: unknown field(s) {', '.join(extra)}. Allowed: {', '.join(names)}.")
    return dict(data)


def _check(record: str, name: str, value: object, kind: str, *, nullable: bool = False) -> Any:
    """``value`` if it is a JSON ``kind`` (``str``, ``int`` (never bool), ``bool``), or None when ``nullable``."""
    if value is None and nullable:
        return None
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
    }[kind]
    if not ok:
        expected = f"{kind} or null" if nullable else kind
        raise ValueError(f"{record}.{name}: expected {expected}, got {type(value).__name__} {value!r:.60}.")
    return value


def _list_of(record: str, name: str, value: object, item: Callable[[object, str], R]) -> tuple[R, ...]:
    """A tuple built by ``item(element, path)`` from a JSON array."""
    if not isinstance(value, list | tuple):
        raise ValueError(f"{record}.{name}: expected a list, got {type(value).__name__} {value!r:.60}.")
    return tuple(item(element, f"{record}.{name}[{index}]") for index, element in enumerate(value))


def _str_item(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{path}: expected str, got {type(value).__name__} {value!r:.60}.")
    return value


def _check_interval(record: str, start: int | None, end: int | None) -> None:
    if (start is None) != (end is None):
        raise ValueError(
            f"{record}: source_step_start={start} and source_step_end={end} must both be set or both be None "
            "(a state is bound to one inclusive interval of worker steps)."
        )
    if start is not None and end is not None and not 0 <= start <= end:
        raise ValueError(
            f"{record}: source interval [{start}, {end}] is invalid; it needs 0 <= start <= end (inclusive step ids)."
        )


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
"""Field names per record class (``dataclasses.fields`` is slow enough to show in synthesis profiles)."""


def _convert(value: object) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()  # type: ignore[union-attr]
    if isinstance(value, tuple | list):
        return [_convert(item) for item in value]
    return value


def _field_names(record: object) -> tuple[str, ...]:
    cls = type(record)
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(record))  # type: ignore[arg-type]
    return names


def _to_dict(record: object) -> dict[str, Any]:
    """Fields in declaration order; nested records via their ``to_dict``; tuples as lists."""
    return {name: _convert(getattr(record, name)) for name in _field_names(record)}


# ---------------------------------------------------------------- records


@dataclass(frozen=True)
class Constraint:
    """A condition the state's result must satisfy; ``code`` optionally checks it standalone (raises if violated),
    ``check`` is an optional typed check spec of it (the parsed spec's :meth:`~harness.checks.CheckSpec.to_dict`;
    :meth:`of` builds it from any valid spec). ``to_dict`` leaves ``check`` out when there is none."""

    text: str
    code: str | None = None
    check: dict[str, Any] | None = None

    @classmethod
    def of(cls, text: str, code: str | None = None, check: Any = None) -> Constraint:
        """A constraint whose ``check`` (a spec as JSON, a :class:`~harness.checks.CheckSpec` or None) is stored as
        the parsed spec's dict; a malformed spec raises :class:`~harness.checks.CheckSpecError`."""
        return cls(text, code, None if check is None else parse_spec(check).to_dict())

    def to_dict(self) -> dict[str, Any]:
        out = {"text": self.text, "code": self.code}
        if self.check is not None:
            out["check"] = dict(self.check)
        return out

    @classmethod
    def from_dict(cls, data: object, where: str = "Constraint") -> Constraint:
        d = _fields_of(data, where, ("text", "code", "check"), optional=("code", "check"))
        try:
            return cls.of(
                _check(where, "text", d["text"], "str"),
                _check(where, "code", d.get("code"), "str", nullable=True),
                d.get("check"),
            )
        except CheckSpecError as exc:
            raise ValueError(f"{where}.check: {exc}") from None


@dataclass(frozen=True)
class VariableRef:
    """One version of one worker variable: ``(name, version)`` as tracked by the sandbox; ``value`` its summary."""

    name: str
    version: int
    value: str

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: object, where: str = "VariableRef") -> VariableRef:
        d = _fields_of(data, where, ("name", "version", "value"))
        return cls(
            name=_check(where, "name", d["name"], "str"),
            version=_check(where, "version", d["version"], "int"),
            value=_check(where, "value", d["value"], "str"),
        )


@dataclass(frozen=True)
class Relation:
    """A link to an earlier state. ``init`` has ``related_state_id=None``; the other types name a state."""

    type: str
    related_state_id: str | None = None

    def __post_init__(self) -> None:
        if self.type not in RELATION_TYPES:
            raise ValueError(f"Relation.type={self.type!r} is not a relation type; use one of {list(RELATION_TYPES)}.")
        if self.type == "init" and self.related_state_id is not None:
            raise ValueError(
                f"Relation(type='init', related_state_id={self.related_state_id!r}): init means no upstream state; "
                "drop related_state_id or use another type."
            )
        if self.type != "init" and self.related_state_id is None:
            raise ValueError(f"Relation(type={self.type!r}) needs related_state_id (the earlier state's id).")

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: object, where: str = "Relation") -> Relation:
        d = _fields_of(data, where, ("type", "related_state_id"), optional=("related_state_id",))
        kind = _check(where, "type", d["type"], "str")
        related = _check(where, "related_state_id", d.get("related_state_id"), "str", nullable=True)
        try:
            return cls(type=kind, related_state_id=related)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None


@dataclass(frozen=True)
class AnalyticalState:
    """One unit of the analysis: the issue, its constraints, the variables (with versions) it used, its conclusions,
    its relations to earlier states, the inclusive worker-step interval it was built from and its checkpoint."""

    id: str
    issue: str
    constraints: tuple[Constraint, ...] = ()
    used_variables: tuple[VariableRef, ...] = ()
    conclusions: tuple[str, ...] = ()
    relations: tuple[Relation, ...] = ()
    source_step_start: int | None = None
    source_step_end: int | None = None
    checkpoint_id: str | None = None

    def __post_init__(self) -> None:
        _check_interval(f"AnalyticalState {self.id!r}", self.source_step_start, self.source_step_end)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: object, where: str = "AnalyticalState") -> AnalyticalState:
        names = tuple(f.name for f in fields(cls))
        d = _fields_of(data, where, names)
        try:
            return cls(
                id=_check(where, "id", d["id"], "str"),
                issue=_check(where, "issue", d["issue"], "str"),
                constraints=_list_of(where, "constraints", d["constraints"], Constraint.from_dict),
                used_variables=_list_of(where, "used_variables", d["used_variables"], VariableRef.from_dict),
                conclusions=_list_of(where, "conclusions", d["conclusions"], _str_item),
                relations=_list_of(where, "relations", d["relations"], Relation.from_dict),
                source_step_start=_check(where, "source_step_start", d["source_step_start"], "int", nullable=True),
                source_step_end=_check(where, "source_step_end", d["source_step_end"], "int", nullable=True),
                checkpoint_id=_check(where, "checkpoint_id", d["checkpoint_id"], "str", nullable=True),
            )
        except ValueError as error:
            message = str(error)
            raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None


@dataclass(frozen=True)
class StateSummary:
    """One row of the committed-state index: enough to choose relations, without the full state (see load_state)."""

    id: str
    issue: str
    source_step_start: int | None = None
    source_step_end: int | None = None
    relations: tuple[Relation, ...] = ()

    def __post_init__(self) -> None:
        _check_interval(f"StateSummary {self.id!r}", self.source_step_start, self.source_step_end)

    @classmethod
    def of(cls, state: AnalyticalState) -> StateSummary:
        """The index row of ``state``."""
        return cls(state.id, state.issue, state.source_step_start, state.source_step_end, state.relations)

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @functools.cached_property
    def rendered(self) -> str:
        """``json.dumps(self.to_dict(), ensure_ascii=False)``, computed once: the index is re-rendered in every
        observation of an episode, and a summary never changes (frozen)."""
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, data: object, where: str = "StateSummary") -> StateSummary:
        d = _fields_of(data, where, tuple(f.name for f in fields(cls)))
        try:
            return cls(
                id=_check(where, "id", d["id"], "str"),
                issue=_check(where, "issue", d["issue"], "str"),
                source_step_start=_check(where, "source_step_start", d["source_step_start"], "int", nullable=True),
                source_step_end=_check(where, "source_step_end", d["source_step_end"], "int", nullable=True),
                relations=_list_of(where, "relations", d["relations"], Relation.from_dict),
            )
        except ValueError as error:
            message = str(error)
            raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None


@dataclass(frozen=True)
class ManagerObservation:
    """What the manager model sees at each step of an activation.

    - ``event_type``: why it was activated, one of :data:`EVENT_TYPES`.
    - ``available_state_id``: the id the harness gives the state being built (the open draft's id, or the id the
      next OPEN_STATE will get); the model never invents ids.
    - ``untraced_steps``: how many worker steps are not yet covered by a committed state.
    - ``pending_start_step`` / ``pending_end_step``: the inclusive interval of those steps (None if there are none).
    - ``current_draft``: the open, uncommitted state, or None.
    - ``repair_attempts``: REPAIRs already spent on the current draft (the budget is in the lifecycle).
    - ``terminal_pending_review``: the worker has given its final answer and it awaits this review.
    - ``last_action_result``: the text result of the previous action in this activation (a tool output, or why an
      action was refused), None at the start of an activation.
    - ``committed_state_index``: one :class:`StateSummary` per committed state, oldest first.
    """

    event_type: str
    available_state_id: str | None
    untraced_steps: int
    pending_start_step: int | None
    pending_end_step: int | None
    current_draft: AnalyticalState | None
    repair_attempts: int
    terminal_pending_review: bool
    last_action_result: str | None
    committed_state_index: tuple[StateSummary, ...] = ()

    def __post_init__(self) -> None:
        if self.event_type not in EVENT_TYPES:
            raise ValueError(
                f"ManagerObservation.event_type={self.event_type!r} is unknown; use one of {list(EVENT_TYPES)}."
            )
        for name in ("untraced_steps", "repair_attempts"):
            if getattr(self, name) < 0:
                raise ValueError(f"ManagerObservation.{name}={getattr(self, name)} is negative; counts start at 0.")
        start, end = self.pending_start_step, self.pending_end_step
        if (start is None) != (end is None) or (start is not None and end is not None and start > end):
            raise ValueError(
                f"ManagerObservation pending interval [{start}, {end}] is invalid; give both ends (start <= end, "
                "inclusive) or neither."
            )

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: object, where: str = "ManagerObservation") -> ManagerObservation:
        d = _fields_of(data, where, tuple(f.name for f in fields(cls)))
        draft = d["current_draft"]
        try:
            return cls(
                event_type=_check(where, "event_type", d["event_type"], "str"),
                available_state_id=_check(where, "available_state_id", d["available_state_id"], "str", nullable=True),
                untraced_steps=_check(where, "untraced_steps", d["untraced_steps"], "int"),
                pending_start_step=_check(where, "pending_start_step", d["pending_start_step"], "int", nullable=True),
                pending_end_step=_check(where, "pending_end_step", d["pending_end_step"], "int", nullable=True),
                current_draft=None if draft is None else AnalyticalState.from_dict(draft, f"{where}.current_draft"),
                repair_attempts=_check(where, "repair_attempts", d["repair_attempts"], "int"),
                terminal_pending_review=_check(where, "terminal_pending_review", d["terminal_pending_review"], "bool"),
                last_action_result=_check(where, "last_action_result", d["last_action_result"], "str", nullable=True),
                committed_state_index=_list_of(
                    where, "committed_state_index", d["committed_state_index"], StateSummary.from_dict
                ),
            )
        except ValueError as error:
            message = str(error)
            raise ValueError(message if message.startswith(where) else f"{where}: {message}") from None

    def render(self) -> str:
        """The observation as the model sees it: one JSON object, one top-level field per line in declaration order,
        each value as compact JSON (deterministic; fewer tokens than indenting nested states; non-ASCII kept)."""
        lines = []
        for name in _field_names(self):
            value = getattr(self, name)
            if name == "committed_state_index":  # json.dumps of the list, from each summary's cached text
                text = "[" + ", ".join(summary.rendered for summary in value) + "]"
            else:
                text = json.dumps(_convert(value), ensure_ascii=False)
            lines.append(f"{json.dumps(name)}: {text}")
        return "{\n" + ",\n".join(lines) + "\n}"
