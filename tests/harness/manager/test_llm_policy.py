"""The ``llm`` / ``freeform`` manager policies: the conversation built for an activation, structured tool calls read
the same as their wire text, the OpenAI backend end to end against a local server, whole runtime episodes (scripted
garbage / illegal / valid replies, a backend that raises, a tiny in-process transformers model), and the manager
spec grammar of ``get_policy``."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.checks import CHECK_KINDS
from harness.llm import ChatReply
from harness.manager.actions import ACTION_NAMES, make_action, tool_schemas
from harness.manager.llm_policy import LLMPolicy, message_to_text, reply_to_text
from harness.manager.policy_registry import POLICIES, get_policy
from harness.manager.policy_types import ManagerView, PolicyInput
from harness.manager.prompts import (
    FREEFORM_SYSTEM,
    MANAGER_SYSTEM_POLICY,
    activation_observation,
    render_activation,
    render_evidence,
    render_tool_response,
    render_tool_responses,
    tool_response_body,
)
from harness.manager.records import AnalyticalState, ManagerObservation
from harness.manager.runtime import ManagerRuntime, RuntimeConfig
from harness.manager.windowed import WindowedModelPolicy, WindowRulePolicy
from harness.manager.wire import parse_response, render_action
from harness.sandbox import Sandbox, SandboxConfig
from harness.specs import MANAGER_GRAMMAR
from harness.tasks import Turn, TurnConstraint, load_task
from harness.worker import ScriptedWorker

# the scripted OpenAI-compatible server and the tiny-model builder live in tests/harness/test_llm.py; importing it by
# its pytest module name works under `python -m pytest` and plain `pytest` alike
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_llm import FakeOpenAI, build_tiny_chat_model, completion, needs_transformers, tool_call  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
RETAIL = ROOT / "harness" / "builtin_tasks" / "retail-sales"
ISOLATION = "bwrap" if shutil.which("bwrap") else "none"

TURN = Turn(
    turn_id="2",
    question="What is the revenue per region?",
    context="Normalise region names.",
    depends_on=("1",),
    relation="progress",
    constraints=(TurnConstraint("revenue is positive", "assert (sales['revenue'] > 0).all()"),),
)
OPEN = render_action(make_action("OPEN_STATE", {"issue": "q", "constraints": [], "relations": [{"type": "init"}]}))


def observation(last_result: str | None = None) -> str:
    return ManagerObservation("turn_end", "S2", 2, 3, 4, None, 0, False, last_result).render()


def policy_input(previous: tuple[tuple[str, str], ...] = ()) -> PolicyInput:
    last = previous[-1][1] if previous else None
    return PolicyInput(
        observation=observation(last),
        legal_actions=("OPEN_STATE", "ABSTAIN", "check_execution"),
        turn=TURN,
        turn_states={"1": "S1"},
        previous=previous,
    )


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3 and a tokenizer trained on the manager's prompt and tools (built once per module)."""
    corpus = [MANAGER_SYSTEM_POLICY, json.dumps(tool_schemas())]
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny-manager"), corpus)


class ScriptedBackend:
    """Returns scripted replies (text or an OpenAI message dict), then repeats the last; keeps every request."""

    def __init__(self, replies: list[str | dict[str, Any]]):
        self.replies = list(replies)
        self.requests: list[tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = []

    def chat(self, messages, tools=None) -> ChatReply:
        self.requests.append((messages, tools))
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, dict):
            return ChatReply(reply.get("content") or "", 3, 2, message=reply)
        return ChatReply(reply, 3, 2)


class RaisingBackend:
    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, tools=None) -> ChatReply:
        self.calls += 1
        raise ConnectionError("chat endpoint http://127.0.0.1:9/v1/chat/completions failed: refused")


# ---------------------------------------------------------------- prompts and the conversation


