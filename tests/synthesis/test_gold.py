"""The gold manager inside the real runtime on the built-in retail task: legal sequences that end as specified (clean:
FINALIZE then COMMIT; faulted: REPAIR citing a failed tool result, then COMMIT without a second repair; benign: no
repair), relations that follow the task graph, and no repair without evidence."""

import json

import pytest

from harness.manager.policies import PolicyInput
from harness.manager.wire import parse_response
from synthesis.faults import InjectedFault
from synthesis.gold import GoldPolicy, Teacher
from synthesis.runs import play


@pytest.fixture(scope="module")
def faults(candidates):
    return candidates


def _names(activation):
    return [a["parsed"]["name"] for a in activation["actions"] if a["parsed"]]


def _turn_actions(record, turn_id):
    return [name for act in record.activations if act["turn_id"] == turn_id for name in _names(act)]


def _controls(record, turn_id):
    controls = {"OPEN_STATE", "UPDATE_STATE", "FINALIZE_RELATIONS", "COMMIT_STATE", "REPAIR", "ABANDON_STATE"}
    return [n for n in _turn_actions(record, turn_id) if n in controls]


def test_clean_run_is_legal_and_every_turn_finalizes_then_commits(sandbox, task):
    run = play(task, sandbox, GoldPolicy(None), None, "clean")
    record = run.record
    assert all(a["legal"] for act in record.activations for a in act["actions"])
    assert all(t["legal"] for t in record.transitions)
    assert record.repairs == []
    for turn in task.turns:
        assert _controls(record, turn.turn_id) == ["OPEN_STATE", "UPDATE_STATE", "FINALIZE_RELATIONS", "COMMIT_STATE"]
    assert record.simulated is True
    assert record.final_answers == {t: r.answer for t, r in task.load_answers().items()}


def test_clean_relations_follow_the_task_graph(sandbox, task):
    record = play(task, sandbox, GoldPolicy(None), None, "clean").record
    by_turn = {state["source_step_start"]: state for state in record.states}
    states = [by_turn[k] for k in sorted(by_turn)]
    state_of = {turn.turn_id: state["id"] for turn, state in zip(task.turns, states, strict=True)}
    for turn, state in zip(task.turns, states, strict=True):
        expected = (
            [{"type": "init", "related_state_id": None}]
            if not turn.depends_on
            else [{"type": turn.relation, "related_state_id": state_of[t]} for t in turn.depends_on]
        )
        assert state["relations"] == expected, turn.turn_id


def _first(faults, predicate):
    found = [f for f in faults if predicate(f)]
    assert found, "the fault library offers no such fault on the retail task"
    return found[0]


def test_faulted_turn_repairs_citing_a_failed_probe_then_commits_once(sandbox, task, faults):
    fault = _first(faults, lambda f: not f.benign and f.evidence_tool == "run_probe")
    policy = GoldPolicy(fault)
    record = play(task, sandbox, policy, fault, "gold").record
    assert all(a["legal"] for act in record.activations for a in act["actions"])
    assert _controls(record, fault.turn_id) == [
        "OPEN_STATE",
        "UPDATE_STATE",
        "REPAIR",
        "UPDATE_STATE",
        "FINALIZE_RELATIONS",
        "COMMIT_STATE",
    ]
    assert len(record.repairs) == 1 and record.repairs[0]["variable"] == fault.error_variable
    repair_activation = next(act for act in record.activations if "REPAIR" in _names(act))
    *tools, repair = repair_activation["actions"]
    evidence_result = json.loads(tools[-1]["result"])
    assert tools[-1]["parsed"]["name"] == "run_probe"
    assert tools[-1]["parsed"]["arguments"]["code"] == fault.evidence_code
    assert evidence_result["succeeded"] is False and evidence_result["error_type"] == "AssertionError"
    quoted = repair["parsed"]["arguments"]["analytical_evidence"]
    assert " ".join(evidence_result["error_message"].split())[:80] in quoted
    hint = repair["parsed"]["arguments"]["error_hint"]
    assert hint == {"error_variable": fault.error_variable, "faulty_reasoning": fault.faulty_reasoning}
    assert record.final_answers == {t: r.answer for t, r in task.load_answers().items()}
    assert policy.evidence_missing is False


def test_execution_error_is_repaired_from_check_execution(sandbox, task, faults):
    fault = _first(faults, lambda f: f.evidence_tool == "check_execution")
    record = play(task, sandbox, GoldPolicy(fault), fault, "gold").record
    repair_activation = next(act for act in record.activations if "REPAIR" in _names(act))
    evidence = json.loads(repair_activation["actions"][-2]["result"])
    assert repair_activation["actions"][-2]["parsed"]["name"] == "check_execution"
    assert evidence["verdict"] == "failed"
    assert _controls(record, fault.turn_id).count("REPAIR") == 1
    assert _controls(record, fault.turn_id)[-2:] == ["FINALIZE_RELATIONS", "COMMIT_STATE"]


def test_benign_fault_is_checked_and_committed_without_repair(sandbox, task, faults):
    fault = _first(faults, lambda f: f.benign)
    record = play(task, sandbox, GoldPolicy(fault), fault, "gold").record
    assert record.repairs == []
    actions = _turn_actions(record, fault.turn_id)
    assert "run_probe" in actions  # the benign turn is verified, not waved through
    assert _controls(record, fault.turn_id)[-2:] == ["FINALIZE_RELATIONS", "COMMIT_STATE"]


def test_no_repair_when_the_evidence_does_not_show_a_violation(sandbox, task, faults):
    real = _first(faults, lambda f: not f.benign and f.evidence_tool == "run_probe")
    blind = InjectedFault(**{**real.__dict__, "evidence_code": "assert True"})
    policy = GoldPolicy(blind)
    record = play(task, sandbox, policy, blind, "gold").record
    assert record.repairs == []
    assert policy.evidence_missing is True


def test_teacher_failure_falls_back_to_the_template():
    class Down:
        def chat(self, messages, tools=None):
            raise ConnectionError("endpoint down")

    teacher = Teacher(Down())
    assert teacher.paraphrase("Turn 1: how many orders?") == "Turn 1: how many orders?"
    assert teacher.failures == 1


def test_every_response_is_one_parseable_action(sandbox, task, faults):
    fault = _first(faults, lambda f: not f.benign)
    policy = GoldPolicy(fault)
    play(task, sandbox, policy, fault, "gold")
    assert policy.log and all(isinstance(entry.inp, PolicyInput) for entry in policy.log)
    assert all(parse_response(entry.response).ok for entry in policy.log)
