"""Actions: the tool list is the expected one, kinds are derived, and the schema validator reports precise errors."""

from __future__ import annotations

import json

import pytest

from harness.manager.actions import (
    ACTION_KIND,
    ACTION_SPECS,
    FINALIZE_MODES,
    RELATION_TYPES,
    Action,
    check_action,
    get_spec,
    make_action,
    tool_schemas,
    validate,
)

CONTROL = {
    "RESUME_WORKER": [],
    "OPEN_STATE": ["issue", "constraints", "relations"],
    "UPDATE_STATE": ["issue", "source_interval", "used_variables", "conclusions"],
    "FINALIZE_RELATIONS": ["mode", "relations", "conflict_evidence"],
    "COMMIT_STATE": [],
    "REPAIR": ["analytical_evidence", "error_hint"],
    "ABANDON_STATE": [],
    "ABSTAIN": [],
}
TOOL = {
    "check_execution": ["step_id"],
    "inspect_python": ["code"],
    "compile_python": ["code"],
    "run_probe": ["code"],
    "run_check": ["spec"],
    "load_state": ["state_id"],
}
OPTIONAL = {"UPDATE_STATE": ["constraints"]}


def test_tools_list_matches_design_section_3() -> None:
    listed = tool_schemas()
    assert len(listed) == 14
    assert [t["function"]["name"] for t in listed] == [*CONTROL, *TOOL]
    for entry in listed:
        assert set(entry) == {"type", "function"} and entry["type"] == "function"
        function = entry["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert function["description"].strip()
        parameters = function["parameters"]
        expected = {**CONTROL, **TOOL}[function["name"]]
        assert parameters["type"] == "object"
        optional = OPTIONAL.get(function["name"], [])
        assert list(parameters["properties"]) == sorted(expected + optional)  # keys sorted: see tool_schemas
        assert parameters["required"] == expected
        assert parameters["additionalProperties"] is False
    json.dumps(listed)  # JSON-serialisable as given to a chat template or an endpoint


def test_kinds_are_derived_from_the_declarations() -> None:
    assert ACTION_KIND == {**dict.fromkeys(CONTROL, "control"), **dict.fromkeys(TOOL, "tool")}
    assert [spec.kind for spec in ACTION_SPECS] == list(ACTION_KIND.values())


def test_enums_come_from_the_module_constants() -> None:
    finalize = get_spec("FINALIZE_RELATIONS").parameters["properties"]
    assert finalize["mode"]["enum"] == list(FINALIZE_MODES)
    assert finalize["relations"]["items"]["properties"]["type"]["enum"] == list(RELATION_TYPES)


VALID = {
    "RESUME_WORKER": {},
    "OPEN_STATE": {
        "issue": "revenue per store",
        "constraints": [
            {"text": "exclude returns"},
            {"text": "2023", "code": "assert True"},
            {
                "text": "top 3",
                "check": {"kind": "top_k", "variable": "top3", "source": "rev", "k": 3, "order": "largest"},
            },
        ],
        "relations": [{"type": "init"}],
    },
    "UPDATE_STATE": {
        "issue": "revenue per store",
        "source_interval": {"start_step": 3, "end_step": 5},
        "used_variables": ["df", "avg"],
        "conclusions": ["avg is 12.5"],
        "constraints": [
            {"text": "rounded to 2 decimals", "check": {"kind": "rounded", "variable": "avg", "decimals": 2}}
        ],
    },
    "FINALIZE_RELATIONS": {
        "mode": "revise",
        "relations": [{"type": "combine", "related_state_id": "S1"}, {"type": "combine", "related_state_id": "S2"}],
        "conflict_evidence": "",
    },
    "COMMIT_STATE": {},
    "REPAIR": {
        "analytical_evidence": "probe shows 14 returns left in df",
        "error_hint": {"error_variable": "df", "faulty_reasoning": "the return filter used the wrong column"},
    },
    "ABANDON_STATE": {},
    "ABSTAIN": {},
    "check_execution": {"step_id": 0},
    "inspect_python": {"code": "x = 1"},
    "compile_python": {"code": "x = ("},
    "run_probe": {"code": "print(len(df))"},
    "run_check": {"spec": {"kind": "share", "variable": "shares"}},
    "load_state": {"state_id": "S1"},
}


@pytest.mark.parametrize("name", list(VALID))
def test_every_action_accepts_a_valid_call(name: str) -> None:
    action, error = check_action(name, VALID[name])
    assert error is None
    assert action == Action(name, VALID[name], ACTION_KIND[name])


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (7, {}, "action name must be a string, got integer 7"),
        ("open_state", {}, "unknown action 'open_state'; valid actions: RESUME_WORKER, OPEN_STATE, UPDATE_STATE"),
        ("ABSTAIN", [], "ABSTAIN: arguments: expected object, got array []"),
        ("ABSTAIN", {"why": "x"}, "ABSTAIN: arguments: unexpected argument(s) 'why'; allowed: none"),
        ("load_state", {}, "load_state: arguments: missing required argument 'state_id'"),
        ("load_state", {"state_id": ""}, "load_state: arguments.state_id: expected a string of at least 1"),
        ("check_execution", {"step_id": True}, "check_execution: arguments.step_id: expected integer, got boolean"),
        ("check_execution", {"step_id": 1.0}, "check_execution: arguments.step_id: expected integer, got number"),
        ("check_execution", {"step_id": -1}, "check_execution: arguments.step_id: expected a value >= 0, got -1"),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "relations": []},
            "OPEN_STATE: arguments.relations: expected at least 1 item(s), got 0",
        ),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "relations": [{"type": "init"}, {"type": "merge", "related_state_id": "S1"}]},
            "OPEN_STATE: arguments.relations[1].type: expected one of ['init', 'progress', 'branch', 'invalidate'",
        ),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "constraints": [{"text": "t", "verify": "x"}]},
            "OPEN_STATE: arguments.constraints[0]: unexpected argument(s) 'verify'; allowed: text, code, check",
        ),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "constraints": [{"text": "t", "check": {"kind": "share"}}]},
            "OPEN_STATE: arguments.constraints[0].check: share.variable is missing",
        ),
        (
            "UPDATE_STATE",
            {**VALID["UPDATE_STATE"], "constraints": [{"text": "t", "check": {"kind": "top_n", "variable": "x"}}]},
            "UPDATE_STATE: arguments.constraints[0].check: check kind 'top_n' is unknown",
        ),
        (
            "run_check",
            {"spec": {"kind": "rounded", "variable": "share", "decimals": -1}},
            "run_check: arguments.spec: rounded.decimals=-1 is out of range",
        ),
        (
            "UPDATE_STATE",
            {**VALID["UPDATE_STATE"], "source_interval": {"start_step": 1}},
            "UPDATE_STATE: arguments.source_interval: missing required argument 'end_step'",
        ),
        (
            "UPDATE_STATE",
            {**VALID["UPDATE_STATE"], "used_variables": ["df", 3]},
            "UPDATE_STATE: arguments.used_variables[1]: expected string, got integer 3",
        ),
        (
            "FINALIZE_RELATIONS",
            {**VALID["FINALIZE_RELATIONS"], "mode": "keep"},
            "FINALIZE_RELATIONS: arguments.mode: expected one of ['confirm', 'revise'], got 'keep'",
        ),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "relations": [{"type": "init", "related_state_id": "S1"}]},
            "OPEN_STATE: arguments.relations[0]: an init relation has no upstream state; drop related_state_id",
        ),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "relations": [{"type": "progress"}]},
            "OPEN_STATE: arguments.relations[0]: a progress relation needs related_state_id",
        ),
        (
            "OPEN_STATE",
            {**VALID["OPEN_STATE"], "relations": [{"type": "init"}, {"type": "branch", "related_state_id": "S0"}]},
            "OPEN_STATE: arguments.relations: init means no suitable upstream state, so it cannot be given with",
        ),
        (
            "FINALIZE_RELATIONS",
            {**VALID["FINALIZE_RELATIONS"], "relations": [{"type": "combine", "related_state_id": "S1"}]},
            "FINALIZE_RELATIONS: arguments.relations: combine depends on two or more committed states",
        ),
        (
            "FINALIZE_RELATIONS",
            {**VALID["FINALIZE_RELATIONS"], "mode": "confirm"},
            "FINALIZE_RELATIONS: arguments.relations: mode=confirm keeps the provisional relations, so give relations "
            "as [] (got 2)",
        ),
        (
            "FINALIZE_RELATIONS",
            {**VALID["FINALIZE_RELATIONS"], "relations": []},
            "FINALIZE_RELATIONS: arguments.relations: mode=revise replaces the relations, so give at least one",
        ),
        (
            "UPDATE_STATE",
            {**VALID["UPDATE_STATE"], "source_interval": {"start_step": 6, "end_step": 5}},
            "UPDATE_STATE: arguments.source_interval: start_step=6 is after end_step=5",
        ),
        (
            "REPAIR",
            {**VALID["REPAIR"], "error_hint": "df is wrong"},
            "REPAIR: arguments.error_hint: expected object, got string 'df is wrong'",
        ),
    ],
)
def test_invalid_calls_name_the_argument_path(name: object, arguments: object, message: str) -> None:
    action, error = check_action(name, arguments)
    assert action is None
    assert error is not None and error.startswith(message), error