def test_system_policies_cover_the_protocol_and_the_ablation_drops_the_policy():
    for name in ACTION_NAMES:
        assert name in MANAGER_SYSTEM_POLICY and name in FREEFORM_SYSTEM
    for section in ("# Information boundary", "# Authority", "# Checklist", "# Evidence-gated repair",
                    "# Flow: turn-aligned", "# Flow: segment-induced", "exactly ONE action"):  # fmt: skip
        assert section in MANAGER_SYSTEM_POLICY
    # the free-form ablation keeps the lifecycle and the repair protocol, and drops the state schema and the checklist
    for kept in ("# Information boundary", "# Authority", "# Evidence-gated repair", "# Flow: turn-aligned",
                 "# Flow: segment-induced", "exactly ONE action"):  # fmt: skip
        assert kept in FREEFORM_SYSTEM
    for prescribed in ("# Checklist", "the issue a stretch of work settles", "follow the checklist"):
        assert prescribed not in FREEFORM_SYSTEM


def public_turn(text: str) -> dict[str, Any]:
    return json.loads(text.split("## Public turn\n")[1].split("\n## Legal actions now")[0])


def test_activation_message_holds_observation_public_turn_and_legal_actions():
    text = render_activation(policy_input())
    assert text.startswith("# Activation: turn_end\n## Observation\n" + observation())
    assert public_turn(text) == {
        "turn_id": "2",
        "question": TURN.question,
        "context": TURN.context,
        "committed_states_by_turn": {"1": "S1"},
        "constraints": [{"text": "revenue is positive"}],
    }
    assert text.endswith(
        "## Legal actions now\nOPEN_STATE, ABSTAIN, check_execution\nRespond with exactly one action."
    )


def test_the_oracle_switches_add_the_task_graph_and_the_constraint_code():
    inp = replace(policy_input(), view=ManagerView(oracle_relations=True, executable_constraints=True))
    turn = public_turn(render_activation(inp))
    assert (turn["depends_on_turns"], turn["declared_relation"]) == (["1"], "progress")
    assert turn["committed_states_of_those_turns"] == {"1": "S1"} == turn["committed_states_by_turn"]
    assert turn["constraints"] == [{"text": "revenue is positive", "code": "assert (sales['revenue'] > 0).all()"}]
    assert "declared_relation" in inp.text() and "declared_relation" not in policy_input().text()


NO_CHECK = "[evidence this activation: no check or probe has run]"
VERIFIED = json.dumps({"ok": True, "step_id": 2, "verdict": "verified", "error_type": None})
CRASHED = json.dumps(
    {"ok": True, "step_id": 3, "verdict": "failed", "error_type": "KeyError", "error_message": "'Regio'"}
)
PROBE_FAILED = json.dumps({"ok": True, "succeeded": False, "error_type": "AssertionError", "error_message": "x" * 300})
PROBE_PASSED = json.dumps({"ok": True, "succeeded": True, "error_type": None})
REFUSED = json.dumps({"ok": False, "error": "no executed step with id 9"})


def test_the_evidence_digest_counts_failures_and_quotes_the_first():
    assert render_evidence([]) == render_evidence([REFUSED, "rejected: no action"]) == NO_CHECK
    assert render_evidence([VERIFIED, PROBE_PASSED, PROBE_PASSED]) == (
        "[evidence this activation: every check and probe passed (1 check, 2 probes)]"
    )
    assert render_evidence([VERIFIED]) == "[evidence this activation: 1 check passed; no probe has run]"
    assert (
        render_evidence([PROBE_PASSED])
        == "[evidence this activation: every check and probe passed (0 checks, 1 probe)]"
    )
    assert render_evidence([VERIFIED, CRASHED, PROBE_PASSED]) == (
        "[evidence this activation: 1 failed: check_execution of step 3 failed: KeyError: 'Regio']"
    )
    both = render_evidence([PROBE_FAILED, CRASHED])
    assert both.startswith("[evidence this activation: 2 failed: run_probe failed: xxx") and both.endswith("...]")
    assert len(both) == len("[evidence this activation: 2 failed: ]") + 200  # the quote is cut at 200 characters
    constraint = json.dumps({"ok": True, "passed": False, "reason": "evaluated to False", "succeeded": True})
    assert render_evidence([constraint]).endswith(": 1 failed: check_constraint failed: evaluated to False]")
    mismatch = json.dumps({"ok": True, "step_id": 4, "verdict": "code_mismatch"})
    assert render_evidence([mismatch]).endswith("1 failed: check_execution of step 4: verdict code_mismatch]")
    check = {"ok": True, "passed": False, "kind": "share", "variable": "s", "requirement": "r", "reason": "s is 1.2"}
    assert render_evidence([json.dumps(check)]).endswith(": 1 failed: run_check failed: s is 1.2]")
    not_run = json.dumps({**check, "passed": None, "reason": None, "error_type": "NameError"})  # no verdict
    assert render_evidence([not_run]) == NO_CHECK
    assert render_evidence([json.dumps({**check, "passed": True})]).endswith("1 check passed; no probe has run]")


