"""What a manager policy is: the :class:`Policy` protocol, the :class:`PolicyInput` it answers, the
:class:`ManagerView` of a turn it may see, and the helpers every policy writes its answer with (:func:`call`,
:func:`turn_view`, :func:`constraint_view`, :func:`declared_relations`).

The policies themselves (:mod:`harness.manager.policies`, :mod:`harness.manager.llm_policy`,
:mod:`harness.manager.windowed`, :mod:`harness.manager.hier`) and the prompts and bookkeeping they share import these
types from here; the policies are built from a manager spec by :func:`harness.manager.policy_registry.get_policy`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.checks.gold import gold_specs_of
from harness.manager.actions import make_action
from harness.manager.lifecycle import Lifecycle
from harness.manager.wire import render_action
from harness.tasks import Task, Turn

MAX_ACTIONS = Lifecycle().max_actions  # the rule policy plans its tool calls within one activation's budget


@dataclass(frozen=True)
class ManagerView:
    """Which oracle parts of a turn the manager may see (both off on a real benchmark).

    Off, a policy sees of a turn its id, question, context and constraint texts, plus which committed state covers
    each earlier turn (the harness's own bookkeeping); it infers relations from the question's words and writes its
    own checks from constraint texts."""

    oracle_relations: bool = field(
        default=False,
        metadata={"help": "Show the task's dependency graph (depends_on, declared relation); else inferred."},
    )
    executable_constraints: bool = field(
        default=False, metadata={"help": "Show each constraint's executable code; else its text only."}
    )
    oracle_checks: bool = field(
        default=False,
        metadata={"help": "Give the gold's check specs of each turn (gold_checks; read by hier-checks:gold only)."},
    )
    gold_checks: Mapping[str, tuple[dict[str, Any], ...]] = field(
        default_factory=dict,
        compare=False,
        repr=False,
        metadata={"help": "Turn id -> the gold's check specs (JSON), loaded when oracle_checks is on; else empty."},
    )

    @classmethod
    def of(
        cls,
        task: Task,
        oracle_relations: bool = False,
        executable_constraints: bool = False,
        oracle_checks: bool = False,
    ) -> ManagerView:
        """The view of ``task``'s turns under the three switches; constraint code is shown also when the task
        declares it public (:func:`constraint_code_public`); the gold's specs come from the task's private folder
        (:func:`harness.checks.gold.gold_specs_of`; none for a task without them)."""
        gold: dict[str, tuple[dict[str, Any], ...]] = {}
        if oracle_checks:
            found = gold_specs_of(task.private_dir) or {}
            gold = {turn_id: tuple(spec.to_dict() for spec in specs) for turn_id, specs in found.items()}
        return cls(oracle_relations, executable_constraints or constraint_code_public(task), oracle_checks, gold)

    def recorded(self) -> dict[str, bool]:
        """The switches as an episode record's ``manager_view`` holds them: ``oracle_checks`` only when it is on, the
        gold's specs themselves never."""
        shown = {"oracle_relations": self.oracle_relations, "executable_constraints": self.executable_constraints}
        return shown | ({"oracle_checks": True} if self.oracle_checks else {})


CODE_PUBLIC_KEY = "constraint_code_public"
"""Task metadata key: true when the task publishes its constraints' code as part of the question (default false)."""


def constraint_code_public(task: Task) -> bool:
    """Whether ``task`` declares its constraint code public (``metadata.constraint_code_public: true``)."""
    value = (task.config.metadata or {}).get(CODE_PUBLIC_KEY, False)
    if not isinstance(value, bool):
        raise ValueError(
            f"task {task.id}: metadata.{CODE_PUBLIC_KEY} must be true or false, got {value!r}; fix its config.yaml."
        )
    return value


@dataclass(frozen=True)
class PolicyInput:
    """Everything a policy is given for one response (the runtime records all of it)."""

    observation: str = field(metadata={"help": "ManagerObservation.render() of the current activation step."})
    tool_results: tuple[str, ...] = field(
        default=(), metadata={"help": "Rendered results of the tool actions taken so far in this activation."}
    )
    legal_actions: tuple[str, ...] = field(default=(), metadata={"help": "Action names legal now (lifecycle)."})
    turn: Turn | None = field(
        default=None,
        metadata={"help": "The turn; a policy shows or uses only what `view` allows of it (see turn_view)."},
    )
    turn_states: Mapping[str, str] = field(
        default_factory=dict, metadata={"help": "Turn id -> id of the committed state that covers it."}
    )
    view: ManagerView = field(
        default=ManagerView(), metadata={"help": "Which oracle parts of the turn the manager may see."}
    )
    previous: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata={
            "help": "(raw response, result text) of every earlier action of this activation, in order, legal or "
            "not: what a chat model needs to continue its conversation within the activation."
        },
    )

    def text(self) -> str:
        """All of the input as one text, the turn as :func:`turn_view` shows it (what the information-boundary
        test scans)."""
        turn = None if self.turn is None else json.dumps(turn_view(self), ensure_ascii=False)
        return "\n".join(
            [
                self.observation,
                *self.tool_results,
                " ".join(self.legal_actions),
                turn or "",
                json.dumps(self.turn_states),
                *(f"{raw}\n{result}" for raw, result in self.previous),
            ]
        )


