"""The digest rule: a no-model decision-point baseline that repairs iff the evidence digest reports a failure.

At a decision point taken over at the gold's decision (:mod:`training.study.decisions`, ``takeover: decision``) the
gold manager has already run its checks; the arm reads their results and decides. A model sees those results with
the evidence digest as the last line of each tool response (:func:`harness.manager.prompts.render_evidence`:
``[evidence this activation: N failed: <first failure>]``, or that every check passed, or that none ran).
:class:`DigestRulePolicy` decides from that line alone, without a model: at a check request (a draft is open,
``FINALIZE_RELATIONS`` is legal, ``COMMIT_STATE`` is not) it answers

- ``REPAIR`` when the digest of the activation's results reports a failure: the evidence quotes the digest's failure,
  the variable is the one the first failed result names (a ``run_check``'s ``variable``), else the draft's first
  variable, else ``"result"``; ``ABANDON_STATE`` when ``REPAIR`` is not legal (the repair budget is spent);
- ``FINALIZE_RELATIONS`` (confirm) otherwise.

Every other request goes to ``fallback`` (the ``rule`` policy by default), so the policy also plays whole
activations; there it decides at once on the results so far (none: it confirms). It shows how much of a score at
decision points is reproduced by reading the digest: where the gold's checks failed it repairs, where they passed it
confirms.
"""

from __future__ import annotations

import json
import re
from typing import Any

from harness.manager.hints import HintError, render_repair_hint
from harness.manager.policies import RulePolicy
from harness.manager.policy_types import PolicyInput, call
from harness.manager.prompts import EVIDENCE_PREFIX, render_evidence, result_failure

DIGEST_RULE = "digest-rule"
_FAILED = re.compile(re.escape(EVIDENCE_PREFIX) + r"(\d+) failed: (.*)\]$", re.DOTALL)


def digest_failure(digest: str) -> str | None:
    """The failure an evidence digest line quotes (``N failed: <quote>``), None when it reports none."""
    match = _FAILED.match(digest.strip())
    return None if match is None else match.group(2)


def _is_check_request(inp: PolicyInput) -> dict[str, Any] | None:
    """The open draft when ``inp`` asks for the check decision, else None."""
    try:
        draft = json.loads(inp.observation).get("current_draft")
    except (TypeError, ValueError, AttributeError):
        return None
    legal = set(inp.legal_actions)
    return draft if draft is not None and "FINALIZE_RELATIONS" in legal and "COMMIT_STATE" not in legal else None


def _failed_variable(results: tuple[str, ...], draft: dict[str, Any]) -> str:
    for text in results:
        try:
            value = json.loads(text)
        except (TypeError, ValueError):
            continue
        if isinstance(value, dict) and result_failure(value) and isinstance(value.get("variable"), str):
            if value["variable"].strip():
                return value["variable"]
    names = [v.get("name") for v in draft.get("used_variables") or [] if isinstance(v, dict)]
    return next((n for n in names if isinstance(n, str) and n.strip()), "result")


class DigestRulePolicy:
    """The digest rule (module docstring); ``fallback`` answers every request that is not a check decision."""

    name = DIGEST_RULE
    active = True

    def __init__(self, fallback: Any | None = None):
        self.fallback = fallback if fallback is not None else RulePolicy()

    def respond(self, inp: PolicyInput) -> str:
        draft = _is_check_request(inp)
        if draft is None:
            return self.fallback.respond(inp)
        failure = digest_failure(render_evidence(inp.tool_results))
        if failure is None:
            return call("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})
        if "REPAIR" not in inp.legal_actions:
            return call("ABANDON_STATE")
        variable = _failed_variable(inp.tool_results, draft)
        reasoning = "the evidence digest of this activation reports a failed check"
        evidence = f"digest: {failure}"
        try:
            render_repair_hint(variable, reasoning, evidence)
        except HintError:  # the quote reads as code or is too long: say it in words, shorter
            evidence = evidence.replace("==", " equals ").replace("=", " is ")[:300]
        return call("REPAIR", {"analytical_evidence": evidence,
                               "error_hint": {"error_variable": variable, "faulty_reasoning": reasoning}})  # fmt: skip


DECISION_BASELINES: dict[str, type[DigestRulePolicy]] = {DIGEST_RULE: DigestRulePolicy}
"""Arms that play the decision points only (no model, no training, no episodes): name -> policy class."""