def test_both_system_prompts_list_every_check_kind_with_its_fields():
    for kind, cls in CHECK_KINDS.items():
        line = next(line for line in MANAGER_SYSTEM_POLICY.splitlines() if line.startswith(f"- {kind}("))
        assert line in FREEFORM_SYSTEM.splitlines()
        assert all(f.name in line.split("):")[0] for f in fields(cls)), line
    assert (
        "order:largest|smallest" in MANAGER_SYSTEM_POLICY and "agg: sum|mean|median|count|min|max" in FREEFORM_SYSTEM
    )


def test_each_tool_response_carries_the_digest_of_the_results_up_to_it():
    results = [VERIFIED, CRASHED, "rejected: no action"]
    responses = render_tool_responses(results)
    assert responses == [render_tool_response(r, render_evidence(results[: k + 1])) for k, r in enumerate(results)]
    assert responses[0].endswith("1 check passed; no probe has run]\n</tool_response>")
    assert responses[2].endswith("1 failed: check_execution of step 3 failed: KeyError: 'Regio']\n</tool_response>")
    assert [tool_response_body(r) for r in responses] == results  # parsers read the result back without the digest
    assert render_tool_responses(results[:2]) == responses[:2]  # built one response at a time: the same text
    assert tool_response_body(render_tool_response("a\n[b]")) == "a\n[b]"  # a result's own bracketed line is kept
    assert tool_response_body("prose") is None


def test_the_conversation_replays_earlier_actions_and_keeps_its_prefix():
    backend = ScriptedBackend(["x"])
    policy = LLMPolicy(backend)
    first = policy.messages(policy_input())
    check = render_action(make_action("check_execution", {"step_id": 3}))
    previous = ((check, '{"ok": true}'), ("", "rejected: the policy failed"), ("prose", "rejected: no action"))
    later = policy.messages(policy_input(previous))
    assert [m["role"] for m in first] == ["system", "user"]
    assert first[0]["content"] == MANAGER_SYSTEM_POLICY
    assert later[:2] == first  # the activation's opening messages do not change within the activation
    assert later[2:] == [
        {"role": "assistant", "content": check},
        {"role": "user", "content": f'<tool_response>\n{{"ok": true}}\n{NO_CHECK}\n</tool_response>'},
        {"role": "assistant", "content": "prose"},  # the failed call (empty raw) is left out
        {"role": "user", "content": render_tool_response("rejected: no action", NO_CHECK)},
    ]
    assert activation_observation(observation("rejected: no action")) == observation()


def test_activation_observation_resets_the_last_result_in_rendered_and_other_json():
    """The rendered text has its one line replaced; indented or hand-written JSON is parsed and re-rendered. Both
    give what rendering the record with last_action_result=None gives, whatever the result text holds."""
    draft_state = AnalyticalState("S2", "mean fare", conclusions=("3.2",), source_step_start=3, source_step_end=4)
    start = ManagerObservation("turn_end", "S2", 2, 3, 4, draft_state, 1, False, None).render()
    for result in ['rejected: "quoted"\nline', '"last_action_result": 1', ""]:
        later = ManagerObservation("turn_end", "S2", 2, 3, 4, draft_state, 1, False, result)
        assert activation_observation(later.render()) == start
        assert activation_observation(json.dumps(later.to_dict(), indent=2)) == start
    assert activation_observation(start) is start  # nothing to reset: the same text back
    assert "# Activation: turn_end" in render_activation(policy_input((("x", "rejected: no action"),)))


