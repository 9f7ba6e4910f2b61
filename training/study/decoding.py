"""The study's decoding rule on top of the core's legal-action grammar: no decision before a probe.

A flat model arm served with ``decide_after_probe`` may take neither decision (:data:`DECISIONS`: repair or
confirm) until a probe of the activation has run, so its decisions follow evidence it wrote, as every decision of the
gold manager does. :func:`decide_after_probe` sets the policy's generic ``before_reply`` hook
(:class:`harness.manager.llm_policy.LLMPolicy`) to narrow the action grammar
(:func:`harness.manager.wire.call_grammar`) to :func:`actions_now` before each reply.
"""

from __future__ import annotations

from typing import Any

from harness.manager.llm_policy import actions_now as legal_now
from harness.manager.model_settings import constrain_actions
from harness.manager.policy_types import PolicyInput
from harness.manager.wire import parse_response

DECISIONS = ("REPAIR", "FINALIZE_RELATIONS")
"""The two decisions that end a check activation: the repair and the confirmation."""


def probed(inp: PolicyInput) -> bool:
    """Whether a ``run_probe`` of this activation ran (was parsed and not refused) before this response."""
    for raw, result in inp.previous:
        parsed = parse_response(raw)
        if parsed.ok and parsed.action is not None and parsed.action.name == "run_probe":
            if not result.startswith(("illegal", "rejected")):
                return True
    return False


def actions_now(inp: PolicyInput) -> list[str]:
    """The actions legal now (:func:`harness.manager.llm_policy.actions_now`) less both decisions until a probe of
    this activation has run (when nothing else is legal, the decisions stay)."""
    names = legal_now(inp)
    if not probed(inp):
        names = [n for n in names if n not in DECISIONS] or names
    return names


def decide_after_probe(policy: Any) -> None:
    """Before each reply of the flat llm ``policy``, set its backend's grammar to the actions :func:`actions_now`
    allows (:func:`harness.manager.model_settings.constrain_actions` with them). Any other policy is a
    ``ValueError``."""
    constrain_actions(policy, legal_only=True, actions=actions_now)
