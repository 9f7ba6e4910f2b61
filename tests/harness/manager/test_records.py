"""Records: lossless JSON round trips, invariants, and from_dict errors that name the field."""

from __future__ import annotations

import json
import re

import pytest

from harness.manager.records import (
    RELATION_TYPES,
    AnalyticalState,
    Constraint,
    ManagerObservation,
    Relation,
    StateSummary,
    VariableRef,
)


def _state(state_id: str = "S2") -> AnalyticalState:
    return AnalyticalState(
        id=state_id,
        issue="Average 2023 revenue per store, excluding returns",
        constraints=(Constraint("exclude returns"), Constraint("year is 2023", code="assert (df.year == 2023).all()")),
        used_variables=(VariableRef("df", 3, "DataFrame (120, 4)"), VariableRef("avg_rev", 1, "1523.5")),
        conclusions=("average revenue per store is 1523.5", "résumé: ünïcode kept"),
        relations=(Relation("progress", "S1"), Relation("invalidate", "S0")),
        source_step_start=4,
        source_step_end=7,
        checkpoint_id="ckpt-9",
    )


def _observation() -> ManagerObservation:
    return ManagerObservation(
        event_type="segment_pause",
        available_state_id="S3",
        untraced_steps=4,
        pending_start_step=8,
        pending_end_step=11,
        current_draft=_state("S3"),
        repair_attempts=1,
        terminal_pending_review=False,
        last_action_result="probe printed: 1523.5",
        committed_state_index=(
            StateSummary.of(_state("S1")),
            StateSummary("S0", "load data", 0, 2, (Relation("init"),)),
        ),
    )