def test_respond_sends_the_tools_and_counts_tokens():
    backend = ScriptedBackend([OPEN])
    policy = LLMPolicy(backend, name="freeform", system=FREEFORM_SYSTEM)
    assert policy.respond(policy_input()) == OPEN
    messages, tools = backend.requests[0]
    assert tools == tool_schemas() and messages[0]["content"] == FREEFORM_SYSTEM
    assert (policy.calls, policy.prompt_tokens, policy.completion_tokens) == (1, 3, 2)


PROJECT_TEMPLATE = ROOT / "harness" / "chat_template.jinja"


@needs_transformers
@pytest.mark.skipif(not PROJECT_TEMPLATE.exists(), reason=f"the project chat template is not at {PROJECT_TEMPLATE}")
def test_tool_responses_as_user_text_render_like_tool_messages(tiny_folder):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_folder)
    check = render_action(make_action("check_execution", {"step_id": 3}))
    previous = ((f"<think>\nfirst check\n</think>\n\n{check}", '{"ok": true}'), ("prose", "rejected: no action"))
    ours = LLMPolicy(ScriptedBackend(["x"])).messages(policy_input(previous))
    as_tool = [
        {"role": "tool", "content": m["content"].removeprefix("<tool_response>\n").removesuffix("\n</tool_response>")}
        if m["content"].startswith("<tool_response>")
        else m
        for m in ours
    ]
    assert [m["role"] for m in as_tool][2:] == ["assistant", "tool", "assistant", "tool"]
    template = PROJECT_TEMPLATE.read_text()
    rendered = [
        tokenizer.apply_chat_template(
            messages, tools=tool_schemas(), chat_template=template, tokenize=False, add_generation_prompt=True
        )  # fmt: skip
        for messages in (ours, as_tool)
    ]
    assert rendered[0] == rendered[1]
    assert f'<|im_start|>user\n<tool_response>\n{{"ok": true}}\n{NO_CHECK}\n</tool_response><|im_end|>' in rendered[0]


# ---------------------------------------------------------------- structured tool calls == wire text


def message(*calls: dict[str, Any], content: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "tool_calls": list(calls), **extra}


OPEN_ARGS = '{"issue": "q", "constraints": [], "relations": [{"type": "init"}]}'
SAME_ERROR_CASES = {
    "valid": message(tool_call("OPEN_STATE", OPEN_ARGS)),
    "dict arguments": message(
        {"type": "function", "function": {"name": "check_execution", "arguments": {"step_id": 1}}}
    ),
    "empty arguments": message(tool_call("COMMIT_STATE", "")),
    "with reasoning": message(tool_call("ABSTAIN", "{}"), reasoning_content="nothing to do"),
    "think in content": message(tool_call("ABSTAIN", "{}"), content="<think>hm</think>"),
    "blank content": message(tool_call("ABSTAIN", "{}"), content="\n\n"),
    "unknown name": message(tool_call("DELETE_STATE", "{}")),
    "missing argument": message(tool_call("OPEN_STATE", '{"issue": "q"}')),
    "wrong type": message(tool_call("check_execution", '{"step_id": "3"}')),
    "tool and control": message(tool_call("check_execution", '{"step_id": 1}'), tool_call("ABSTAIN", "{}")),
    "two controls": message(tool_call("ABSTAIN", "{}"), tool_call("COMMIT_STATE", "{}")),
    "bad relation": message(tool_call("OPEN_STATE", '{"issue": "q", "constraints": [], "relations": []}')),
}


@pytest.mark.parametrize("case", sorted(SAME_ERROR_CASES))
def test_a_structured_reply_and_its_text_parse_the_same(case):
    structured = parse_response(SAME_ERROR_CASES[case])
    text = parse_response(message_to_text(SAME_ERROR_CASES[case]))
    assert (text.action, text.error) == (structured.action, structured.error)
    if case in ("valid", "dict arguments", "empty arguments", "with reasoning", "think in content", "blank content"):
        assert text.ok
    else:
        assert not text.ok