def test_confirm_with_no_relations_is_valid() -> None:
    action, error = check_action("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})
    assert error is None and action is not None and action.arguments["mode"] == "confirm"


def test_make_action_raises_value_error_with_the_parser_message() -> None:
    assert make_action("ABSTAIN") == Action("ABSTAIN", {}, "control")
    with pytest.raises(ValueError, match=r"invalid action: run_probe: arguments: missing required argument 'code'"):
        make_action("run_probe", {})


def test_get_spec_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="unknown action 'PAUSE'; valid actions: .*ABSTAIN"):
        get_spec("PAUSE")


@pytest.mark.parametrize(
    ("value", "schema", "expected"),
    [
        (None, {"type": "null"}, None),
        (1.5, {"type": "number"}, None),
        (True, {"type": "number"}, "v: expected number, got boolean True"),
        (False, {"type": "boolean"}, None),
        ({"a": 1}, {"type": "object"}, None),  # additionalProperties defaults to allowed
        ([1, "x"], {"type": "array", "items": {"type": "integer"}}, "v[1]: expected integer, got string 'x'"),
        ({1: "x"}, {"type": "object", "properties": {}, "additionalProperties": False}, "v: unexpected argument(s) 1"),
    ],
)
def test_validator_subset(value: object, schema: dict, expected: str | None) -> None:
    result = validate(value, schema, "v")
    if expected is None:
        assert result is None
    else:
        assert result is not None and result.startswith(expected), result