RECORDS = [
    Constraint("text only"),
    Constraint("with code", code="assert x > 0"),
    Constraint.of("with a check", check={"kind": "rounded", "variable": "x", "decimals": 2}),
    VariableRef("x", 0, ""),
    *[Relation(kind, None if kind == "init" else "S1") for kind in RELATION_TYPES],
    AnalyticalState(id="S0", issue="empty draft"),
    _state(),
    StateSummary.of(_state()),
    _observation(),
    ManagerObservation("turn_start", None, 0, None, None, None, 0, True, None),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_round_trip_through_json_is_lossless(record: object) -> None:
    data = record.to_dict()  # type: ignore[attr-defined]
    restored = type(record).from_dict(json.loads(json.dumps(data)))  # type: ignore[attr-defined]
    assert restored == record
    assert restored.to_dict() == data


def test_to_dict_uses_lists_and_nested_dicts() -> None:
    data = _state().to_dict()
    assert data["relations"] == [
        {"type": "progress", "related_state_id": "S1"},
        {"type": "invalidate", "related_state_id": "S0"},
    ]
    assert data["constraints"][0] == {"text": "exclude returns", "code": None}
    assert data["used_variables"][0] == {"name": "df", "version": 3, "value": "DataFrame (120, 4)"}


def test_constraint_code_may_be_omitted_in_input() -> None:
    assert Constraint.from_dict({"text": "t"}) == Constraint("t", None)


def test_a_constraint_check_is_stored_as_the_parsed_specs_dict_and_a_malformed_one_is_refused() -> None:
    stored = Constraint.from_dict({"text": "t", "check": {"kind": "top_k", "variable": "a", "source": "b", "k": 2,
                                                          "order": "largest"}})  # fmt: skip
    assert stored.check == {
        "kind": "top_k",
        "variable": "a",
        "source": "b",
        "k": 2,
        "order": "largest",
        "column": None,
    }
    assert stored.to_dict() == {"text": "t", "code": None, "check": stored.check}
    assert Constraint("t").to_dict() == {"text": "t", "code": None}  # no check: the record reads as before
    with pytest.raises(ValueError, match=r"^Constraint.check: check kind 'top' is unknown; use one of: aggregate"):
        Constraint.from_dict({"text": "t", "check": {"kind": "top"}})


def test_render_is_deterministic_json_in_field_order() -> None:
    observation = _observation()
    text = observation.render()
    assert text == _observation().render()
    assert json.loads(text) == observation.to_dict()
    assert list(json.loads(text)) == [
        "event_type",
        "available_state_id",
        "untraced_steps",
        "pending_start_step",
        "pending_end_step",
        "current_draft",
        "repair_attempts",
        "terminal_pending_review",
        "last_action_result",
        "committed_state_index",
    ]
    assert "ünïcode" in text  # not \u-escaped
    assert len(text.splitlines()) == 12  # braces + one line per field
    assert text.splitlines()[1] == '"event_type": "segment_pause",'
    # byte for byte what dumping each field gives (the index comes from the summaries' cached text)
    expected = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in observation.to_dict().items()]
    assert text == "{\n" + ",\n".join(expected) + "\n}"
    assert len(observation.committed_state_index) == 2 and text == observation.render()  # cached text reused


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (lambda: Relation("depends", "S1"), "Relation.type='depends' is not a relation type"),
        (lambda: Relation("init", "S1"), "init means no upstream state"),
        (lambda: Relation("progress"), "needs related_state_id"),
        (lambda: AnalyticalState("S1", "i", source_step_start=3), "must both be set or both be None"),
        (lambda: AnalyticalState("S1", "i", source_step_start=5, source_step_end=4), "needs 0 <= start <= end"),
        (
            lambda: ManagerObservation("wake_up", None, 0, None, None, None, 0, False, None),
            "event_type='wake_up' is unknown",
        ),
        (lambda: ManagerObservation("turn_end", None, -1, None, None, None, 0, False, None), "untraced_steps=-1"),
        (lambda: ManagerObservation("turn_end", None, 0, 4, 2, None, 0, False, None), "pending interval [4, 2]"),
    ],
)
def test_invariants_raise_value_error_with_the_value(factory, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        factory()


def _mutated(path: list[str | int], value: object, *, delete: bool = False) -> dict:
    data = _observation().to_dict()
    target = data
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "ManagerObservation: expected a JSON object, got list"),
        (_mutated(["untraced_steps"], True), "ManagerObservation.untraced_steps: expected int, got bool"),
        (_mutated(["untraced_steps"], None, delete=True), "ManagerObservation: missing field(s) untraced_steps"),
        (_mutated(["surprise"], 1), "ManagerObservation: unknown field(s) 'surprise'"),
        (_mutated(["terminal_pending_review"], "no"), "ManagerObservation.terminal_pending_review: expected bool"),
        (
            _mutated(["current_draft", "used_variables", 1, "version"], "1"),
            "ManagerObservation.current_draft.used_variables[1].version: expected int, got str",
        ),
        (
            _mutated(["current_draft", "relations", 0, "type"], "next"),
            "ManagerObservation.current_draft.relations[0]: Relation.type='next' is not a relation type",
        ),
        (
            _mutated(["current_draft", "conclusions", 0], 3),
            "ManagerObservation.current_draft.conclusions[0]: expected str, got int",
        ),
        (
            _mutated(["committed_state_index"], {"S1": {}}),
            "ManagerObservation.committed_state_index: expected a list, got dict",
        ),
        (
            _mutated(["current_draft", "source_step_end"], None),
            "ManagerObservation.current_draft: AnalyticalState 'S3'",
        ),
        (
            _mutated(["committed_state_index", 0, "issue"], None),
            "ManagerObservation.committed_state_index[0].issue: expected str, got NoneType",
        ),
    ],
)
def test_from_dict_errors_name_the_field(data: object, message: str) -> None:
    with pytest.raises(ValueError) as error:
        ManagerObservation.from_dict(data)
    assert str(error.value).startswith(message), str(error.value)


def test_relation_from_dict_defaults_related_state_to_none_for_init() -> None:
    assert Relation.from_dict({"type": "init"}) == Relation("init", None)
    with pytest.raises(ValueError, match="Relation.related_state_id: expected str or null, got int"):
        Relation.from_dict({"type": "progress", "related_state_id": 1})


def test_action_arguments_convert_to_records() -> None:
    from harness.manager.actions import make_action

    action = make_action(
        "OPEN_STATE",
        {
            "issue": "i",
            "constraints": [{"text": "t", "code": "assert x"}, {"text": "u"}],
            "relations": [{"type": "branch", "related_state_id": "S1"}],
        },
    )
    assert [Constraint.from_dict(c) for c in action.arguments["constraints"]] == [
        Constraint("t", "assert x"),
        Constraint("u"),
    ]
    assert [Relation.from_dict(r) for r in action.arguments["relations"]] == [Relation("branch", "S1")]