def test_invalid_json_arguments_are_kept_verbatim_and_reported_as_bad_json():
    for arguments in ('{"step_id": 3', '{"step_id": 3}}', '{"step_id": 3}, "name": "ABSTAIN"', "step_id=3"):
        broken = message(tool_call("check_execution", arguments))
        text = message_to_text(broken)
        assert arguments in text
        structured, rendered = parse_response(broken), parse_response(text)
        assert structured.error is not None and structured.error.startswith("bad JSON"), arguments
        assert rendered.error is not None and rendered.error.startswith("bad JSON"), arguments


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 30) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)
_arguments = st.one_of(
    st.dictionaries(st.sampled_from(["step_id", "code", "issue", "mode", "x"]), _json_values, max_size=3),
    st.dictionaries(st.sampled_from(["step_id", "code"]), _json_values, max_size=2).map(json.dumps),
    st.text(max_size=20),  # mostly not JSON
    st.sampled_from(['{"step_id": 3', '{"step_id": 1}, "name": "ABSTAIN"', "", "[1]", "{}"]),
)
_calls = st.lists(
    st.builds(
        lambda name, arguments: {"type": "function", "function": {"name": name, "arguments": arguments}},
        st.sampled_from([*ACTION_NAMES, "nope", ""]) | st.none(),
        _arguments,
    ),
    min_size=1,
    max_size=3,
)
_contents = st.sampled_from([None, "", "\n\n", "<think>hm</think>", "prose", "<think>", "<tool_call>{}</tool_call>"])


@settings(max_examples=300, deadline=None)
@given(_calls, _contents, st.sampled_from([None, "", "plan", "a </think> b"]))
def test_any_structured_reply_and_its_text_agree(calls, content, reasoning):
    structured = message(*calls, content=content, reasoning_content=reasoning)
    text = message_to_text(structured)  # never raises
    expected, got = parse_response(structured), parse_response(text)
    assert got.ok == expected.ok, (text, expected.error, got.error)
    assert got.action == expected.action


def test_malformed_call_objects_stay_errors_in_both_forms():
    # their errors are about the structured shape, which the text form does not have: both are rejected
    for call in (
        {"type": "code_interpreter", "function": {"name": "ABSTAIN", "arguments": "{}"}},
        {"type": "function", "function": "ABSTAIN"},
        "ABSTAIN",
    ):
        structured = message(call)  # type: ignore[arg-type]
        assert not parse_response(structured).ok and not parse_response(message_to_text(structured)).ok


def test_stray_content_stays_an_error_in_both_forms():
    stray = message(tool_call("ABSTAIN", "{}"), content="I will abstain.")
    assert not parse_response(stray).ok and not parse_response(message_to_text(stray)).ok
    assert parse_response(stray, strict=False).ok and parse_response(message_to_text(stray), strict=False).ok


def test_reply_to_text_uses_the_text_when_there_are_no_tool_calls():
    assert reply_to_text(ChatReply(OPEN, message={"role": "assistant", "content": OPEN})) == OPEN
    assert reply_to_text(ChatReply(OPEN)) == OPEN
    structured = ChatReply("", message=message(tool_call("ABSTAIN", "{}")))
    assert parse_response(reply_to_text(structured)).action == make_action("ABSTAIN", {})


# ---------------------------------------------------------------- the OpenAI backend end to end


def test_llm_policy_over_a_real_http_endpoint():
    replies = [(200, completion(None, [tool_call("check_execution", '{"step_id": 3}')])), (200, completion(OPEN))]
    with FakeOpenAI(replies) as server:
        policy = get_policy(f"llm:{server.url}")
        first = policy.respond(policy_input())
        second = policy.respond(policy_input(((first, '{"ok": true}'),)))
    assert parse_response(first).action == make_action("check_execution", {"step_id": 3})
    assert second == OPEN and policy.name == "llm"
    posts = server.posts()
    assert [r["method"] for r in server.requests] == ["GET", "POST", "POST"]  # the model came from /models
    assert posts[0]["body"]["tools"] == tool_schemas() and posts[0]["body"]["model"] == "tiny-manager"
    assert posts[1]["body"]["messages"][2:] == [
        {"role": "assistant", "content": first},
        {"role": "user", "content": f'<tool_response>\n{{"ok": true}}\n{NO_CHECK}\n</tool_response>'},
    ]


