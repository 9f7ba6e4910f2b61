"""Wire format: every error class of the parser, both input forms, and a 10,000-example never-raises property."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.manager.actions import ACTION_NAMES, ACTION_SPECS, CHECK_SPEC_SCHEMA, Action, make_action
from harness.manager.wire import ParseResult, action_from_dict, parse_response, render_action

PROBE = make_action("run_probe", {"code": "print(df[df.x < 3].shape)  # </tool_call> inside a string"})
COMMIT = make_action("COMMIT_STATE")


def call(name: str, arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def error_of(response: object, **kwargs: Any) -> str:
    result = parse_response(response, **kwargs)
    assert result.action is None and result.error is not None, result
    return result.error


# ---------------------------------------------------------------- text form


def test_render_is_the_qwen3_layout_and_parses_back() -> None:
    text = render_action(PROBE)
    assert text.startswith('<tool_call>\n{"name": "run_probe", "arguments": {"code": "print(df[df.x < 3]')
    assert text.endswith("}\n</tool_call>")
    assert parse_response(text) == ParseResult(action=PROBE)


@pytest.mark.parametrize(
    ("prefix", "thought"),
    [
        ("<think>\nthe probe shows 14 rows\n</think>\n\n", "the probe shows 14 rows"),
        ("  <think></think>", None),
        ("reasoning started by the chat template\n</think>\n", "reasoning started by the chat template"),
    ],
)
def test_thought_is_kept(prefix: str, thought: str | None) -> None:
    result = parse_response(prefix + render_action(COMMIT))
    assert result.action == COMMIT
    assert result.thought == thought


@pytest.mark.parametrize(
    ("response", "message"),
    [
        ("", "no action: the response must hold exactly one <tool_call>"),
        ("<think>only thinking</think>", "no action"),
        ("<think>never closed", "unterminated <think>"),
        (render_action(COMMIT) * 2, "2 actions in one response (COMMIT_STATE, COMMIT_STATE); exactly one is allowed"),
        (
            render_action(PROBE) + render_action(COMMIT),
            "a tool action and a control action together (run_probe, COMMIT_STATE)",
        ),
        (call("PAUSE", {}), "unknown action 'PAUSE'; valid actions: RESUME_WORKER, OPEN_STATE"),
        ('<tool_call>{"name": "ABSTAIN" "arguments": {}}</tool_call>', "bad JSON in tool call #1: Expecting ',' "),
        ("<tool_call>\n{\"name\": 'ABSTAIN'}</tool_call>", "bad JSON in tool call #1: Expecting value at character 9"),
        ('<tool_call>{"name": "ABSTAIN", "arguments": {}}', "expected </tool_call> right after the JSON object"),
        ('<tool_call>{"name": "ABSTAIN", "arguments": {}} x</tool_call>', "found 'x</tool_call>'"),
        (
            '<tool_call>["ABSTAIN"]</tool_call>',
            "the tool call must be a JSON object with name and arguments, got list",
        ),
        (
            '<tool_call>{"name": "ABSTAIN"}</tool_call>',
            "exactly the keys name and arguments: missing key(s) arguments",
        ),
        (
            '<tool_call>{"name": "ABSTAIN", "arguments": {}, "id": 1}</tool_call>',
            "exactly the keys name and arguments: unexpected key(s) 'id'",
        ),
        (call("load_state", {}), "load_state: arguments: missing required argument 'state_id'"),
        (call("load_state", {"state_id": "S1", "deep": True}), "load_state: arguments: unexpected argument(s) 'deep'"),
        (
            call("check_execution", {"step_id": "3"}),
            "check_execution: arguments.step_id: expected integer, got string",
        ),
        (call("COMMIT_STATE", "{}"), "COMMIT_STATE: arguments: expected object, got string"),
        ("I will commit now.\n" + render_action(COMMIT), "text outside <tool_call> tags is not allowed"),
        (
            render_action(COMMIT) + "\nDone.",
            "text outside <tool_call> tags is not allowed (only a leading <think> block): 'Done.'",
        ),
        (render_action(COMMIT) + "<think>again</think>", "a <think> block is only allowed once"),
    ],
)
def test_text_errors(response: str, message: str) -> None:
    error = error_of(response)
    assert message in error, error


def test_non_strict_mode_ignores_prose_but_not_other_errors() -> None:
    assert parse_response("Sure, committing.\n" + render_action(COMMIT), strict=False).action == COMMIT
    assert error_of("Sure.", strict=False).startswith("no action")


# ---------------------------------------------------------------- structured form


def structured(name: object, arguments: object, **message: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_0", "type": "function", "function": {"name": name, "arguments": arguments}}],
        **message,
    }


def test_structured_arguments_as_string_or_dict() -> None:
    arguments = PROBE.arguments
    assert parse_response(structured("run_probe", json.dumps(arguments))).action == PROBE
    assert parse_response(structured("run_probe", arguments)).action == PROBE
    assert parse_response(structured("COMMIT_STATE", "")).action == COMMIT  # vLLM may send "" for no arguments
    assert parse_response(structured("COMMIT_STATE", "{}")["tool_calls"]).action == COMMIT  # bare list


def test_structured_thought_from_reasoning_content_or_content() -> None:
    result = parse_response(structured("COMMIT_STATE", "{}", reasoning_content="all checks passed"))
    assert (result.action, result.thought) == (COMMIT, "all checks passed")
    result = parse_response(structured("COMMIT_STATE", "{}", content="<think>ok</think>\n"))
    assert (result.action, result.thought) == (COMMIT, "ok")


def test_message_without_tool_calls_falls_back_to_content() -> None:
    message = {"role": "assistant", "content": "<think>x</think>" + render_action(COMMIT), "tool_calls": []}
    assert parse_response(message) == ParseResult(action=COMMIT, thought="x")


def test_object_with_model_dump_is_accepted() -> None:
    class Message:
        def model_dump(self) -> dict[str, Any]:
            return structured("COMMIT_STATE", "{}")

    assert parse_response(Message()).action == COMMIT


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (None, "expected a response string or an OpenAI message dict, got NoneType"),
        (b"<tool_call>", "expected a response string or an OpenAI message dict, got bytes"),
        ({"role": "assistant", "content": None}, "no action"),
        ({"content": 3}, "message content must be a string or null, got int"),
        ({"tool_calls": "x"}, "message tool_calls must be a list, got str"),
        ([5], "tool_calls[0]: expected an object, got int"),
        ([{"type": "code", "function": {}}], "tool_calls[0].type: expected 'function', got 'code'"),
        ([{"type": "function"}], "tool_calls[0].function: expected an object with name and arguments, got NoneType"),
        (structured("run_probe", '{"code": '), "bad JSON in tool_calls[0].function.arguments: Expecting value at"),
        (structured("run_probe", "[1]"), "run_probe: arguments: expected object, got array"),
        (structured(None, "{}"), "action name must be a string, got null"),
        (structured("COMMIT_STATE", "{}", content="Committing."), "text outside the tool call is not allowed"),
        (
            structured("COMMIT_STATE", "{}", content=render_action(COMMIT)),
            "several actions: the message has structured tool_calls and a <tool_call> in its content",
        ),
        (
            {"tool_calls": structured("run_probe", "{}")["tool_calls"] + structured("ABSTAIN", "{}")["tool_calls"]},
            "a tool action and a control action together (run_probe, ABSTAIN)",
        ),
    ],
)
def test_structured_errors(response: object, message: str) -> None:
    error = error_of(response)
    assert error.startswith(message), error


def test_action_from_dict_validates_like_the_parser() -> None:
    assert action_from_dict({"name": "COMMIT_STATE", "arguments": {}}) == ParseResult(action=COMMIT)
    assert action_from_dict({"name": "COMMIT_STATE"}).error.endswith("missing key(s) arguments")  # type: ignore[union-attr]


# ---------------------------------------------------------------- property: never raises, renderings parse back


def from_schema(
    schema: dict[str, Any], overrides: dict[str, st.SearchStrategy[Any]] | None = None
) -> st.SearchStrategy[Any]:
    """Values that conform to one of our argument schemas (the subset actions.py uses); ``overrides`` replaces the
    strategy of top-level properties by name (for the cross-argument rules a schema cannot express)."""
    overrides = overrides or {}
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if schema.get("oneOf") is CHECK_SPEC_SCHEMA["oneOf"]:  # a check spec: parse_spec's rules, not only the schema's
        return SPECS_ST
    if "anyOf" in schema:
        return st.one_of(*(from_schema(sub) for sub in schema["anyOf"]))
    kind = schema["type"]
    if kind == "null":
        return st.none()
    if kind == "object":
        properties = {
            key: overrides[key] if key in overrides else from_schema(sub)
            for key, sub in schema.get("properties", {}).items()
        }
        required = set(schema.get("required", []))
        return st.fixed_dictionaries(
            {key: sub for key, sub in properties.items() if key in required},
            optional={key: sub for key, sub in properties.items() if key not in required},
        )
    if kind == "array":
        return st.lists(from_schema(schema["items"]), min_size=schema.get("minItems", 0), max_size=3)
    if kind == "string":
        return st.text(min_size=schema.get("minLength", 0), max_size=20)
    if kind == "integer":
        return st.integers(min_value=schema.get("minimum"), max_value=10**6)
    raise AssertionError(f"schema type {kind} not covered by the test strategy")


SPECS_ST = st.sampled_from(
    [
        {"kind": "top_k", "variable": "top3", "source": "rev", "k": 3, "order": "largest"},
        {"kind": "rounded", "variable": "avg", "decimals": 2},
        {"kind": "filter", "variable": "big", "source": "df", "column": "amount", "op": ">=", "value": 1.5},
    ]
)


def _related(kinds: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({"type": st.sampled_from(kinds), "related_state_id": st.text(min_size=1, max_size=5)})


RELATIONS_ST = st.one_of(
    st.just([{"type": "init"}]),
    st.lists(_related(["progress", "branch", "invalidate"]), min_size=1, max_size=3),
    st.lists(_related(["combine"]), min_size=2, max_size=3),
)
OVERRIDES = {
    "relations": RELATIONS_ST,
    "source_interval": st.tuples(st.integers(0, 500), st.integers(0, 500)).map(
        lambda pair: {"start_step": min(pair), "end_step": max(pair)}
    ),
}


def _valid_arguments(spec: Any) -> st.SearchStrategy[dict[str, Any]]:
    arguments = from_schema(spec.parameters, OVERRIDES)
    if spec.name == "FINALIZE_RELATIONS":  # confirm keeps the provisional relations: it gives none
        arguments = arguments.map(lambda a: {**a, "relations": [] if a["mode"] == "confirm" else a["relations"]})
    return arguments


ACTIONS_ST = st.sampled_from(ACTION_SPECS).flatmap(
    lambda spec: _valid_arguments(spec).map(lambda args: Action(spec.name, args, spec.kind))
)
JSON_ST = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
NAMES_ST = st.sampled_from(ACTION_NAMES) | st.text(max_size=12)


@st.composite
def mutated_rendering(draw: st.DrawFn) -> str:
    text = render_action(draw(ACTIONS_ST))
    i = draw(st.integers(0, len(text)))
    j = draw(st.integers(i, len(text)))
    mutation = draw(st.sampled_from(["delete", "insert", "truncate", "duplicate", "wrap"]))
    if mutation == "delete":
        return text[:i] + text[j:]
    if mutation == "insert":
        return (
            text[:i] + draw(st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "}", '"', ",", "x"])) + text[i:]
        )
    if mutation == "truncate":
        return text[:i]
    if mutation == "duplicate":
        return text + text
    return draw(st.text(max_size=10)) + text + draw(st.text(max_size=10))


@st.composite
def wrong_arguments(draw: st.DrawFn) -> str:
    """A known or random name with random JSON arguments (mostly wrong types, missing or extra keys)."""
    return call(draw(NAMES_ST), draw(JSON_ST))


@st.composite
def random_structured(draw: st.DrawFn) -> object:
    function = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "name": NAMES_ST | JSON_ST,
                "arguments": JSON_ST | JSON_ST.map(json.dumps) | st.text(max_size=15),
            },
        )
    )
    tool_call = draw(st.fixed_dictionaries({"function": st.just(function) | JSON_ST}, optional={"type": JSON_ST}))
    calls = draw(st.lists(st.just(tool_call) | JSON_ST, max_size=2))
    message = draw(
        st.fixed_dictionaries(
            {},
            optional={"tool_calls": st.just(calls) | JSON_ST, "content": st.none() | st.text(max_size=20) | JSON_ST},
        )
    )
    return draw(st.sampled_from([message, calls, tool_call]))


JUNK_ST = st.one_of(
    st.text(max_size=60),
    st.text(alphabet='<>/{}[]":,toolcaintkh_ ', max_size=60),
    mutated_rendering(),
    wrong_arguments(),
    random_structured(),
    JSON_ST,
    st.binary(max_size=10),
)


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=st.one_of(ACTIONS_ST.map(lambda a: ("valid", a)), JUNK_ST.map(lambda j: ("junk", j))))
def test_parser_never_raises_and_renderings_parse_back(case: tuple[str, Any]) -> None:
    tag, value = case
    if tag == "valid":
        text = render_action(value)
        assert parse_response(text) == ParseResult(action=value)
        assert parse_response("<think>t</think>\n" + text) == ParseResult(action=value, thought="t")
        message = structured(value.name, json.dumps(value.arguments))
        assert parse_response(message) == ParseResult(action=value)
    else:
        result = parse_response(value)
        assert isinstance(result, ParseResult)
        assert result.ok or not result.error.startswith("internal parser error"), result.error  # type: ignore[union-attr]


def test_an_internal_failure_becomes_an_error_result(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.manager.wire as wire

    def broken(response: object, strict: bool) -> ParseResult:
        raise RuntimeError("boom")

    monkeypatch.setattr(wire, "_parse", broken)
    assert error_of(render_action(COMMIT)) == "internal parser error (RuntimeError: boom); please report it"


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "response",
    [
        f"<tool_call>\n{DEEP}\n</tool_call>",
        '<tool_call>\n{"name": "check_execution", "arguments": {"step_id": ' + DEEP + "}}\n</tool_call>",
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "x", "arguments": DEEP}}]},
    ],
    ids=["text", "text-argument", "structured"],
)
def test_a_deeply_nested_reply_is_refused_in_one_line_without_a_traceback(response: object, caplog) -> None:
    result = parse_response(response)
    assert result.error is not None and "JSON nested deeper than 100 levels" in result.error
    assert "internal parser error" not in result.error and not caplog.records


def test_a_lone_surrogate_in_a_call_becomes_its_escape_text() -> None:
    text = '<tool_call>\n{"name": "OPEN_STATE", "arguments": {"issue": "a\\udc00b", "constraints": [], "relations": [{"type": "init"}]}}\n</tool_call>'  # noqa: E501
    call = {"name": "check_execution", "arguments": {"step_id": 1, "\ud800": 1}}
    structured = {"content": None, "tool_calls": [{"function": call}]}
    action = parse_response(text).action
    assert action is not None and action.arguments["issue"] == "a\\udc00b"
    render_action(action).encode("utf-8")  # encodes: no lone surrogate left
    assert "\\ud800" in parse_response(structured).error  # the unknown argument is named by its escape text
    huge = '<tool_call>\n{"name": "check_execution", "arguments": {"step_id": ' + "1" * 5000 + "}}\n</tool_call>"
    assert parse_response(huge).error.startswith("bad JSON in tool call #1: Exceeds the limit (4300 digits)")
