"""Manager policies on hand-made inputs (no sandbox): name lookup, and the rule policy's decisions — open with the
relations the question's words name (the declared graph only with ``oracle_relations``) and constraint texts (code
only with ``executable_constraints``), update with the reported variables, repair only on concrete evidence, else
finalize."""

import json

import pytest

from harness.manager.lifecycle import Lifecycle, Phase
from harness.manager.policy_registry import POLICIES, get_policy
from harness.manager.policy_types import ManagerView, PolicyInput
from harness.manager.records import AnalyticalState, Constraint, ManagerObservation, Relation, VariableRef
from harness.manager.wire import parse_response
from harness.tasks import Turn, TurnConstraint

CODE = "assert (df['x'] > 0).all()"
TURN = Turn(
    turn_id="3",
    question="q3",
    depends_on=("1", "2"),
    relation="combine",
    constraints=(TurnConstraint("x is positive", CODE), TurnConstraint("in words only")),
)


def legal(phase: Phase) -> tuple[str, ...]:
    lifecycle = Lifecycle(phase=phase)
    lifecycle.begin_activation()
    return tuple(lifecycle.legal_actions())


def obs(event="turn_end", draft=None, pending=(4, 4)) -> str:
    return ManagerObservation(
        event, "S3", 1 if pending else 0, *(pending or (None, None)), draft, 0, False, None
    ).render()


DRAFT = AnalyticalState(
    "S3",
    "q3",
    constraints=(Constraint("x is positive", CODE), Constraint("in words only")),
    used_variables=(VariableRef("df", 2, "DataFrame"), VariableRef("total", 1, "3")),
    relations=(Relation("combine", "S1"), Relation("combine", "S2")),
    source_step_start=4,
    source_step_end=4,
)


def respond(inp: PolicyInput):
    parsed = parse_response(get_policy("rule").respond(inp))
    assert parsed.ok, parsed.error
    return parsed.action


def test_get_policy_lists_valid_names():
    names = {
        "none",
        "rule",
        "window-rule",
        "windowed",
        "windowed-hf",
        "llm",
        "llm-hf",
        "freeform",
        "freeform-hf",
        "hier",
        "read",
    }
    assert names == set(POLICIES)
    assert get_policy("none").active is False and get_policy("rule").active is True
    assert get_policy("read").active is True and get_policy("read").name == "read"
    with pytest.raises(
        ValueError, match=r"--manager oracle: unknown variant\(s\) \['oracle'\]; valid names: none, rule"
    ):
        get_policy("oracle")


ORACLES = ManagerView(oracle_relations=True, executable_constraints=True)
DEFAULT_VIEW = ManagerView()


def opening(turn, states, view=DEFAULT_VIEW):
    return respond(PolicyInput(obs("turn_start", pending=None), (), legal(Phase.IDLE), turn, states, view))


def test_open_with_oracles_uses_the_declared_relations_and_the_constraint_code():
    action = opening(TURN, {"1": "S1", "2": "S2"}, ORACLES)
    assert action.name == "OPEN_STATE"
    assert action.arguments["relations"] == [
        {"type": "combine", "related_state_id": "S1"},
        {"type": "combine", "related_state_id": "S2"},
    ]
    assert action.arguments["constraints"] == [{"text": "x is positive", "code": CODE}, {"text": "in words only"}]


def test_open_with_oracles_falls_back_when_dependencies_were_not_committed():
    only_one = opening(TURN, {"1": "S1"}, ORACLES)
    assert only_one.arguments["relations"] == [{"type": "progress", "related_state_id": "S1"}]
    assert opening(TURN, {}, ORACLES).arguments["relations"] == [{"type": "init"}]


def test_open_by_default_infers_relations_from_the_question_and_shows_constraint_texts():
    states = {"1": "S1", "2": "S2"}
    silent = opening(TURN, states)  # "q3" names no earlier turn: init, whatever the graph says
    assert silent.arguments["relations"] == [{"type": "init"}]
    assert silent.arguments["constraints"] == [{"text": "x is positive"}, {"text": "in words only"}]
    worded = Turn(turn_id="3", question="Go back to the result of turn 1 (not the turns after it). How many?")
    assert opening(worded, states).arguments["relations"] == [{"type": "branch", "related_state_id": "S1"}]
    code_only = ManagerView(executable_constraints=True)
    shown = opening(TURN, states, code_only)
    assert shown.arguments["relations"] == [{"type": "init"}]
    assert shown.arguments["constraints"] == [{"text": "x is positive", "code": CODE}, {"text": "in words only"}]


def test_update_checks_the_pending_steps_then_names_the_reported_variables():
    draft = AnalyticalState("S3", "q3")
    first = respond(PolicyInput(obs(draft=draft, pending=(4, 5)), (), legal(Phase.OPEN), TURN))
    assert (first.name, first.arguments) == ("check_execution", {"step_id": 4})
    step4 = json.dumps({"ok": True, "variables": [{"name": "df", "type": "DataFrame"}], "results": [{"a": 1}]})
    step5 = json.dumps({"ok": True, "variables": [{"name": "gone", "type": None}, {"name": "t", "type": "int"}]})
    update = respond(PolicyInput(obs(draft=draft, pending=(4, 5)), (step4, step5), legal(Phase.OPEN), TURN))
    assert update.name == "UPDATE_STATE"
    assert update.arguments["used_variables"] == ["df", "t"]  # deleted names are not used variables
    assert update.arguments["source_interval"] == {"start_step": 4, "end_step": 5}
    assert update.arguments["conclusions"] == ['step 4 reported {"a": 1}']