def test_an_endpoint_error_propagates_from_respond():
    with FakeOpenAI([(500, {"error": {"message": "out of memory"}})]) as server:
        policy = get_policy(f"freeform:{server.url}")
        with pytest.raises(RuntimeError, match="HTTP 500: out of memory"):
            policy.respond(policy_input())
    assert policy.name == "freeform"


# ---------------------------------------------------------------- whole episodes


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(isolation=ISOLATION)) as sb:
        yield sb


def play(sandbox, policy, config: RuntimeConfig):
    task = load_task(RETAIL)
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    with sandbox.new_kernel(task.public_dir) as kernel:
        return ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, {}), policy, config).run()


def policy_actions(record) -> list[dict[str, Any]]:
    return [a for act in record.activations if act["actor"] == "policy" for a in act["actions"]]


def test_an_episode_with_garbage_illegal_and_valid_replies_completes(sandbox):
    update = message(tool_call("UPDATE_STATE", json.dumps({"issue": "q", "source_interval": {"start_step": 0,
                     "end_step": 0}, "used_variables": ["sales"], "conclusions": ["loaded"]})))  # fmt: skip
    replies: list[str | dict[str, Any]] = [
        "garbage, no tool call",  # turn 1 start
        render_action(make_action("COMMIT_STATE", {})),  # illegal: nothing is open
        OPEN,  # legal: the activation ends
        message(tool_call("check_execution", "{not json")),  # turn 1 end: structured, bad JSON
        update,  # structured, legal
        # the 2nd (last) turn-end activation: finalize; the harness then commits the finalized state
        render_action(
            make_action("FINALIZE_RELATIONS", {"mode": "confirm", "relations": [], "conflict_evidence": ""})
        ),
        render_action(make_action("ABSTAIN", {})),  # later turns: nothing open, ABSTAIN ends each activation
    ]
    backend = ScriptedBackend(replies)
    record = play(sandbox, LLMPolicy(backend), RuntimeConfig(max_turn_end_activations=2))
    actions = policy_actions(record)
    assert len(actions) == len(backend.requests)
    first = actions[:3]
    assert [a["legal"] for a in first] == [False, False, True]
    assert first[0]["result"].startswith("rejected:") and first[1]["result"].startswith("illegal:")
    bad_json = actions[3]
    assert bad_json["raw"].startswith("<tool_call>") and bad_json["result"].startswith("rejected: bad JSON")
    assert [a["parsed"]["name"] for a in actions[4:6]] == ["UPDATE_STATE", "FINALIZE_RELATIONS"]
    assert all(a["legal"] for a in actions[4:]) and len(actions) == 6 + 2 * 4  # then one ABSTAIN per activation
    harness_acts = [
        (a["turn_id"], a["actions"][0]["parsed"]["name"]) for a in record.activations if a["actor"] == "harness"
    ]
    assert harness_acts == [("1", "COMMIT_STATE")]
    assert [s["id"] for s in record.states] == ["S1"]
    assert [v["name"] for v in record.states[0]["used_variables"]] == ["sales"]
    # within an activation the model saw its earlier responses and their results
    third_messages = backend.requests[2][0]
    assert third_messages[2] == {"role": "assistant", "content": "garbage, no tool call"}
    assert third_messages[5]["content"].startswith("<tool_response>\nillegal:")
    assert all(detail["correct"] for detail in record.grade["details"]["turns"].values())


def test_a_backend_that_raises_is_recorded_as_rejected_actions(sandbox):
    backend = RaisingBackend()
    record = play(sandbox, LLMPolicy(backend), RuntimeConfig(max_actions=2, max_turn_end_activations=1))
    actions = policy_actions(record)
    assert backend.calls == len(actions) > 0
    assert all(not a["legal"] and "the policy failed to respond (ConnectionError" in a["result"] for a in actions)
    assert record.grade["score"] is not None


