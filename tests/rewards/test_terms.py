"""Each reward term pinned on hand-built minimal episode records (no runtime, no sandbox)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.manager.episode import EpisodeRecord
from rewards import FaultInfo, RewardConfig, score_episode
from rewards.terms import economy, grounding, intervention, numbers, outcome, protocol

CONFIG = RewardConfig()


def act(name: str, arguments: dict[str, Any] | None = None, *, legal: bool = True, result: str = "ok") -> dict:
    kind = "tool" if name[0].islower() else "control"
    return {"raw": "", "parsed": {"name": name, "arguments": arguments or {}}, "kind": kind, "legal": legal,
            "result": result}  # fmt: skip


def bad() -> dict:
    return {"raw": "hello", "parsed": None, "kind": None, "legal": False, "result": "rejected: no action"}


def activation(turn: str, *actions: dict, actor: str = "policy", event: str = "turn_end") -> dict:
    return {"index": 0, "event_type": event, "turn_id": turn, "actor": actor, "observation": None,
            "actions": list(actions), "latency_s": 0.0}  # fmt: skip


def step(step_id: int, turn: str, variables: list[tuple[str, int, str]], results: list | None = None) -> dict:
    execution = {"ok": True, "stdout_tail": "", "display": None, "results": results or [],
                 "variables": [{"name": n, "version": v, "summary": s} for n, v, s in variables]}  # fmt: skip
    return {"step_id": step_id, "turn_id": turn, "code": "", "execution": execution}


def grade(*correct: bool, valid: bool = True) -> dict:
    turns = {str(i + 1): {"correct": c, "score": float(c)} for i, c in enumerate(correct)}
    return {"valid": valid, "score": sum(correct) / len(correct), "details": {"turns": turns}}


def record(**sections: Any) -> dict:
    base = {"task_id": "t", "episode_id": "e", "config": {}, "simulated": True, "worker_steps": [], "activations": [],
            "states": [], "hints": [], "repairs": [], "checkpoints": [], "transitions": [], "final_answers": {},
            "grade": None, "duration_s": 0.0, "schema_version": "1.0"}  # fmt: skip
    return {**base, **sections}


def state(sid: str, start: int, end: int, variables: list[tuple[str, int, str]], conclusions: list[str]) -> dict:
    return {"id": sid, "issue": "i", "constraints": [], "relations": [{"type": "init"}], "conclusions": conclusions,
            "used_variables": [{"name": n, "version": v, "value": s} for n, v, s in variables],
            "source_step_start": start, "source_step_end": end, "checkpoint_id": None}  # fmt: skip


# ---------------------------------------------------------------- helpers
def test_numbers_skip_identifiers() -> None:
    assert numbers("S4 over_5 reported 12.5 and -3 at step 4; cp30 1e3") == [12.5, -3.0, 4.0, 1000.0]


# ---------------------------------------------------------------- protocol
def test_protocol_is_the_legal_share() -> None:
    opened = activation("1", act("OPEN_STATE"), event="turn_start")
    rec = record(activations=[opened, activation("1", bad(), act("check_execution", {"step_id": 0}), act("ABSTAIN"))])
    assert protocol(rec, None, CONFIG) == pytest.approx(3 / 4)


def test_protocol_penalises_overruns() -> None:
    spent = activation("1", *[act("check_execution", {"step_id": 0})] * 8)  # no control action: budget overrun
    fallback = activation("1", act("ABANDON_STATE"), actor="harness")
    done = activation("1", act("OPEN_STATE"), event="turn_start")
    rec = record(activations=[done, spent, fallback])
    # all 9 policy actions legal; 2 of the 3 activations overran
    assert protocol(rec, None, CONFIG) == pytest.approx(1.0 - 2 / 3)
    assert protocol(rec, None, RewardConfig(overrun_penalty=2.0)) == 0.0  # clipped at 0


def test_protocol_not_applicable_without_policy_actions() -> None:
    assert protocol(record(), None, CONFIG) is None
    assert protocol(record(activations=[activation("1", act("COMMIT_STATE"), actor="harness")]), None, CONFIG) is None


# ---------------------------------------------------------------- grounding
def _grounding_record(update_args: dict, conclusions: list[str], bound: list[tuple[str, int, str]]) -> dict:
    steps = [step(0, "1", [("orders", 1, "DataFrame 5x2")]),
             step(1, "2", [("total", 2, "12.5"), ("result", 3, "{'total': 12.5}")], [{"total": 12.5}])]  # fmt: skip
    acts = [activation("2", act("OPEN_STATE"), event="turn_start"),
            activation("2", act("check_execution", {"step_id": 1}, result='{"ok": true, "rows": 77}'),
                       act("UPDATE_STATE", update_args)),
            activation("2", act("FINALIZE_RELATIONS")), activation("2", act("COMMIT_STATE"))]  # fmt: skip
    return record(worker_steps=steps, activations=acts, states=[state("S1", 1, 1, bound, conclusions)])


def test_grounding_counts_variables_and_numeric_conclusions() -> None:
    conclusions = ["The total is 12.5 at step 1.", "The check saw 77 rows.", "Looks fine."]
    rec = _grounding_record(
        {"used_variables": ["total", "result", "ghost"], "conclusions": conclusions},
        conclusions,
        [("total", 2, "12.5"), ("result", 3, "{'total': 12.5}")],  # the harness dropped "ghost"
    )
    # variables: total, result grounded, ghost not; conclusions: 2 checkable, both grounded (77 is a tool output)
    assert grounding(rec, None, CONFIG) == pytest.approx(4 / 5)


def test_grounding_rejects_wrong_numbers_stale_versions_and_outside_variables() -> None:
    conclusions = ["The total is 13.0."]
    rec = _grounding_record(
        {"used_variables": ["total", "orders"], "conclusions": conclusions},
        conclusions,
        [("total", 1, "12.5"), ("orders", 1, "DataFrame 5x2")],  # stale version; orders is outside the interval
    )
    assert grounding(rec, None, CONFIG) == 0.0


def test_grounding_of_an_empty_state_is_zero_and_none_without_states() -> None:
    rec = _grounding_record({"used_variables": [], "conclusions": []}, [], [])
    assert grounding(rec, None, CONFIG) == 0.0
    assert grounding(record(), None, CONFIG) is None


# ---------------------------------------------------------------- intervention
FAULT = FaultInfo("2", "wrong_aggregation", ("total", "result"), "total")
REVEAL = json.dumps({"ok": True, "succeeded": False, "error_type": "AssertionError",
                     "error_message": "`total` = 12.5 but recomputing it from the task data gives 40.0"})  # fmt: skip
PASS = json.dumps({"ok": True, "succeeded": True, "error_type": None, "error_message": None})


def _repair_record(variable: str, tool_result: str, evidence: str, correct: tuple[bool, ...], turn: str = "2") -> dict:
    hint = {"error_variable": variable, "faulty_reasoning": "mean, not sum"}
    repair = act("REPAIR", {"analytical_evidence": evidence, "error_hint": hint})
    acts = [activation(turn, act("run_probe", {"code": "p"}, result=tool_result), repair)]
    repairs = [{"state_id": "S2", "turn_id": turn, "attempt": 1, "mode": "light", "variable": variable}]
    return record(activations=acts, repairs=repairs, grade=grade(*correct))


def test_localized_repair_with_cited_evidence_and_restored_turns_scores_one() -> None:
    rec = _repair_record("total", REVEAL, "run_probe failed: `total` = 12.5 but recomputing it gives 40.0", (1, 1, 1))
    assert intervention(rec, FAULT, CONFIG) == pytest.approx(1.0)


def test_repair_bonuses_need_a_revealing_cited_result_and_correct_turns() -> None:
    uncited = _repair_record("total", REVEAL, "something is off", (True, True, False))
    assert intervention(uncited, FAULT, CONFIG) == pytest.approx(0.5 + 0.25 * 1 / 2)
    passed = _repair_record("total", PASS, "run_probe failed: `total` = 12.5 but recomputing", (True, True, True))
    assert intervention(passed, FAULT, CONFIG) == pytest.approx(0.75)


def test_unlocalized_missed_and_false_repairs() -> None:
    wrong_variable = _repair_record("orders", REVEAL, "x", (True, True, True))
    assert intervention(wrong_variable, FAULT, CONFIG) == 0.0
    assert intervention(record(grade=grade(True, False, False)), FAULT, CONFIG) == -0.5  # missed: -beta_fn
    on_clean_turn = _repair_record("total", REVEAL, "x", (True, True, True), turn="1")
    assert intervention(on_clean_turn, None, CONFIG) == -1.0  # clean episode: -beta_fp
    # a false repair on turn 1 AND the fault on turn 2 missed
    assert intervention(on_clean_turn, FAULT, CONFIG) == pytest.approx(-1.5)
    benign = FaultInfo("2", "equivalent_rewrite", ("total",), "total", benign=True)
    assert intervention(_repair_record("total", REVEAL, "x", (True,) * 3), benign, CONFIG) == -1.0
    assert intervention(record(), benign, CONFIG) == 0.0


def test_false_repairs_add_up_per_turn() -> None:
    rec = record(repairs=[{"turn_id": "1", "variable": "a"}, {"turn_id": "1", "variable": "a"},
                          {"turn_id": "3", "variable": "b"}])  # fmt: skip
    assert intervention(rec, None, CONFIG) == -2.0


# ---------------------------------------------------------------- outcome and economy
def test_outcome_counts_turns_from_the_fault_on() -> None:
    rec = record(grade=grade(False, False, True))
    assert outcome(rec, None, CONFIG) == pytest.approx(1 / 3)
    assert outcome(rec, FAULT, CONFIG) == pytest.approx(1 / 2)
    assert outcome(record(grade=grade(True, True, valid=False)), None, CONFIG) == 0.0
    assert outcome(record(), None, CONFIG) is None


def test_economy_charges_tool_calls_beyond_the_allowance() -> None:
    spam = activation("1", *[act("check_execution", {"step_id": 0})] * 8)
    lean = activation("1", act("run_probe", {"code": "p"}), act("COMMIT_STATE"))
    assert economy(record(activations=[spam, lean]), None, CONFIG) == pytest.approx((0.5 + 1.0) / 2)
    assert economy(record(), None, CONFIG) is None


# ---------------------------------------------------------------- the total
def test_score_episode_weights_the_applicable_terms() -> None:
    rec = _repair_record("total", REVEAL, "run_probe failed: `total` = 12.5 but recomputing it gives 40.0", (1, 1, 1))
    breakdown = score_episode(rec, FAULT)
    assert breakdown.terms == {"protocol": 1.0, "grounding": None, "intervention": 1.0, "outcome": 1.0,
                               "economy": 1.0}  # fmt: skip
    assert breakdown.total == pytest.approx(0.2 + 0.4 + 0.4 + 0.1)
    assert score_episode(EpisodeRecord.from_dict(rec), FAULT).total == pytest.approx(breakdown.total)
    assert breakdown.metrics()["rewards/total"] == breakdown.total
    assert "rewards/grounding" not in breakdown.metrics()
    with pytest.raises(TypeError, match="EpisodeRecord"):
        score_episode("not a record", None)  # type: ignore[arg-type]
