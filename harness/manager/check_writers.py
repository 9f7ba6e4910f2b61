"""``hier-checks``: the hierarchical manager whose tier 1 writes the turn's checks (:class:`HierPolicy` with
``writes="checks"``), and its oracle arm ``hier-checks:gold``.

- ``hier-checks:llm:URL`` / ``hier-checks:llm-hf:PATH``: a chat model reads the turn and replies ``{"checks": [spec,
  ...]}`` once per state; tier 0 runs each spec with ``run_check`` in the clean verifier and repairs exactly when one
  fails, quoting it, with no further model call.
- ``hier-checks:none``: no model; tier 0 alone (it repairs a failed execution and confirms otherwise), like
  ``hier:none``.
- ``hier-checks:gold``: **an oracle arm** (an upper bound, never a result): tier 1's reply is the gold manager's own
  specs of the turn, which synthesis wrote from the turn's private slots. It reads them from the manager's view, so it
  needs the run's ``oracle_checks`` switch (``--oracle-checks``, recorded in every episode and in results.json's
  ``oracles``); ``stateguard run`` and ``evaluate`` refuse it without the switch before any episode, and the policy
  raises a one-line error in an episode that lacks it, instead of playing a manager that checks nothing.

The spec's factory is :mod:`harness.manager.served`'s (a checkpoint's ``manager.json`` applies to the model arms).
"""

from __future__ import annotations

from harness.manager.hier import HierPolicy
from harness.manager.hier_checks import render_checks_reply
from harness.manager.policy_types import PolicyInput
from harness.specs import ManagerSpec

GOLD_NEEDS_SWITCH = (
    "hier-checks:gold runs the gold's check specs, an oracle the run did not switch on; add --oracle-checks "
    "(evaluation config: oracle_checks: true)"
)
"""The one-line refusal of ``hier-checks:gold`` without ``oracle_checks``."""


def needs_oracle_checks(spec: ManagerSpec) -> bool:
    """Whether the manager ``spec`` is the oracle arm that reads the gold's specs."""
    return spec.name == "hier-checks" and spec.tier1 == "gold"


class GoldChecksPolicy(HierPolicy):
    """``hier-checks:gold``: tier 1 answered by the gold's specs of the turn (``inp.view.gold_checks``)."""

    def __init__(self) -> None:
        super().__init__(None, name="hier-checks-gold", writes="checks")

    def respond(self, inp: PolicyInput) -> str:
        if not inp.view.oracle_checks:
            raise ValueError(GOLD_NEEDS_SWITCH)
        if self.tier1_messages(inp) is not None:
            turn_id = None if inp.turn is None else inp.turn.turn_id
            self.take_checks(inp, render_checks_reply(inp.view.gold_checks.get(str(turn_id), ())))
        return self.tier0_respond(inp)