def test_nothing_private_reaches_the_model(sandbox, tmp_path):
    marker = "PRIVATE-MARKER-llm-5d1e"
    ran = "WORKER-CODE-MARKER-llm-7a2c"
    root = tmp_path / "retail"
    shutil.copytree(RETAIL, root)
    reference = json.loads((root / "private" / "reference.json").read_text())
    for turn in reference.values():
        turn["code"] += f"\n# {ran}"  # the scripted worker runs it: the worker's code, which the manager sees
        turn["answer_note"] = marker  # private fields it does not run never reach the model
    (root / "private" / "reference.json").write_text(json.dumps(reference))
    (root / "private" / "notes.md").write_text(f"grader notes {marker}\n")
    check = render_action(make_action("check_execution", {"step_id": 0}))
    abstain = render_action(make_action("ABSTAIN", {}))
    backend = ScriptedBackend(["garbage", OPEN, check, abstain])  # ABSTAIN is illegal while S1 is open
    task = load_task(root)
    programs = {t: ref.code for t, ref in task.load_answers().items()}
    with sandbox.new_kernel(task.public_dir) as kernel:
        config = RuntimeConfig(max_turn_end_activations=1)
        record = ManagerRuntime(task, kernel, ScriptedWorker(kernel, programs, {}), LLMPolicy(backend), config).run()
    assert any(ran in (s["code"] or "") for s in record.worker_steps)  # the worker ran it
    sent = [m["content"] for messages, _ in backend.requests for m in messages]
    assert len(backend.requests) > 10 and any('"verdict": "verified"' in text for text in sent)  # tool results came
    assert any(ran in text for text in sent)  # check_execution shows the worker's code
    assert not [text for text in sent if marker in text]
    # (the worker's own printed results do reach the manager through check_execution; with the scripted worker they
    # equal the reference answers, so answers are not scanned for here; tests/harness/manager/test_runtime.py checks
    # that no reference answer reaches the worker's prompts)


@needs_transformers
def test_a_tiny_transformers_model_drives_a_whole_episode(sandbox, tiny_folder):
    from harness.llm import HFChatBackend

    backend = HFChatBackend(str(tiny_folder), max_new_tokens=8)
    policy = LLMPolicy(backend, name="llm-hf")
    record = play(sandbox, policy, RuntimeConfig(max_actions=2, max_turn_end_activations=1))
    actions = policy_actions(record)
    assert policy.calls == len(actions) > 0
    assert all(a["raw"] is not None and a["result"] for a in actions)
    assert policy.prompt_tokens > 0 and 0 < policy.completion_tokens <= 8 * policy.calls
    assert record.config["manager"] == "llm-hf"


# ---------------------------------------------------------------- the manager spec grammar


def test_get_policy_builds_every_spec():
    assert list(POLICIES) == [
        "none", "rule", "window-rule", "windowed", "windowed-hf", "llm", "llm-hf", "freeform", "freeform-hf", "hier",
        "hier-checks", "read",
    ]  # fmt: skip
    assert get_policy("none").active is False and get_policy("rule").name == "rule"
    rule = get_policy("window-rule")
    assert isinstance(rule, WindowRulePolicy) and rule.k == 3 and get_policy("window-rule:5").k == 5
    windowed = get_policy("windowed:4:http://localhost:8000/v1")
    assert isinstance(windowed, WindowedModelPolicy) and (windowed.k, windowed.name) == (4, "windowed")
    assert windowed.backend.base_url == "http://localhost:8000/v1"
    llm = get_policy("llm:http://localhost:8000/v1")
    assert isinstance(llm, LLMPolicy) and llm.system == MANAGER_SYSTEM_POLICY and llm.name == "llm"
    freeform = get_policy("freeform:https://example.org/v1")
    assert isinstance(freeform, LLMPolicy) and freeform.system == FREEFORM_SYSTEM and freeform.name == "freeform"


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        ("llm", "URL .* is missing"),
        ("llm:", "URL .* is missing"),
        ("llm:localhost:8000", "http\\(s\\) API root"),
        ("window-rule:0", "K must be a whole number >= 1"),
        ("window-rule:x", "K must be a whole number >= 1"),
        ("windowed:0:http://localhost:8000/v1", "K must be a whole number >= 1"),
        ("windowed:3", "model-backed: give K and a model, windowed:K:URL .* windowed-hf:K:PATH .* window-rule:K"),
        ("windowed", "model-backed: .*; got no argument"),
        ("windowed:3:localhost:8000", "http\\(s\\) API root"),
        ("windowed-hf:3:/no/such/model", "model folder /no/such/model does not exist"),
        ("rule:3", "takes no argument"),
        ("llm-hf", "PATH .* is missing"),
        ("freeform-hf:/no/such/model", "model folder /no/such/model does not exist"),
        (
            "gpt",
            "unknown variant\\(s\\) \\['gpt'\\]; valid names: none, rule, window-rule, windowed, windowed-hf, llm",
        ),
    ],
)
def test_a_bad_spec_names_the_problem_the_grammar_and_an_example(spec, reason):
    with pytest.raises(ValueError, match=reason) as info:
        get_policy(spec)
    message = str(info.value)
    assert MANAGER_GRAMMAR in message and "\n" not in message
    assert MANAGER_GRAMMAR == (
        "none | rule | window-rule[:K] | windowed:K:URL | windowed-hf:K:PATH | llm:URL | llm-hf:PATH | freeform:URL | "
        "freeform-hf:PATH | hier:none | hier:llm:URL | hier:llm-hf:PATH | hier-checks:none | hier-checks:gold | "
        "hier-checks:llm:URL | hier-checks:llm-hf:PATH | read"
    )
    assert "e.g. --manager rule" in message