class Policy(Protocol):
    name: str
    active: bool

    def respond(self, inp: PolicyInput) -> str: ...


def constraint_view(constraints: Iterable[Any], view: ManagerView) -> list[dict[str, str]]:
    """Constraints as the manager sees them: ``{"text"}``, plus ``"code"`` when one is given and ``view`` shows it."""
    shown = view.executable_constraints
    return [{"text": c.text, **({"code": c.code} if shown and c.code else {})} for c in constraints]


def turn_view(inp: PolicyInput) -> dict[str, Any] | None:
    """The turn as the manager sees it (None without a turn): ``turn_id``, ``question``, ``context``,
    ``constraints`` (:func:`constraint_view`) and ``committed_states_by_turn`` (turn id -> committed state id, for
    every committed turn); with ``view.oracle_relations`` also the task graph: ``depends_on_turns``,
    ``declared_relation`` and ``committed_states_of_those_turns``."""
    turn = inp.turn
    if turn is None:
        return None
    shown: dict[str, Any] = {"turn_id": turn.turn_id, "question": turn.question, "context": turn.context}
    if inp.view.oracle_relations:
        shown |= {
            "depends_on_turns": list(turn.depends_on),
            "declared_relation": turn.relation,
            "committed_states_of_those_turns": {
                t: inp.turn_states[t] for t in turn.depends_on if t in inp.turn_states
            },
        }
    shown["committed_states_by_turn"] = dict(inp.turn_states)
    shown["constraints"] = constraint_view(turn.constraints, inp.view)
    return shown


def declared_relations(
    depends_on: Iterable[str], relation: str, turn_states: Mapping[str, str]
) -> list[dict[str, Any]]:
    """OPEN_STATE relations from the task graph (a turn's ``depends_on`` and ``relation``, an oracle): the declared
    relation to the committed states of the dependencies; ``init`` when none is committed, ``progress``/``combine``
    when the declared relation does not fit the committed ones. The evaluation's gold relations too."""
    related = list(dict.fromkeys(turn_states[t] for t in depends_on if t in turn_states))
    if relation == "init" or not related or (relation == "combine" and len(related) < 2):
        kind = "init" if not related else "progress" if len(related) == 1 else "combine"
    else:
        kind = relation
    return [{"type": "init"}] if kind == "init" else [{"type": kind, "related_state_id": s} for s in related]


def call(name: str, arguments: dict[str, Any] | None = None) -> str:
    """The wire text of one action (what a policy answers)."""
    return render_action(make_action(name, arguments or {}))


SEGMENT_EVENTS = ("segment_pause", "task_end")
"""The activations of the segment-induced flow (a pause every N steps, the task end)."""