def _checks(probe: dict, inputs=("df",), executed=None) -> tuple[str, ...]:
    return (
        json.dumps(executed or {"ok": True, "step_id": 4, "verdict": "verified"}),
        json.dumps({"ok": True, "valid": True}),
        json.dumps({"ok": True, "inputs": list(inputs)}),
        json.dumps({"ok": True, **probe}),
    )


def test_checks_follow_a_fixed_plan():
    names = []
    results: list[str] = []
    full = _checks({"passed": True})
    for i in range(4):
        action = respond(PolicyInput(obs(draft=DRAFT), tuple(results), legal(Phase.UPDATED), TURN))
        names.append((action.name, action.arguments))
        results.append(full[i])
    assert names == [
        ("check_execution", {"step_id": 4}),
        ("compile_python", {"code": CODE}),
        ("inspect_python", {"code": CODE}),
        ("run_probe", {"code": CODE}),
    ]


def test_passing_checks_finalize_without_repair():
    action = respond(PolicyInput(obs(draft=DRAFT), _checks({"passed": True}), legal(Phase.UPDATED), TURN))
    assert (action.name, action.arguments["mode"]) == ("FINALIZE_RELATIONS", "confirm")


def test_a_failed_constraint_repairs_naming_the_variable_and_the_evidence():
    probe = {"passed": False, "reason": "raised AssertionError", "values": {"df['x']": "[-1, 2]"}}
    action = respond(PolicyInput(obs(draft=DRAFT), _checks(probe), legal(Phase.UPDATED), TURN))
    assert action.name == "REPAIR"
    assert action.arguments["error_hint"]["error_variable"] == "df"
    assert "x is positive" in action.arguments["analytical_evidence"]
    assert "[-1, 2]" in action.arguments["analytical_evidence"]


def test_a_failed_execution_repairs_and_an_unrunnable_constraint_is_no_evidence():
    failed = {"ok": True, "step_id": 4, "verdict": "failed", "error_type": "KeyError", "error_message": "'y'"}
    action = respond(
        PolicyInput(obs(draft=DRAFT), _checks({"passed": True}, executed=failed), legal(Phase.UPDATED), TURN)
    )
    assert action.name == "REPAIR" and "KeyError" in action.arguments["analytical_evidence"]
    not_compiled = list(_checks({"passed": False}))
    not_compiled[1] = json.dumps({"ok": True, "valid": False})
    action = respond(PolicyInput(obs(draft=DRAFT), tuple(not_compiled), legal(Phase.UPDATED), TURN))
    assert action.name == "FINALIZE_RELATIONS"


def test_evidence_with_the_repair_budget_spent_abandons():
    lifecycle = Lifecycle(phase=Phase.UPDATED, repair_attempts=3)
    lifecycle.begin_activation()
    inp = PolicyInput(obs(draft=DRAFT), _checks({"passed": False}), tuple(lifecycle.legal_actions()), TURN)
    assert respond(inp).name == "ABANDON_STATE"


def test_commit_when_finalized_and_resume_at_turn_start():
    assert respond(PolicyInput(obs(draft=DRAFT), (), legal(Phase.FINALIZED), TURN)).name == "COMMIT_STATE"
    draft = AnalyticalState("S3", "q3")
    assert respond(PolicyInput(obs("turn_start", draft, None), (), legal(Phase.OPEN), TURN)).name == "RESUME_WORKER"


def test_written_names_reads_assignments_even_from_code_that_does_not_parse():
    from harness.manager.policies import written_names

    assert written_names("a = 1\nb, c = 2, 3\nd += 1\nx == 2\ne: int = 4") == ["a", "b", "c", "d", "e"]
    broken = "import pandas as pd\nsales = pd.read_csv('x'\nsales['revenue'] = 1\nresult = {'n': 1}\nresult == 2"
    assert written_names(broken) == ["sales", "result"]
    assert written_names("print(1)") == []


def test_one_function_drafts_update_state_for_the_rule_policy_and_the_bookkeeping():
    from harness.manager.bookkeeping import update_state_call

    draft, obs = {"issue": "Turn 2: totals"}, {"pending_start_step": 3, "pending_end_step": 5}
    checks = [
        (3, {"ok": True, "variables": [{"name": "df", "type": "DataFrame"}, {"name": "gone", "type": None}]}),
        (4, {"ok": False, "variables": [{"name": "never", "type": "int"}]}),  # a wrong call: no evidence of anything
        (5, {"ok": True, "variables": [{"name": "total", "type": "int"}, {"name": "df", "type": "DataFrame"}]}),
    ]
    said = parse_response(update_state_call(draft, obs, checks, lambda step, r: f"step {step}", no_result="none"))
    assert said.action.name == "UPDATE_STATE" and said.action.arguments == {
        "issue": "Turn 2: totals",
        "source_interval": {"start_step": 3, "end_step": 5},
        "used_variables": ["df", "total"],
        "conclusions": ["step 3", "step 5"],
    }
    empty = parse_response(update_state_call(draft, {"pending_start_step": None, "pending_end_step": None}, [],
                                             lambda step, r: None, no_result="nothing reported"))  # fmt: skip
    assert empty.action.arguments["conclusions"] == ["nothing reported"]
    assert empty.action.arguments["source_interval"] == {"start_step": 0, "end_step": 0}
