"""The model-free ``window-rule`` policy: the recent-steps hint (rendering, window, truncation, outcomes),
determinism, and that it never acts as a manager (ABSTAIN)."""

from __future__ import annotations

import json

import pytest

from harness.manager.actions import make_action
from harness.manager.policy_types import PolicyInput
from harness.manager.windowed import CODE_CHARS, THOUGHT_CHARS, WINDOW_HINT_NOTE, WindowRulePolicy, shorten
from harness.manager.wire import parse_response
from harness.sandbox import ExecutionResult, VariableChange
from harness.worker.step import WorkerStep


def change(name: str, kind: str = "created") -> VariableChange:
    return VariableChange(name, kind, 1, None if kind == "deleted" else "int", None, "1")  # type: ignore[arg-type]


def step(step_id: int, *, thought: str = "t", code: str | None = "x = 1", result: ExecutionResult | None = None):
    if result is None and code is not None:
        result = ExecutionResult(ok=True, variables=[change("x")])
    return WorkerStep(step_id=step_id, turn_id=str(step_id // 2 + 1), thought=thought, code=code, result=result)


def entries(hint: str) -> list[dict]:
    head, rest = hint.split("\n", 1)
    body, note = rest.rsplit("\n</recent_steps>\n", 1)
    assert head == "<recent_steps>" and note == WINDOW_HINT_NOTE
    return json.loads(body)


def test_the_hint_lists_the_last_k_steps_in_order():
    steps = [step(i, thought=f"thought {i}", code=f"v{i} = {i}") for i in range(5)]
    listed = entries(WindowRulePolicy(k=3).window_hint(steps))
    assert [e["step_id"] for e in listed] == [2, 3, 4]
    assert listed[0] == {
        "step_id": 2,
        "turn_id": "2",
        "thought": "thought 2",
        "code": "v2 = 2",
        "outcome": "ok; wrote: x",
    }
    assert [e["step_id"] for e in entries(WindowRulePolicy(k=10).window_hint(steps))] == [0, 1, 2, 3, 4]


def test_no_steps_give_no_hint():
    assert WindowRulePolicy().window_hint([]) == ""


def test_outcomes_name_errors_written_and_deleted_variables():
    failed = ExecutionResult(ok=False, error_type="KeyError", error_message="'region'", variables=[])
    mixed = ExecutionResult(ok=True, variables=[change("a"), change("b", "changed"), change("c", "deleted")])
    steps = [step(0, result=failed), step(1, result=mixed), step(2, code=None, thought="Final Answer: 3")]
    outcomes = [e["outcome"] for e in entries(WindowRulePolicy(k=3).window_hint(steps))]
    assert outcomes == ["error: KeyError: 'region'", "ok; wrote: a, b; deleted: c", "no code"]
    assert entries(WindowRulePolicy(k=1).window_hint(steps))[0]["code"] == ""


def test_long_thoughts_and_code_are_shortened_keeping_head_and_tail():
    code = "\n".join(f"line_{i} = {i}" for i in range(100))
    thought = "because " * 100
    (entry,) = entries(WindowRulePolicy(k=1).window_hint([step(7, thought=thought, code=code)]))
    assert len(entry["code"]) == CODE_CHARS and len(entry["thought"]) == THOUGHT_CHARS
    assert entry["code"].startswith("line_0 = 0\nline_1") and entry["code"].endswith("line_99 = 99")
    assert entry["code"].count("…") == 1
    assert shorten("  short  ", 10) == "short" and shorten("abcdefghij", 4) == "ab…j" and shorten(None, 5) == ""


def test_the_hint_is_deterministic_and_stateless():
    policy = WindowRulePolicy(k=2)
    steps = [step(i) for i in range(4)]
    first = policy.window_hint(steps)
    policy.window_hint([step(9)])
    assert policy.window_hint(steps) == first


def test_it_never_acts_as_a_manager():
    policy = WindowRulePolicy()
    assert (policy.name, policy.active, policy.style) == ("window-rule", True, "windowed")
    response = policy.respond(PolicyInput(observation="{}"))
    assert parse_response(response).action == make_action("ABSTAIN", {})


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_k_must_be_a_positive_integer(k):
    with pytest.raises(ValueError, match=r"k=.* must be an integer >= 1"):
        WindowRulePolicy(k=k)
