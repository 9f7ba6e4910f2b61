"""The lifecycle of one analytical state: which control action is legal after which, and the budgets.

::

    phase       legal control actions (-> next phase)
    IDLE        OPEN_STATE -> OPEN, RESUME_WORKER -> IDLE, ABSTAIN -> IDLE
    OPEN        UPDATE_STATE -> UPDATED, RESUME_WORKER -> OPEN, ABANDON_STATE -> IDLE
    UPDATED     UPDATE_STATE -> UPDATED, REPAIR -> OPEN (the worker retries, then the state is updated again),
                FINALIZE_RELATIONS -> FINALIZED, ABANDON_STATE -> IDLE
    FINALIZED   COMMIT_STATE -> IDLE, ABANDON_STATE -> IDLE

- ``RESUME_WORKER`` keeps the pending steps (segment flow: the trace does not yet form an analytical unit; turn flow:
  let the worker answer the turn the state was opened for). ``ABSTAIN`` declines to act and changes nothing.
- Tool actions are read-only: legal in every phase, they do not end the activation and do not change the phase.
- Budgets: at most ``max_actions`` actions (tool or control) per activation; at most ``max_repairs`` REPAIRs per
  state. Repair 1 is *light* (hint only); repairs 2.. are *heavy* (the harness also deletes the named artifacts).
  When the repair budget is spent REPAIR is illegal and the runtime rolls back or abandons.

Illegal actions never raise: :meth:`Lifecycle.apply` returns a :class:`Transition` with ``legal=False`` and a
message that lists the legal set, which the runtime returns to the manager as ``last_action_result``. Every
transition, legal or not, is recorded in :attr:`Lifecycle.history`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from harness.manager.actions import ACTION_KIND

CONTROL_ACTIONS = tuple(name for name, kind in ACTION_KIND.items() if kind == "control")
TOOL_ACTIONS = tuple(name for name, kind in ACTION_KIND.items() if kind == "tool")


class Phase(str, Enum):
    IDLE = "idle"  # no state is open
    OPEN = "open"  # opened (provisional relations); waiting for the worker's trace
    UPDATED = "updated"  # the draft holds the issue, source interval, variables and conclusions: check it
    FINALIZED = "finalized"  # relations finalized: commit


# phase -> {control action: next phase}
TRANSITIONS: dict[Phase, dict[str, Phase]] = {
    Phase.IDLE: {"OPEN_STATE": Phase.OPEN, "RESUME_WORKER": Phase.IDLE, "ABSTAIN": Phase.IDLE},
    Phase.OPEN: {"UPDATE_STATE": Phase.UPDATED, "RESUME_WORKER": Phase.OPEN, "ABANDON_STATE": Phase.IDLE},
    Phase.UPDATED: {
        "UPDATE_STATE": Phase.UPDATED,
        "REPAIR": Phase.OPEN,
        "FINALIZE_RELATIONS": Phase.FINALIZED,
        "ABANDON_STATE": Phase.IDLE,
    },
    Phase.FINALIZED: {"COMMIT_STATE": Phase.IDLE, "ABANDON_STATE": Phase.IDLE},
}
assert all(set(t) <= set(CONTROL_ACTIONS) for t in TRANSITIONS.values()), "lifecycle names an undeclared action"


@dataclass(frozen=True)
class Transition:
    """One action applied to the lifecycle (recorded whether or not it was legal)."""

    activation: int
    action: str
    phase_before: str
    phase_after: str
    legal: bool
    message: str
    repair_mode: str | None = None  # light | heavy, for a legal REPAIR

    def to_dict(self) -> dict[str, Any]:
        """``dataclasses.asdict(self)`` without its generic deep copy (every field is a plain value)."""
        return {
            "activation": self.activation,
            "action": self.action,
            "phase_before": self.phase_before,
            "phase_after": self.phase_after,
            "legal": self.legal,
            "message": self.message,
            "repair_mode": self.repair_mode,
        }


@dataclass
class Lifecycle:
    max_actions: int = field(default=8, metadata={"help": "actions (tool or control) allowed per activation"})
    max_repairs: int = field(default=3, metadata={"help": "REPAIR attempts allowed per state"})
    phase: Phase = Phase.IDLE
    repair_attempts: int = 0
    activation: int = 0
    actions_in_activation: int = 0
    activation_open: bool = False
    history: list[Transition] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.max_actions < 1:
            raise ValueError(f"max_actions={self.max_actions}: an activation needs at least one action; use >= 1.")
        if self.max_repairs < 0:
            raise ValueError(f"max_repairs={self.max_repairs} is negative; use 0 to forbid repairs.")

    def begin_activation(self) -> None:
        self.activation += 1
        self.actions_in_activation = 0
        self.activation_open = True

    @property
    def budget_left(self) -> int:
        return self.max_actions - self.actions_in_activation

    def legal_actions(self) -> list[str]:
        """Legal actions now, control actions first (empty when no activation is open or its budget is spent)."""
        if not self.activation_open or self.budget_left <= 0:
            return []
        control = [a for a in TRANSITIONS[self.phase] if a != "REPAIR" or self.repair_attempts < self.max_repairs]
        return control + list(TOOL_ACTIONS)

    def why_illegal(self, action: str) -> str | None:
        """``None`` when ``action`` is legal now, else the reason with the legal set."""
        if not self.activation_open:
            return f"{action}: no manager activation is open; the worker is running."
        if self.budget_left <= 0:
            return f"{action}: the activation's budget of {self.max_actions} actions is spent."
        if action in TOOL_ACTIONS:
            return None
        if action not in CONTROL_ACTIONS:
            return f"{action}: unknown action; legal now: {', '.join(self.legal_actions())}."
        if action == "REPAIR" and self.phase is Phase.UPDATED and self.repair_attempts >= self.max_repairs:
            return (
                f"REPAIR: the repair budget of this state is spent ({self.repair_attempts}/{self.max_repairs}); "
                f"legal now: {', '.join(self.legal_actions())}."
            )
        if action not in TRANSITIONS[self.phase]:
            return f"{action} is illegal in phase '{self.phase.value}'; legal now: {', '.join(self.legal_actions())}."
        return None

    def apply(self, action: str) -> Transition:
        """Apply ``action`` (a tool or control action name). Illegal actions change nothing but the record and the
        action count; a control action ends the activation."""
        before = self.phase
        reason = self.why_illegal(action)
        if self.activation_open:
            self.actions_in_activation += 1
        mode = None
        if reason is None and action in CONTROL_ACTIONS:
            if action == "REPAIR":
                self.repair_attempts += 1
                mode = "light" if self.repair_attempts == 1 else "heavy"
            self.phase = TRANSITIONS[before][action]
            if self.phase is Phase.IDLE and before is not Phase.IDLE:
                self.repair_attempts = 0  # a new state starts with a fresh repair budget
            self.activation_open = False
        elif self.activation_open and self.budget_left <= 0:
            self.activation_open = False  # budget spent without a legal control action: the activation ends
        transition = Transition(
            activation=self.activation,
            action=action,
            phase_before=before.value,
            phase_after=self.phase.value,
            legal=reason is None,
            message=reason or "ok",
            repair_mode=mode,
        )
        self.history.append(transition)
        return transition
