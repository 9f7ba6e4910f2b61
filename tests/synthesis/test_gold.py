"""The gold manager inside the real runtime on the built-in retail task: legal sequences that end as specified (clean:
FINALIZE then COMMIT; a failed execution: REPAIR citing check_execution, then COMMIT), relations inferred from the
questions' words that equal the task graph, the same checks on a faulted turn as on its clean twin, and no repair
without a tool result that shows a violation (a fault no check reveals is committed)."""

import json

import pytest

from harness.checks.spec import parse_spec
from harness.manager.policy_types import PolicyInput
from harness.manager.wire import parse_response
from synthesis.checks import Check
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


def _check_calls(record, turn_id):
    """The tool calls (name, arguments) of the first check activation of ``turn_id`` (the one that decides)."""
    for act in record.activations:
        names = _names(act)
        if act["turn_id"] == turn_id and names and names[-1] in ("FINALIZE_RELATIONS", "REPAIR"):
            return [(a["parsed"]["name"], a["parsed"]["arguments"]) for a in act["actions"][:-1]]
    raise AssertionError(f"no check activation at turn {turn_id}")


def test_clean_run_is_legal_and_every_turn_finalizes_then_commits(sandbox, task):
    run = play(task, sandbox, GoldPolicy(), None, "clean")
    record = run.record
    assert all(a["legal"] for act in record.activations for a in act["actions"])
    assert all(t["legal"] for t in record.transitions)
    assert record.repairs == []
    for turn in task.turns:
        assert _controls(record, turn.turn_id) == ["OPEN_STATE", "UPDATE_STATE", "FINALIZE_RELATIONS", "COMMIT_STATE"]
    assert record.simulated is True
    assert record.final_answers == {t: r.answer for t, r in task.load_answers().items()}


def test_relations_inferred_from_the_questions_equal_the_task_graph(sandbox, task):
    record = play(task, sandbox, GoldPolicy(), None, "clean").record
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


def test_a_failing_check_is_repaired_with_a_hint_written_from_the_check(sandbox, task, faults, region_checks):
    fault = _first(faults, lambda f: not f.benign and f.evidence_tool == "run_probe" and f.turn_id != "1")
    assert fault.turn_id == "2"  # turn 1 states a constraint of its own; the check turn 2 states fails here only
    (check,) = region_checks[fault.turn_id]
    answers = {t: r.answer for t, r in task.load_answers().items()}
    policy = GoldPolicy(checks=region_checks)
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
    assert len(record.repairs) == 1 and record.repairs[0]["variable"] == "by_region"
    repair_activation = next(act for act in record.activations if "REPAIR" in _names(act))
    *tools, repair = repair_activation["actions"]
    result = json.loads(tools[-1]["result"])
    assert tools[-1]["parsed"] == {"name": "run_check", "arguments": {"spec": check.spec.to_dict()}}
    assert result["passed"] is False and result["variable"] == "by_region" and result["reason"]
    evidence = repair["parsed"]["arguments"]["analytical_evidence"]
    assert evidence.startswith("run_check failed: ") and " ".join(result["reason"].split())[:60] in evidence
    hint = repair["parsed"]["arguments"]["error_hint"]
    assert hint == {
        "error_variable": "by_region",
        "faulty_reasoning": f"it does not meet what the turn states: {check.requirement}",
    }
    assert fault.faulty_reasoning not in json.dumps(record.activations)  # the fault library's words never appear
    assert record.final_answers == answers
    clean = play(task, sandbox, GoldPolicy(checks=region_checks), None, "clean").record
    assert _check_calls(record, fault.turn_id) == _check_calls(clean, fault.turn_id)
    assert clean.repairs == []  # the check passes on the clean state


def test_constraints_are_stated_with_their_spec_and_checked_with_it(sandbox, task):
    """A constraint no spec states (turn 1's derived-column rule) is opened with its text alone and verified with its
    own code; restated by a spec, it is opened as ``{"text", "check"}`` and verified with ``run_check``."""
    (rule,) = task.turns[0].constraints
    record = play(task, sandbox, GoldPolicy(), None, "clean").record
    opened = next(a for act in record.activations for a in act["actions"] if a["parsed"]["name"] == "OPEN_STATE")
    assert opened["parsed"]["arguments"]["constraints"] == [{"text": rule.text}]
    assert _check_calls(record, "1")[1] == ("run_probe", {"code": rule.code})
    spec = parse_spec({"kind": "no_missing", "variable": "sales", "columns": ["order_id"]})
    restated = Check("sales", rule.text, spec, constraint=rule.text)
    record = play(task, sandbox, GoldPolicy(checks={"1": (restated,)}), None, "clean").record
    opened = next(a for act in record.activations for a in act["actions"] if a["parsed"]["name"] == "OPEN_STATE")
    assert opened["parsed"]["arguments"]["constraints"] == [{"text": rule.text, "check": spec.to_dict()}]
    assert _check_calls(record, "1")[1:] == [("run_check", {"spec": spec.to_dict()})]
    assert record.repairs == []