@needs_transformers
def test_llm_hf_spec_loads_a_local_folder(tiny_folder):
    folder = tiny_folder
    policy = get_policy(f"llm-hf:{folder}")
    assert isinstance(policy, LLMPolicy) and policy.name == "llm-hf" and policy.system == MANAGER_SYSTEM_POLICY
    assert get_policy(f"freeform-hf:{folder}").system == FREEFORM_SYSTEM


def test_bad_replies_never_abort_an_episode_and_its_record_round_trips(sandbox, tmp_path, caplog):
    """A lone surrogate in a tool call (the model wrote the escape ``\\udc00``), a 4 MB reply and a 100,000-deep reply
    (as text and as a structured call): the episode completes, the cut reply is recorded as cut, the deep ones are
    refused in one line without a traceback, and the record is written, read back and rendered by the viewer."""
    from harness.manager.episode import append_episode, read_episodes
    from harness.viewer.cli import add_view_parser, write_pages

    surrogate_open = '<tool_call>\n{"name": "OPEN_STATE", "arguments": {"issue": "q\\udc00", "constraints": [], ' \
        '"relations": [{"type": "init"}]}}\n</tool_call>'  # fmt: skip
    deep = "[" * 100_000 + "]" * 100_000
    replies: list[str | dict[str, Any]] = [
        "x" * 4_000_000,  # turn 1 start: cut, then refused (text outside the tags)
        f"<tool_call>\n{deep}\n</tool_call>",
        message(tool_call("check_execution", deep)),
        surrogate_open,  # legal: ends the activation, the draft's issue holds the surrogate
        render_action(make_action("ABSTAIN", {})),
    ]
    backend = ScriptedBackend(replies)
    record = play(sandbox, LLMPolicy(backend), RuntimeConfig(max_actions=4, max_turn_end_activations=1))
    actions = policy_actions(record)
    cut, too_deep, too_deep_structured, opened = actions[:4]
    assert cut["raw_cut"] is True and cut["raw_chars"] == 4_000_000 and len(cut["raw"]) == 32_000
    assert cut["result"].startswith("rejected: the reply was cut to 32000 of its 4000000 characters; ")
    assert "raw_cut" not in opened and opened["legal"] is True
    for refused in (too_deep, too_deep_structured):
        assert "JSON nested deeper than 100 levels" in refused["result"] and "\n" not in refused["result"]
    assert not [r for r in caplog.records if r.exc_info]  # no traceback logged
    assert opened["parsed"]["arguments"]["issue"] == "q\\udc00"  # the escape text, 6 characters

    episodes = tmp_path / "episodes.jsonl"
    append_episode(episodes, record)
    assert episodes.stat().st_size < 2_000_000  # the 4 MB reply is not in the record
    (back,) = read_episodes(episodes)
    assert back == record
    parser = argparse.ArgumentParser()
    add_view_parser(parser.add_subparsers()).set_defaults(func=None)
    (page,) = write_pages(parser.parse_args(["view", str(episodes), "--out", str(tmp_path / "page.html")]))
    assert "q\\udc00" in page.read_text(encoding="utf-8")
