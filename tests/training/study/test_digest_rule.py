"""The digest rule (training/study/digest_rule.py): REPAIR iff the evidence digest reports a failure, else confirm;
on the real decision points it reproduces the gold's decisions where the gold ran its checks."""

from __future__ import annotations

import json

from harness.manager.policy_types import PolicyInput
from harness.manager.wire import parse_response
from training.study.digest_rule import DECISION_BASELINES, DigestRulePolicy, digest_failure

DECIDE = ("run_check", "check_execution", "FINALIZE_RELATIONS", "REPAIR", "ABANDON_STATE")
DRAFT = {"current_draft": {"used_variables": [{"name": "top"}]}}


def _decide(results, legal=DECIDE, fallback=None):
    inp = PolicyInput(observation=json.dumps(DRAFT), tool_results=tuple(json.dumps(r) for r in results),
                      legal_actions=legal)  # fmt: skip
    action = parse_response(DigestRulePolicy(fallback).respond(inp)).action
    return action.name, action.arguments


class Recorder:
    def respond(self, inp):
        return "fallback"


def test_the_digest_rule_repairs_on_a_failure_quoting_it_and_confirms_otherwise() -> None:
    passed = {"ok": True, "passed": True, "kind": "top_k", "variable": "top", "requirement": "3 largest"}
    failed = {"ok": True, "passed": False, "kind": "sort_order", "variable": "ranked", "requirement": "descending",
              "reason": "ranked is ascending"}  # fmt: skip
    name, args = _decide([passed, failed])
    assert name == "REPAIR" and args["error_hint"]["error_variable"] == "ranked"
    assert args["analytical_evidence"] == "digest: run_check failed: ranked is ascending"
    # a failed step names no variable: the draft's first one
    crashed = {"ok": True, "verdict": "failed", "step_id": 4, "error_type": "KeyError", "error_message": "'x'"}
    name, args = _decide([crashed])
    assert name == "REPAIR" and args["error_hint"]["error_variable"] == "top"
    assert _decide([passed])[0] == "FINALIZE_RELATIONS" and _decide([])[0] == "FINALIZE_RELATIONS"
    assert _decide([{"ok": True, "passed": None, "requirement": "x"}])[0] == "FINALIZE_RELATIONS"  # could not run
    no_repair = tuple(a for a in DECIDE if a != "REPAIR")
    assert _decide([failed], legal=no_repair)[0] == "ABANDON_STATE"
    # not a check request (COMMIT_STATE legal): the fallback answers
    inp = PolicyInput(observation=json.dumps(DRAFT), legal_actions=("COMMIT_STATE",))
    assert DigestRulePolicy(Recorder()).respond(inp) == "fallback"
    assert digest_failure("[evidence this activation: 2 failed: a]") == "a"
    assert digest_failure("[evidence this activation: 1 check passed; no probe has run]") is None


def test_the_digest_rule_scores_the_gold_decisions_at_the_decision_points(pool, env) -> None:
    from training.study.decision_metrics import decision_metrics
    from training.study.decisions import decision_points, play_decision

    points = decision_points(pool, 4, seed=0)
    rows = [play_decision(env, p, DECISION_BASELINES["digest-rule"](), 1, "decision") for p in points]
    assert [r["control"] for r in rows] == [p.gold_control for p in points]
    m = decision_metrics(rows, seed=0, n=200)
    assert m["repair_points"] == 2 and m["repair_f1"]["value"] == 1.0
    assert m["false_repair_rate"]["value"] == 0.0 and m["control_match"]["value"] == 1.0