def test_execution_error_is_repaired_from_check_execution(sandbox, task, faults):
    fault = _first(faults, lambda f: f.evidence_tool == "check_execution")
    record = play(task, sandbox, GoldPolicy(), fault, "gold").record
    repair_activation = next(act for act in record.activations if "REPAIR" in _names(act))
    first = repair_activation["actions"][0]
    assert first["parsed"]["name"] == "check_execution" and json.loads(first["result"])["verdict"] == "failed"
    quoted = repair_activation["actions"][-1]["parsed"]["arguments"]["analytical_evidence"]
    assert quoted.startswith("check_execution of step") and "failed" in quoted
    assert _controls(record, fault.turn_id).count("REPAIR") == 1
    assert _controls(record, fault.turn_id)[-2:] == ["FINALIZE_RELATIONS", "COMMIT_STATE"]


def test_benign_fault_is_checked_and_committed_without_repair(sandbox, task, faults):
    fault = _first(faults, lambda f: f.benign)
    record = play(task, sandbox, GoldPolicy(), fault, "gold").record
    assert record.repairs == []
    assert "check_execution" in _turn_actions(record, fault.turn_id)  # verified, not waved through
    assert _controls(record, fault.turn_id)[-2:] == ["FINALIZE_RELATIONS", "COMMIT_STATE"]


def test_a_fault_no_check_reveals_is_committed_with_the_clean_twins_checks(sandbox, task, faults):
    fault = _first(faults, lambda f: not f.benign and f.evidence_tool == "run_probe" and f.turn_id != "1")
    record = play(task, sandbox, GoldPolicy(), fault, "gold").record
    clean = play(task, sandbox, GoldPolicy(), None, "clean").record
    assert record.repairs == []
    assert _controls(record, fault.turn_id) == ["OPEN_STATE", "UPDATE_STATE", "FINALIZE_RELATIONS", "COMMIT_STATE"]
    assert _check_calls(record, fault.turn_id) == _check_calls(clean, fault.turn_id)
    assert record.final_answers != clean.final_answers  # the fault spread: counted as undetectable, not repaired


def test_teacher_failure_falls_back_to_the_template():
    class Down:
        def chat(self, messages, tools=None):
            raise ConnectionError("endpoint down")

    teacher = Teacher(Down())
    assert teacher.paraphrase("Turn 1: how many orders?") == "Turn 1: how many orders?"
    assert teacher.failures == 1


def test_every_response_is_one_parseable_action(sandbox, task, faults):
    fault = _first(faults, lambda f: not f.benign)
    policy = GoldPolicy()
    play(task, sandbox, policy, fault, "gold")
    assert policy.log and all(isinstance(entry.inp, PolicyInput) for entry in policy.log)
    assert all(parse_response(entry.response).ok for entry in policy.log)


def test_the_hierarchical_managers_tier0_commits_the_gold_managers_states(sandbox, task, faults):
    """Tier 0 of ``hier`` keeps the books with the gold manager's code: on a clean run it commits the same states
    (with no model call), and it repairs an execution error as the gold manager does: the hint names the variable
    the failed cell assigns (check_execution shows the code), and the scripted worker takes it."""
    from harness.manager.hier import HierPolicy

    keys = ("issue", "constraints", "relations", "used_variables", "conclusions", "source_step_start",
            "source_step_end")  # fmt: skip
    gold = play(task, sandbox, GoldPolicy(), None, "clean").record
    hier = play(task, sandbox, HierPolicy(None), None, "clean").record
    assert len(gold.states) == len(task.turns) == len(hier.states)
    assert [{k: s[k] for k in keys} for s in hier.states] == [{k: s[k] for k in keys} for s in gold.states]
    fault = next(f for f in faults if f.fault_type == "execution_error")
    gold = play(task, sandbox, GoldPolicy(), fault, "gold").record
    hier = play(task, sandbox, HierPolicy(None), fault, "gold").record
    reaction = ("turn_id", "mode", "worker_reaction")
    assert [tuple(r[k] for k in reaction) for r in hier.repairs] == [
        tuple(r[k] for k in reaction) for r in gold.repairs
    ]
    assert [tuple(r[k] for k in reaction) for r in hier.repairs] == [(fault.turn_id, "light", "localized")]
