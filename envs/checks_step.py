"""What one ``hier_checks`` step of :class:`envs.ManagerEnv` grades: the turn's label, the checks tier 0 ran for the
agent's reply and their verdicts, tier 0's decision, and the check-writing reward (:func:`rewards.score_checks`).

- :func:`turn_label`: ``faulted`` for the turn of the episode's harmful fault (not yet repaired when tier 1 is asked:
  a failed execution that tier 0 repaired first leaves a state that is no longer the faulty one), ``clean`` for
  every turn of a clean episode and the turns before the fault, None for the others (a benign fault's turn, the turns
  after the fault, a turn tier 0 repaired before asking).
- :func:`ran_checks`: the ``run_check`` calls of the check activation (from the decision request's
  ``PolicyInput.previous``) and their verdicts, in the order tier 0 sent them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from envs.twins import verdict
from harness.manager.wire import parse_response
from harness.tasks import Task
from rewards import CheckReward, CheckRewardConfig, score_checks


def turn_label(task: Task, fault: Any, turn_id: str | None, repaired: bool) -> str | None:
    """The turn's label for the check-writing reward (see the module docstring); ``fault``: the episode's
    ``rewards.FaultInfo`` (None: a clean episode); ``repaired``: the turn was repaired before tier 1 was asked."""
    if turn_id is None:
        return None
    if fault is None:
        return "clean"
    order = [t.turn_id for t in task.turns]
    if turn_id == fault.turn_id:
        return None if fault.benign or repaired else "faulted"
    if turn_id in order and fault.turn_id in order and order.index(turn_id) < order.index(fault.turn_id):
        return "clean"
    return None


def ran_checks(previous: Sequence[tuple[str, str]]) -> tuple[list[Any], list[bool | None]]:
    """The specs of the ``run_check`` calls among an activation's ``(response, result)`` pairs and their verdicts."""
    specs, verdicts = [], []
    for raw, result in previous:
        parsed = parse_response(raw)
        if parsed.ok and parsed.action is not None and parsed.action.name == "run_check":
            specs.append(parsed.action.arguments.get("spec"))
            verdicts.append(verdict(result))
    return specs, verdicts


@dataclass(frozen=True)
class ChecksStep:
    """One checks reply as the env graded it (``info["checks"]``)."""

    turn_id: str | None
    label: str | None
    parsed: bool
    kept: int
    dropped: int
    here: list[bool | None]
    clean: list[bool | None] | None
    decision: str | None
    variable: str | None = None  # the variable tier 0's REPAIR named

    def reward(self, config: CheckRewardConfig | None) -> CheckReward:
        return score_checks(self.parsed, self.kept, self.dropped, self.here, self.clean, self.label, config)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_reward_info(step: ChecksStep, config: CheckRewardConfig | None) -> tuple[float, dict[str, Any]]:
    """The step's reward and its info entries: ``checks`` (the :class:`ChecksStep`) and ``reward_terms``."""
    reward = step.reward(config)
    return reward.total, {"checks": step.to_dict(), "reward_terms": dict(reward.terms)}
